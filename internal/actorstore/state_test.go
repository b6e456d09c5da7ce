package actorstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/kvrun"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// A state object in format 1 (the pairs alone, as every actor's was before
// runs) is read as a memory table.
func TestHeadFormat1IsRead(t *testing.T) {
	for _, kv := range []map[string][]byte{
		{},
		{"count": []byte("7")},
		{"a": {}, "bin": {0, 1, 2, 255}, strings.Repeat("k", 2048): bytes.Repeat([]byte{'v'}, 128<<10)},
	} {
		obj := ownership.EncodeState(ownership.StateHeader{Gen: 3, Seq: 9}, encodePairs(kv))
		s, _, err := DecodeStateObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		if s.Gen != 3 || s.Seq != 9 || len(s.runs) != 0 {
			t.Fatalf("header %+v, %d runs", s.StateHeader, len(s.runs))
		}
		got := NewEventTxn(t.Context(), s, testMaxState).result()
		if !maps.EqualFunc(got, kv, bytes.Equal) || s.size != stateSize(kv) {
			t.Fatalf("read %d keys (size %d), want %d (size %d)", len(got), s.size, len(kv), stateSize(kv))
		}
	}
}

// testRun builds one run part of entries (sorted).
func testRun(t testing.TB, gen ownership.Generation, n uint64, es ...kvrun.Entry) (*part, []byte) {
	w := kvrun.NewWriter(kvrun.Options{})
	for _, e := range es {
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	body, meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return &part{gen: gen, n: n, meta: meta}, body
}

func TestHeadRoundTrip(t *testing.T) {
	p1, _ := testRun(t, 2, 7, kvrun.Entry{Key: "a", Value: []byte("1")}, kvrun.Entry{Key: "b", Tombstone: true})
	p2, _ := testRun(t, 2, 8, kvrun.Entry{Key: "m", Value: []byte("2")})
	p3, _ := testRun(t, 1, 1, kvrun.Entry{Key: "c", Value: []byte("3")}, kvrun.Entry{Key: "c" + strings.Repeat("z", 2000), Value: []byte("4")})
	s := NewState(ownership.StateHeader{Gen: 4, Seq: 11})
	s.runs = []*Run{{parts: []*part{p1, p2}}, {parts: []*part{p3}}}
	s.garbage = []RunName{{1, 5}, {3, 9}}
	s.mem = map[string]memEntry{"x": {v: []byte("y")}, "c": {del: true}, actors.NodePrefix + "p": {v: []byte("page")}}
	s.memBytes, s.size = 1+1+1+len(actors.NodePrefix)+1+4, 123
	h, err := s.EncodeHead(4, 1)
	if err != nil || h.flush != nil {
		t.Fatalf("encodeHead: %v, flush %v", err, h.flush)
	}
	out, err := decodeHead(s.StateHeader, h.payload)
	if err != nil {
		t.Fatal(err)
	}
	if out.size != s.size || !slices.Equal(out.garbage, s.garbage) || out.memBytes != s.memBytes || len(out.mem) != len(s.mem) {
		t.Fatalf("decoded size %d garbage %v mem %d (%d bytes)", out.size, out.garbage, len(out.mem), out.memBytes)
	}
	for k, e := range s.mem {
		if g := out.mem[k]; g.del != e.del || !bytes.Equal(g.v, e.v) {
			t.Fatalf("mem %q = %+v, want %+v", k, g, e)
		}
	}
	// The run of two parts is listed through a manifest the commit writes
	// first, named by the writing hold, as a run of no parts (which a node
	// that predates manifests refuses as damage): after the magic, the
	// size and the count of runs, a zero. The run of one part is listed
	// whole.
	if !strings.HasPrefix(string(h.payload), headMagic) || len(h.manifests) != 1 || h.manifests[0].r != s.runs[0] || h.manifests[0].name.gen != 4 {
		t.Fatalf("head %.5q with manifests %+v, want one manifest of the first run at generation 4", h.payload, h.manifests)
	}
	if at := len(headMagic) + 1 + 1; h.payload[at] != 0 {
		t.Fatalf("the run through its manifest begins with %d parts, want 0", h.payload[at])
	}
	if len(out.runs) != 2 || out.runs[0].parts != nil || out.runs[0].man == nil || *out.runs[0].man != h.manifests[0].name ||
		out.runs[0].listed.parts != 2 || out.runs[0].listed.size != s.runs[0].size() || len(out.runs[1].parts) != 1 || out.runs[1].man != nil {
		t.Fatalf("runs %+v %+v", out.runs[0], out.runs[1])
	}
	manParts, err := decodeManifest(h.manifests[0].body)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []*part{manParts[0], manParts[1], out.runs[1].parts[0]} {
		want := []*part{p1, p2, p3}[i]
		if p.gen != want.gen || p.n != want.n || p.meta != want.meta {
			t.Fatalf("part %d = %+v, want %+v", i, p, want)
		}
	}
	// Once the manifest landed, the next head lists the same name; with
	// its parts not read (a decoded head), it is written as it was read.
	s.Landed(h, 12)
	if again, err := s.EncodeHead(4, 2); err != nil || len(again.manifests) != 0 || !bytes.Equal(again.payload, h.payload) {
		t.Fatalf("the head after its manifest landed: %v, %d manifests, same bytes %v", err, len(again.manifests), bytes.Equal(again.payload, h.payload))
	}
	if again, err := out.EncodeHead(4, 2); err != nil || len(again.manifests) != 0 || !bytes.Equal(again.payload, h.payload) {
		t.Fatalf("a decoded head re-encoded: %v, %d manifests, same bytes %v", err, len(again.manifests), bytes.Equal(again.payload, h.payload))
	}
	// Cut short anywhere, it is damaged, never read as something else.
	for cut := 1; cut < len(h.payload)-len(headMagic); cut++ {
		short, err := decodeHead(s.StateHeader, h.payload[:len(h.payload)-cut])
		if err != nil {
			if !errors.Is(err, ownership.ErrDamaged) {
				t.Fatalf("cut %d: %v, want ErrDamaged", cut, err)
			}
			continue
		}
		// Cutting whole trailing entries of the memory table leaves a
		// shorter valid table, and the rest as it was; anything else must
		// fail.
		if short.size != out.size || len(short.runs) != len(out.runs) || !slices.Equal(short.garbage, out.garbage) || len(short.mem) >= len(out.mem) {
			t.Fatalf("cut %d decoded as size %d, %d runs, garbage %v, %d entries", cut, short.size, len(short.runs), short.garbage, len(short.mem))
		}
		for k, e := range short.mem {
			if g, ok := out.mem[k]; !ok || g.del != e.del || !bytes.Equal(g.v, e.v) {
				t.Fatalf("cut %d: entry %q = %+v, not in the whole head", cut, k, e)
			}
		}
	}
}

// A head written before manifests listed every part of a run of several:
// it is read as it was, and the next commit writes the run's manifest and
// lists that.
func TestHeadOfPartsGetsAManifest(t *testing.T) {
	p1, _ := testRun(t, 1, 7, kvrun.Entry{Key: "a", Value: []byte("1")})
	p2, _ := testRun(t, 1, 8, kvrun.Entry{Key: "b", Value: []byte("2")})
	payload := binary.AppendUvarint([]byte(headMagic), 4)
	payload = binary.AppendUvarint(payload, 1)
	payload, err := appendParts(payload, []*part{p1, p2})
	if err != nil {
		t.Fatal(err)
	}
	payload = binary.AppendUvarint(payload, 0) // no garbage, no memory table
	s, err := decodeHead(ownership.StateHeader{Gen: 1, Seq: 1}, payload)
	if err != nil || len(s.runs) != 1 || len(s.runs[0].parts) != 2 || s.runs[0].man != nil {
		t.Fatalf("decodeHead of a head before manifests: %v, %+v", err, s)
	}
	h, err := s.EncodeHead(3, 1)
	if err != nil || len(h.manifests) != 1 || h.manifests[0].name.gen != 3 {
		t.Fatalf("the next head: %v, %d manifests, %.5q", err, len(h.manifests), h.payload)
	}
	s.Landed(h, 2)
	if s.runs[0].man == nil || *s.runs[0].man != h.manifests[0].name || len(s.garbage) != 0 {
		t.Fatalf("after landing: manifest %v, garbage %v", s.runs[0].man, s.garbage)
	}
	// A run the state dropped while the commit was in flight leaves its
	// new manifest as garbage.
	s2, _ := decodeHead(ownership.StateHeader{Gen: 1, Seq: 1}, payload)
	h2, _ := s2.EncodeHead(3, 1)
	s2.clear(2)
	s2.Landed(h2, 2)
	if !slices.Contains(s2.garbage, h2.manifests[0].name) {
		t.Fatalf("garbage %v, want the dropped run's manifest %v", s2.garbage, h2.manifests[0].name)
	}
}

// A manifest that is cut short, altered or not one is damage; one that
// decodes lists exactly its parts.
func TestManifestDamage(t *testing.T) {
	p1, _ := testRun(t, 2, 7, kvrun.Entry{Key: "a", Value: []byte("1")})
	p2, _ := testRun(t, 2, 8, kvrun.Entry{Key: "b", Value: []byte("2")})
	body, err := appendManifest(nil, []*part{p1, p2})
	if err != nil {
		t.Fatal(err)
	}
	if parts, err := decodeManifest(body); err != nil || len(parts) != 2 || parts[0].meta != p1.meta || parts[1].n != 8 {
		t.Fatalf("decodeManifest: %v, %+v", err, parts)
	}
	for cut := 1; cut < len(body); cut++ {
		if _, err := decodeManifest(body[:len(body)-cut]); !errors.Is(err, ownership.ErrDamaged) {
			t.Fatalf("cut %d: %v, want ErrDamaged", cut, err)
		}
	}
	for i := range body {
		bad := bytes.Clone(body)
		bad[i] ^= 0x10
		if _, err := decodeManifest(bad); !errors.Is(err, ownership.ErrDamaged) {
			t.Fatalf("byte %d altered: %v, want ErrDamaged", i, err)
		}
	}
	one, err := appendManifest(nil, []*part{p1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeManifest(one); !errors.Is(err, ownership.ErrDamaged) {
		t.Fatalf("a manifest of one part: %v, want ErrDamaged", err)
	}
}

// A memory table past flushAt becomes a run, and the head lists it first.
func TestHeadFlushesPastFlushAt(t *testing.T) {
	s := NewState(ownership.StateHeader{Gen: 2})
	tx := NewEventTxn(t.Context(), s, testMaxState)
	for i := range 40 {
		if err := tx.Put(strings.Repeat("k", 10)+string(rune('A'+i)), bytes.Repeat([]byte{'v'}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	s.Apply(tx, 1)
	h, err := s.EncodeHead(2, 1)
	if err != nil || h.flush == nil {
		t.Fatalf("encodeHead: %v, flush %v", err, h.flush)
	}
	if len(h.payload) > 200 {
		t.Fatalf("the head is %d bytes with its table flushed", len(h.payload))
	}
	out, err := decodeHead(s.StateHeader, h.payload)
	if err != nil || len(out.runs) != 1 || len(out.mem) != 0 || out.runs[0].parts[0].meta.Entries != 40 {
		t.Fatalf("decoded %v, %+v", err, out)
	}
	s.Landed(h, 1)
	if len(s.mem) != 0 || s.memBytes != 0 || len(s.runs) != 1 {
		t.Fatalf("after landing: mem %d (%d bytes), runs %d", len(s.mem), s.memBytes, len(s.runs))
	}
}

// FuzzDecodeState feeds arbitrary bytes to the state decoder, which every
// event's first read runs on what the bucket holds. It never panics; what
// it refuses is a damaged object (ownership.ErrDamaged); and what it
// accepts survives a round trip through the encoder.
func FuzzDecodeState(f *testing.F) {
	f.Add(ownership.EncodeState(ownership.StateHeader{Gen: 3, Seq: 9}, encodePairs(map[string][]byte{"count": []byte("7")})))
	s := NewState(ownership.StateHeader{Gen: 3, Seq: 9})
	s.mem["a"], s.memBytes, s.size = memEntry{v: []byte("b")}, 2, 2
	s.garbage = []RunName{{1, 2}}
	if h, err := s.EncodeHead(3, 0); err == nil {
		f.Add(ownership.EncodeState(s.StateHeader, h.payload))
	}
	// A head with a run through its manifest, and one of one part.
	p1, _ := testRun(f, 2, 7, kvrun.Entry{Key: "a", Value: []byte("1")})
	p2, _ := testRun(f, 2, 8, kvrun.Entry{Key: "b", Value: []byte("2")})
	s3 := NewState(ownership.StateHeader{Gen: 3, Seq: 9})
	s3.runs = []*Run{{parts: []*part{p1, p2}}, {parts: []*part{p1}}}
	if h, err := s3.EncodeHead(3, 0); err == nil {
		f.Add(ownership.EncodeState(s3.StateHeader, h.payload))
	}
	f.Add([]byte("wk1 state 1 1\n"))
	f.Add([]byte("wk1 state 1 1\n\x05a"))
	f.Add([]byte("wk1 state 1 1\n\x01k\xff\xff\xff\xff\x0f"))
	f.Add([]byte("wk1 state 1 1\n\x00wk2\x02\x01\x01\x01\x01\x00"))
	f.Add([]byte("wk1 state x 1\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, _, err := DecodeStateObject(data)
		if err != nil {
			if !errors.Is(err, ownership.ErrDamaged) {
				t.Fatalf("decodeStateObject(%q): %v, want ErrDamaged", data, err)
			}
			return
		}
		if st.memBytes > flushAt {
			return // encodeHead would flush it into a run
		}
		h, err := st.EncodeHead(st.Gen, 0)
		if err != nil {
			t.Fatalf("encodeHead of what decoded: %v", err)
		}
		again, err := decodeHead(st.StateHeader, h.payload)
		if err != nil || again.size != st.size || len(again.mem) != len(st.mem) || len(again.runs) != len(st.runs) || !slices.Equal(again.garbage, st.garbage) {
			t.Fatalf("round trip of %q: %+v, %v", data, again, err)
		}
		for k, e := range st.mem {
			if g, ok := again.mem[k]; !ok || g.del != e.del || !bytes.Equal(g.v, e.v) {
				t.Fatalf("round trip of %q: key %q is %+v, want %+v", data, k, g, e)
			}
		}
	})
}

// snapshotMem copies the memory table's live entries (tests).
func (s *State) snapshotMem() map[string][]byte {
	kv := map[string][]byte{}
	for k, e := range s.mem {
		if !e.del {
			kv[k] = append([]byte(nil), e.v...)
		}
	}
	return kv
}
