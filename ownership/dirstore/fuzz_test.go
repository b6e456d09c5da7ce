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

// FuzzRecord feeds arbitrary bytes to the record and frame decoders.
// They never panic; what they refuse is ErrCorrupt, the store's kind of
// damage; and what they accept is exactly what the encoder writes: a
// record re-encodes to its own bytes, and the records of a payload tile
// it with nothing left over.
func FuzzRecord(f *testing.F) {
	var fb frameBuilder
	fb.reset()
	fb.add(kindPut, "actors/counter/a/state", etagBits{1, 2, 3}, []byte("wk1 state 1 2\n\x01k\x01v"))
	fb.add(kindDelete, "k", etagBits{4}, nil)
	frame := fb.finish(42)
	f.Add(frame[frameHeaderLen:])
	f.Add(frame)
	f.Add(appendRecord(nil, kindPut, "k", etagBits{}, nil))
	f.Add([]byte{})
	f.Add(make([]byte, recHeaderLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := parseRecord(b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("parseRecord: %v, want ErrCorrupt", err)
			}
		} else if again := appendRecord(nil, r.kind, string(r.key), r.etag, r.body); !slices.Equal(again, b[:r.len]) {
			t.Fatalf("parseRecord accepted %x, which encodes as %x", b[:r.len], again)
		}
		end := 0
		err := parseRecords(b, func(at int, r record) {
			if at != end {
				t.Fatalf("record at %d after one ending at %d", at, end)
			}
			end = at + r.len
		})
		switch {
		case err != nil && !errors.Is(err, ErrCorrupt):
			t.Fatalf("parseRecords: %v, want ErrCorrupt", err)
		case err == nil && end != len(b):
			t.Fatalf("parseRecords accepted records ending at %d of %d bytes", end, len(b))
		}
		if fh, ok := parseFrameHeader(b, 42); ok && fh.payloadLen <= recHeaderLen {
			t.Fatalf("parseFrameHeader accepted a payload length of %d", fh.payloadLen)
		}
	})
}

// FuzzDamagedGet damages, in place, the segment of a running Store that
// holds four acknowledged writes (overwriting bytes from some offset), and
// reads every key. Whatever the bytes, a Get never panics and never hands
// out a damaged body: it returns the write as it was, or ErrDamaged (a
// Damaged outcome) naming the key. Damage in place is damage to objects,
// never to the whole store.
func FuzzDamagedGet(f *testing.F) {
	f.Add(uint16(0), []byte{0xff})
	f.Add(uint16(30), []byte("x"))
	f.Add(uint16(60), make([]byte, 40))
	f.Add(uint16(500), []byte("wkf1"))
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
	whole, err := os.ReadFile(segmentPath(f, src))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, at uint16, patch []byte) {
		s, err := Open(copyStore(t, src, whole))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		off := segHeaderLen + int(at)%(len(whole)-segHeaderLen)
		patch = patch[:min(len(patch), len(whole)-off)] // in place: the file keeps its size
		file, err := os.OpenFile(segmentPath(t, s.Dir()), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = file.WriteAt(patch, int64(off))
		file.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, etag := range etags {
			key := "k" + strconv.Itoa(i)
			obj, err := s.Get(t.Context(), key)
			switch {
			case err == nil && (obj.ETag != etag || string(obj.Body) != strings.Repeat("v", 10*i+1)):
				t.Fatalf("get %q: (%q, %s), want its write", key, obj.Body, obj.ETag)
			case err != nil && (ownership.OutcomeOf(err) != ownership.Damaged || !strings.Contains(err.Error(), `"`+key+`"`)):
				t.Fatalf("get %q: %v (%s), want its write or a damaged object naming it", key, err, ownership.OutcomeOf(err))
			}
		}
	})
}
