package dirstore

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// FuzzRecovery damages a segment of four acknowledged writes in the bytes
// after its header (overwriting from some offset, and cutting it at some
// length) and opens it. Whatever the bytes, Open either refuses with
// ErrCorrupt or opens a store that holds a prefix of the writes, each
// intact, and takes writes; it never panics, and never hands out a
// damaged body.
func FuzzRecovery(f *testing.F) {
	f.Add(uint16(0), []byte{}, uint16(0xffff))
	f.Add(uint16(30), []byte{0xff}, uint16(0xffff))
	f.Add(uint16(0), []byte{}, uint16(100))
	f.Add(uint16(200), make([]byte, 64), uint16(0xffff))
	f.Add(uint16(5), []byte("wkf1"), uint16(150))
	src := f.TempDir()
	s, err := Open(src)
	if err != nil {
		f.Fatal(err)
	}
	var etags []ownership.ETag
	for i := range 4 {
		etags = append(etags, mustPut(f, s, "k"+strconv.Itoa(i), strings.Repeat("v", 10*i+1), ownership.IfAbsent()))
	}
	s.Close()
	segFile := segmentPath(f, src)
	whole, err := os.ReadFile(segFile)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, at uint16, patch []byte, cut uint16) {
		checkRecovery(t, src, whole, etags, at, patch, cut)
	})
}

// checkRecovery is one run of FuzzRecovery on the segment whole of the
// store in src, which holds the writes etags.
func checkRecovery(t *testing.T, src string, whole []byte, etags []ownership.ETag, at uint16, patch []byte, cut uint16) {
	seg := slices.Clone(whole)
	off := segHeaderLen + int(at)%(len(seg)-segHeaderLen+1)
	for i, b := range patch {
		if off+i < len(seg) {
			seg[off+i] = b
		} else {
			seg = append(seg, b)
		}
	}
	seg = seg[:min(len(seg), segHeaderLen+int(cut))]
	s, err := Open(copyStore(t, src, seg))
	if errors.Is(err, ErrCorrupt) {
		return
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	gone := false
	for i, etag := range etags {
		key := "k" + strconv.Itoa(i)
		obj, err := s.Get(t.Context(), key)
		switch {
		case errors.Is(err, ownership.ErrNotFound):
			gone = true
		case err != nil:
			t.Fatalf("get %q: %v", key, err)
		case gone:
			t.Fatalf("get %q: present though an earlier write is gone", key)
		case obj.ETag != etag || string(obj.Body) != strings.Repeat("v", 10*i+1):
			t.Fatalf("get %q: (%q, %s), want its write", key, obj.Body, obj.ETag)
		}
	}
	mustPut(t, s, "after", "a", ownership.Always())
}

// FuzzIndex drives the index with puts and removes (each byte of ops one
// operation on one of 16 keys), listing now and then, and checks that
// the listing is always exactly the present keys in byte order and that
// live counts their records.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0x81, 0x40, 0x00, 0xc1, 0x01})
	f.Add([]byte{0x05, 0x85, 0x05, 0x45, 0x85, 0x05, 0xc5})
	f.Fuzz(func(t *testing.T, ops []byte) {
		x := newIndex()
		want := map[string]int64{}
		for i, op := range ops {
			key := "k" + strconv.Itoa(int(op&0x0f))
			switch op >> 6 {
			case 0, 1:
				e := entry{off: int64(i), size: uint32(recHeaderLen + len(key) + i), keyLen: uint16(len(key))}
				x.put(key, e)
				want[key] = int64(e.size)
			case 2:
				x.remove(key)
				delete(want, key)
			case 3:
				checkIndex(t, x, want)
			}
		}
		checkIndex(t, x, want)
	})
}

func checkIndex(t *testing.T, x *index, want map[string]int64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	live := int64(0)
	for k, size := range want {
		keys = append(keys, k)
		live += size
	}
	slices.Sort(keys)
	if got := x.sorted(); !slices.Equal(got, keys) {
		t.Fatalf("sorted: %q, want %q", got, keys)
	}
	if x.live != live {
		t.Fatalf("live: %d, want %d", x.live, live)
	}
}
