package kvrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// object is a run in memory, read through a Fetch that counts its calls.
type object struct {
	mu      sync.Mutex
	data    []byte
	fetches []span
}

type span struct{ off, n int64 }

// fetch returns a copy of the bytes asked for, as a ranged GET would: cut
// short at the end of the object.
func (o *object) fetch(ctx context.Context, off, n int64) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fetches = append(o.fetches, span{off, n})
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("range %d+%d", off, n)
	}
	off = min(off, int64(len(o.data)))
	end := min(off+n, int64(len(o.data)))
	return bytes.Clone(o.data[off:end]), nil
}

// count returns the fetches so far and forgets them.
func (o *object) count() []span {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.fetches
	o.fetches = nil
	return f
}

func build(t testing.TB, opt Options, es []Entry) ([]byte, Meta) {
	t.Helper()
	w := NewWriter(opt)
	for _, e := range es {
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	data, m, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return data, m
}

func collect(it Iterator) ([]Entry, error) {
	var out []Entry
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		out = append(out, e)
	}
	return out, it.Err()
}

func sameEntries(a, b []Entry) bool {
	return slices.EqualFunc(a, b, func(x, y Entry) bool {
		return x.Key == y.Key && x.Tombstone == y.Tombstone && bytes.Equal(x.Value, y.Value)
	})
}

func describe(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		if e.Tombstone {
			fmt.Fprintf(&b, "%q:- ", e.Key)
		} else {
			fmt.Fprintf(&b, "%q:%d ", e.Key, len(e.Value))
		}
	}
	return b.String()
}

func val(n int, seed byte) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = seed + byte(i*7)
	}
	return v
}

// shapes are the runs every round trip is tried on.
func shapes() map[string][]Entry {
	long := func(c byte, last byte) string {
		return strings.Repeat(string([]byte{c}), MaxKeyLen-1) + string([]byte{last})
	}
	var many []Entry
	for i := range 3000 {
		many = append(many, Entry{Key: fmt.Sprintf("user/%05d/name", i), Value: val(i%300, byte(i))})
		if i%5 == 0 {
			many[len(many)-1] = Entry{Key: many[len(many)-1].Key, Tombstone: true}
		}
	}
	var big []Entry
	for i := range 6 {
		big = append(big, Entry{Key: fmt.Sprintf("big%d", i), Value: val(MaxValueLen-i%2, byte(i))})
		big = append(big, Entry{Key: fmt.Sprintf("big%d.small", i), Value: val(3, byte(i))})
	}
	return map[string][]Entry{
		"empty":             nil,
		"one":               {{Key: "k", Value: []byte("v")}},
		"one tombstone":     {{Key: "k", Tombstone: true}},
		"tombstones only":   {{Key: "a", Tombstone: true}, {Key: "b", Tombstone: true}, {Key: "c", Tombstone: true}},
		"empty values":      {{Key: "a", Value: []byte{}}, {Key: "b", Value: []byte{}}, {Key: "c", Tombstone: true}, {Key: "d", Value: []byte{}}},
		"values of 128 KiB": big,
		"keys of 2 KiB": {
			{Key: long('a', 'a'), Value: []byte("1")},
			{Key: long('a', 'b'), Value: []byte("2")},
			{Key: long('b', 0x00), Tombstone: true},
			{Key: long(0xff, 0xff), Value: val(1000, 3)},
		},
		"binary keys": {
			{Key: "\x00", Value: []byte("zero")},
			{Key: "\x00\x00", Value: []byte("zero zero")},
			{Key: "\x00\xff", Tombstone: true},
			{Key: "a\x00b", Value: []byte{0}},
			{Key: "a\xff", Value: []byte{0xff}},
			{Key: "\xff", Value: []byte("ff")},
			{Key: "\xff\x00", Value: []byte{}},
			{Key: "\xff\xff\xff", Value: []byte("fff")},
		},
		"many": many,
	}
}

var blockSizes = []Options{{}, {BlockSize: 1}, {BlockSize: 100, BitsPerKey: 1}, {BlockSize: 4 << 10, BitsPerKey: MaxBitsPerKey}}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for name, es := range shapes() {
		for _, opt := range blockSizes {
			t.Run(fmt.Sprintf("%s/%+v", name, opt), func(t *testing.T) {
				data, m := build(t, opt, es)
				want := Meta{Size: int64(len(data)), Entries: int64(len(es))}
				for _, e := range es {
					if e.Tombstone {
						want.Tombstones++
					} else {
						want.LiveBytes += int64(len(e.Key) + len(e.Value))
					}
				}
				if len(es) > 0 {
					want.MinKey, want.MaxKey = es[0].Key, es[len(es)-1].Key
				}
				want.IndexOff, want.IndexLen, want.FilterOff, want.FilterLen = m.IndexOff, m.IndexLen, m.FilterOff, m.FilterLen
				if m != want {
					t.Fatalf("meta %+v, want %+v", m, want)
				}

				obj := &object{data: data}
				read, err := ReadMeta(ctx, int64(len(data)), obj.fetch)
				if err != nil || read != m {
					t.Fatalf("ReadMeta: %+v, %v; want %+v", read, err, m)
				}
				enc, err := m.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				var dec Meta
				if err := dec.UnmarshalBinary(enc); err != nil || dec != m {
					t.Fatalf("meta through %d bytes: %+v, %v; want %+v", len(enc), dec, err, m)
				}

				r := Open("run", m, obj.fetch, NewCache(64<<20))
				got, err := collect(r.Iter(ctx, IterOptions{}))
				if err != nil || !sameEntries(got, es) {
					t.Fatalf("Iter: %v\n got %s\nwant %s", err, describe(got), describe(es))
				}
				got, err = collect(r.Iter(ctx, IterOptions{Reverse: true}))
				rev := slices.Clone(es)
				slices.Reverse(rev)
				if err != nil || !sameEntries(got, rev) {
					t.Fatalf("Iter reverse: %v\n got %s\nwant %s", err, describe(got), describe(rev))
				}
				for _, e := range es {
					g, ok, err := r.Get(ctx, e.Key)
					if err != nil || !ok || !sameEntries([]Entry{g}, []Entry{e}) {
						t.Fatalf("Get(%.40q): %v %v %v, want %s", e.Key, describe([]Entry{g}), ok, err, describe([]Entry{e}))
					}
				}
				for _, k := range absentKeys(es) {
					if g, ok, err := r.Get(ctx, k); err != nil || ok {
						t.Fatalf("Get(%.40q) of an absent key: %s %v %v", k, describe([]Entry{g}), ok, err)
					}
				}
			})
		}
	}
}

// absentKeys are keys around those of es that es does not hold.
func absentKeys(es []Entry) []string {
	has := map[string]bool{}
	for _, e := range es {
		has[e.Key] = true
	}
	var out []string
	try := func(k string) {
		if k != "" && len(k) <= MaxKeyLen && !has[k] {
			out = append(out, k)
		}
	}
	try("\x00\x00\x00\x00")
	try("zzzz")
	try("\xff\xff\xff\xff\xff")
	for _, e := range es {
		try(e.Key + "\x00")
		try(e.Key[:len(e.Key)-1])
		try(e.Key[:len(e.Key)-1] + string([]byte{e.Key[len(e.Key)-1] + 1}))
	}
	return out
}

func TestWriterRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		prev []Entry
		e    Entry
	}{
		{"empty key", nil, Entry{Value: []byte("v")}},
		{"long key", nil, Entry{Key: strings.Repeat("k", MaxKeyLen+1)}},
		{"large value", nil, Entry{Key: "k", Value: make([]byte, MaxValueLen+1)}},
		{"tombstone with a value", nil, Entry{Key: "k", Value: []byte("v"), Tombstone: true}},
		{"same key", []Entry{{Key: "k"}}, Entry{Key: "k"}},
		{"key before", []Entry{{Key: "k"}}, Entry{Key: "j"}},
		{"key before, a prefix", []Entry{{Key: "kk"}}, Entry{Key: "k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(Options{})
			for _, e := range tc.prev {
				if err := w.Add(e); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Add(tc.e); err == nil {
				t.Fatalf("Add(%.40q) accepted", tc.e.Key)
			}
			// The run is as it was.
			data, m, err := w.Finish()
			if err != nil || m.Entries != int64(len(tc.prev)) {
				t.Fatalf("Finish after the refusal: %d entries, %v", m.Entries, err)
			}
			got, err := collect(Open("r", m, (&object{data: data}).fetch, nil).Iter(context.Background(), IterOptions{}))
			if err != nil || !sameEntries(got, tc.prev) {
				t.Fatalf("run after the refusal: %s, %v", describe(got), err)
			}
		})
	}
	t.Run("after finish", func(t *testing.T) {
		w := NewWriter(Options{})
		if _, _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := w.Add(Entry{Key: "k"}); err == nil {
			t.Error("Add after Finish accepted")
		}
		if _, _, err := w.Finish(); err == nil {
			t.Error("second Finish accepted")
		}
	})
	for _, opt := range []Options{{BlockSize: -1}, {BlockSize: MaxBlockSize + 1}, {BitsPerKey: -1}, {BitsPerKey: MaxBitsPerKey + 1}} {
		if opt.Validate() == nil {
			t.Errorf("%+v valid", opt)
		}
		w := NewWriter(opt)
		if err := w.Add(Entry{Key: "k"}); err == nil {
			t.Errorf("NewWriter(%+v).Add accepted", opt)
		}
		if _, _, err := w.Finish(); err == nil {
			t.Errorf("NewWriter(%+v).Finish accepted", opt)
		}
	}
}

func TestBlocks(t *testing.T) {
	// Blocks close before the entry that would take them past the block
	// size; a value larger than a block gets a block of its own.
	es := []Entry{
		{Key: "a", Value: val(300, 1)},
		{Key: "b", Value: val(300, 2)},
		{Key: "c", Value: val(300, 3)},
		{Key: "d", Value: val(5000, 4)},
		{Key: "e", Value: val(10, 5)},
		{Key: "f", Value: val(10, 6)},
	}
	data, m := build(t, Options{BlockSize: 1000}, es)
	ix, err := decodeIndex(data[m.IndexOff:m.FilterOff], m)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c", "d", "f"}; !slices.Equal(ix.keys, want) {
		t.Errorf("blocks end at %q, want %q", ix.keys, want)
	}
	for b := range ix.keys {
		if n := ix.offs[b+1] - ix.offs[b]; n > 1000 && ix.keys[b] != "d" {
			t.Errorf("block %d of %d bytes", b, n)
		}
	}
}

func TestGet(t *testing.T) {
	ctx := context.Background()
	es := []Entry{
		{Key: "apple", Value: []byte("red")},
		{Key: "banana", Tombstone: true},
		{Key: "cherry", Value: []byte{}},
		{Key: "date", Value: []byte("brown")},
	}
	data, m := build(t, Options{BlockSize: 1}, es)
	r := Open("r", m, (&object{data: data}).fetch, NewCache(1<<20))
	for _, tc := range []struct {
		key   string
		want  Entry
		found bool
	}{
		{"apple", es[0], true},
		{"banana", Entry{Key: "banana", Tombstone: true}, true},
		{"cherry", es[2], true},
		{"date", es[3], true},
		{"a", Entry{}, false},
		{"apples", Entry{}, false},
		{"blueberry", Entry{}, false},
		{"dat", Entry{}, false},
		{"zebra", Entry{}, false},
	} {
		got, found, err := r.Get(ctx, tc.key)
		if err != nil || found != tc.found || found && !sameEntries([]Entry{got}, []Entry{tc.want}) {
			t.Errorf("Get(%q) = %s, %v, %v; want %s, %v", tc.key, describe([]Entry{got}), found, err, describe([]Entry{tc.want}), tc.found)
		}
	}
	// A value handed out cannot be grown into the cache's next entry: it
	// has no room past its end.
	if got, _, _ := r.Get(ctx, "apple"); cap(got.Value) != len(got.Value) {
		t.Errorf("apple's value has room for %d bytes past its end", cap(got.Value)-len(got.Value))
	}
}

func TestMetaBinary(t *testing.T) {
	_, m := build(t, Options{}, shapes()["binary keys"])
	enc, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) > 40 {
		t.Errorf("meta of a small run takes %d bytes", len(enc))
	}
	app, err := m.AppendBinary([]byte("head"))
	if err != nil || string(app) != "head"+string(enc) {
		t.Errorf("AppendBinary: %q, %v", app, err)
	}
	// Every cut and every flipped byte is refused or decodes to a valid
	// meta; none panics.
	for i := range enc {
		var d Meta
		if err := d.UnmarshalBinary(enc[:i]); !errors.Is(err, ownership.ErrDamaged) {
			t.Errorf("meta cut to %d bytes: %v", i, err)
		}
		flipped := bytes.Clone(enc)
		flipped[i] ^= 0x10
		if err := d.UnmarshalBinary(flipped); err == nil && d.check() != nil {
			t.Errorf("flipped byte %d: decoded an invalid meta %+v", i, d)
		} else if err != nil && !errors.Is(err, ownership.ErrDamaged) {
			t.Errorf("flipped byte %d: %v", i, err)
		}
	}
	var d Meta
	if err := d.UnmarshalBinary(append(enc, 0)); err == nil {
		t.Error("meta with a trailing byte accepted")
	}
	bad := m
	bad.FilterOff++
	if _, err := bad.MarshalBinary(); err == nil {
		t.Error("invalid meta encoded")
	}
	if _, _, err := Open("r", bad, nil, nil).Get(context.Background(), m.MinKey); !errors.Is(err, ownership.ErrDamaged) {
		t.Errorf("Get on a reader of an invalid meta: %v", err)
	}
	if _, err := collect(Open("r", bad, nil, nil).Iter(context.Background(), IterOptions{})); !errors.Is(err, ownership.ErrDamaged) {
		t.Errorf("Iter on a reader of an invalid meta: %v", err)
	}
}
