package kvrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// damageRun is a run of several blocks of each kind of entry.
func damageRun(t *testing.T) ([]Entry, []byte, Meta) {
	var es []Entry
	for i := range 24 {
		e := Entry{Key: fmt.Sprintf("key\x00%02d\xff", i), Value: val(i*3, byte(i))}
		if i%4 == 1 {
			e = Entry{Key: e.Key, Tombstone: true}
		}
		es = append(es, e)
	}
	data, m := build(t, Options{BlockSize: 100}, es)
	return es, data, m
}

// readAll asks r for everything: every entry both ways, a window, every
// key and some absent ones. Each answer must be the right one, or an error
// wrapping ownership.ErrDamaged; it returns the first error.
func readAll(t *testing.T, what string, r *Reader, es []Entry) error {
	t.Helper()
	ctx := context.Background()
	var first error
	check := func(q string, err error, right bool) {
		t.Helper()
		switch {
		case err != nil && !errors.Is(err, ownership.ErrDamaged):
			t.Fatalf("%s: %s: %v, want an error wrapping ErrDamaged", what, q, err)
		case err == nil && !right:
			t.Fatalf("%s: %s: a wrong answer and no error", what, q)
		case first == nil:
			first = err
		}
	}
	for _, opt := range []IterOptions{{}, {Reverse: true}, {Start: es[5].Key, End: es[17].Key}, {Prefix: "key\x001", Reverse: true}} {
		got, err := collect(r.Iter(ctx, opt))
		check(fmt.Sprintf("Iter(%s)", fmtOpt(opt)), err, sameEntries(got, window(es, opt)))
	}
	for _, e := range es {
		got, ok, err := r.Get(ctx, e.Key)
		check(fmt.Sprintf("Get(%q)", e.Key), err, ok && sameEntries([]Entry{got}, []Entry{e}))
	}
	for _, k := range absentKeys(es) {
		_, ok, err := r.Get(ctx, k)
		check(fmt.Sprintf("Get(%q)", k), err, !ok)
	}
	return first
}

// TestDamage flips bytes all over a run. A reader opened with the run's
// meta answers right or fails with ErrDamaged, never wrongly or with a
// panic; damage in what it reads always fails; ReadMeta fails on damage in
// the footer, the index or the filter.
func TestDamage(t *testing.T) {
	es, data, m := damageRun(t)
	ctx := context.Background()
	for pos := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(data)
			bad[pos] ^= mask
			part := "block"
			switch {
			case int64(pos) >= m.Size-footerLen:
				part = "footer"
			case int64(pos) >= m.FilterOff:
				part = "filter"
			case int64(pos) >= m.IndexOff:
				part = "index"
			}
			what := fmt.Sprintf("byte %d (%s) ^ %#02x", pos, part, mask)
			obj := &object{data: bad}
			err := readAll(t, what, Open("r", m, obj.fetch, nil), es)
			if part != "footer" && err == nil {
				t.Fatalf("%s: every read succeeded", what)
			}
			if part == "footer" && err != nil {
				t.Fatalf("%s: %v; a reader with the meta does not read the footer", what, err)
			}
			got, err := ReadMeta(ctx, m.Size, obj.fetch)
			switch {
			case err != nil && !errors.Is(err, ownership.ErrDamaged):
				t.Fatalf("%s: ReadMeta: %v", what, err)
			case part == "block" && (err != nil || got != m):
				t.Fatalf("%s: ReadMeta: %+v, %v; it does not read blocks", what, got, err)
			case part != "block" && err == nil:
				t.Fatalf("%s: ReadMeta: %+v and no error", what, got)
			}
		}
	}
}

// TestTruncated cuts a run short at every length: ReadMeta refuses it,
// and a reader with the whole run's meta fails with ErrDamaged on what is
// cut off.
func TestTruncated(t *testing.T) {
	es, data, m := damageRun(t)
	ctx := context.Background()
	for n := range len(data) {
		obj := &object{data: data[:n]}
		what := fmt.Sprintf("cut to %d of %d bytes", n, len(data))
		if _, err := ReadMeta(ctx, int64(n), obj.fetch); !errors.Is(err, ownership.ErrDamaged) {
			t.Fatalf("%s: ReadMeta of its size: %v", what, err)
		}
		if _, err := ReadMeta(ctx, m.Size, obj.fetch); !errors.Is(err, ownership.ErrDamaged) {
			t.Fatalf("%s: ReadMeta of the whole size: %v", what, err)
		}
		err := readAll(t, what, Open("r", m, obj.fetch, nil), es)
		if int64(n) < m.FilterOff+m.FilterLen && err == nil {
			t.Fatalf("%s: every read succeeded", what)
		}
	}
}

// TestMetaMismatch: a meta that is valid but not the run's is damage
// once the index shows it. (Until then the reader trusts it: a key past
// its MaxKey reads nothing.)
func TestMetaMismatch(t *testing.T) {
	ctx := context.Background()
	es, data, m := damageRun(t)
	_, other := build(t, Options{}, []Entry{{Key: "x"}})
	fewer, less, shorter := m, m, m
	ix, err := decodeIndex(data[m.IndexOff:m.FilterOff], m)
	if err != nil {
		t.Fatal(err)
	}
	fewer.Entries, fewer.Tombstones, fewer.LiveBytes = int64(len(ix.keys)-1), 0, int64(len(ix.keys)-1)
	if err := fewer.check(); err != nil {
		t.Fatal(err)
	}
	less.MaxKey = es[len(es)-2].Key
	shorter.IndexOff--
	shorter.FilterOff--
	shorter.Size--
	for name, mm := range map[string]Meta{"fewer entries than blocks": fewer, "another max key": less, "another run's": other, "index earlier": shorter} {
		r := Open("r", mm, (&object{data: data}).fetch, nil)
		if _, err := collect(r.Iter(ctx, IterOptions{})); !errors.Is(err, ownership.ErrDamaged) {
			t.Errorf("meta of %s: Iter: %v, want ErrDamaged", name, err)
		}
		if _, _, err := r.Get(ctx, mm.MinKey); !errors.Is(err, ownership.ErrDamaged) {
			t.Errorf("meta of %s: Get(%q): %v, want ErrDamaged", name, mm.MinKey, err)
		}
	}
}

// TestFetchError: a failed fetch is the caller's error, not damage, and
// leaves nothing behind: the next read tries again.
func TestFetchError(t *testing.T) {
	ctx := context.Background()
	_, data, m := damageRun(t)
	obj := &object{data: data}
	fail := errors.New("bucket unreachable")
	failing := true
	fetch := func(ctx context.Context, off, n int64) ([]byte, error) {
		if failing {
			return nil, fail
		}
		return obj.fetch(ctx, off, n)
	}
	c := NewCache(1 << 20)
	r := Open("r", m, fetch, c)
	if _, _, err := r.Get(ctx, m.MinKey); !errors.Is(err, fail) || errors.Is(err, ownership.ErrDamaged) {
		t.Fatalf("Get through a failing fetch: %v", err)
	}
	if _, err := collect(r.Iter(ctx, IterOptions{})); !errors.Is(err, fail) {
		t.Fatalf("Iter through a failing fetch: %v", err)
	}
	failing = false
	if _, ok, err := r.Get(ctx, m.MinKey); !ok || err != nil {
		t.Fatalf("Get once the fetch works: %v %v", ok, err)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	ctxFetch := func(ctx context.Context, off, n int64) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return obj.fetch(ctx, off, n)
	}
	if _, _, err := Open("r2", m, ctxFetch, c).Get(canceled, m.MinKey); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a canceled context: %v", err)
	}
}
