package buckettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Range reads go through ownership.ReadRange, which calls the store's own
// GetRange when it has one. Every case is also read through a view of the
// store that offers only Bucket, so ReadRange's fallback (a Get, cut) is
// held to the same answers: a caller gets the same bytes, ETag and outcome
// whether or not a wrapper between it and the store passes GetRange on.

// getOnly hides every method of a store but the Bucket interface's.
type getOnly struct{ ownership.Bucket }

// readRange reads a range from b and from its Bucket-only view, fails the
// test unless both give the same answer, and returns it.
func readRange(t *testing.T, b ownership.Bucket, key string, off, n int64) (ownership.Object, error) {
	t.Helper()
	return readRangeCtx(t, t.Context(), b, key, off, n)
}

func readRangeCtx(t *testing.T, ctx context.Context, b ownership.Bucket, key string, off, n int64) (ownership.Object, error) {
	t.Helper()
	obj, err := ownership.ReadRange(ctx, b, key, off, n)
	if _, ok := b.(ownership.RangeReader); !ok {
		return obj, err
	}
	whole, werr := ownership.ReadRange(ctx, getOnly{b}, key, off, n)
	if ownership.OutcomeOf(err) != ownership.OutcomeOf(werr) {
		t.Errorf("range %d+%d of %q: GetRange's outcome %v (%v), a Get cut to the range: %v (%v)",
			off, n, key, ownership.OutcomeOf(err), err, ownership.OutcomeOf(werr), werr)
	}
	if err == nil && werr == nil && (!bytes.Equal(obj.Body, whole.Body) || obj.ETag != whole.ETag) {
		t.Errorf("range %d+%d of %q: GetRange gave %s (%q), a Get cut to the range %s (%q)",
			off, n, key, abbrev(obj.Body), obj.ETag, abbrev(whole.Body), whole.ETag)
	}
	return obj, err
}

// wantRange fails the test unless the range reads as exactly body[lo:hi]
// of the version etag, with a body that is never nil.
func wantRange(t *testing.T, b ownership.Bucket, key string, off, n int64, body []byte, etag ownership.ETag) {
	t.Helper()
	obj, err := readRange(t, b, key, off, n)
	if err != nil {
		t.Errorf("range %d+%d of %q (%d bytes): %v", off, n, key, len(body), err)
		return
	}
	size := int64(len(body))
	lo, hi := ownership.RangeOf(off, n, size)
	want := body[lo:hi]
	if !bytes.Equal(obj.Body, want) {
		t.Errorf("range %d+%d of %q (%d bytes): %d bytes %s, want %d bytes %s",
			off, n, key, size, len(obj.Body), abbrev(obj.Body), len(want), abbrev(want))
	}
	if obj.Body == nil {
		t.Errorf("range %d+%d of %q (%d bytes): a nil body, want an empty one", off, n, key, size)
	}
	if obj.ETag != etag {
		t.Errorf("range %d+%d of %q: ETag %q, want %q", off, n, key, obj.ETag, etag)
	}
}

// testRanges: a range read gives the bytes of the range that the object
// holds, up to its end, and the object's ETag; a range at or past the end
// (of any object, a zero-length one included) is an empty body and the
// ETag, not an error; a missing key is not found; a negative offset or a
// length under 1 is refused before anything is sent.
func testRanges(t *testing.T, b ownership.Bucket, _ Traits) {
	const size = 10_000
	body := randomBytes(size)
	etag := put(t, b, "range/obj", body, ownership.IfAbsent())
	for _, c := range []struct {
		what   string
		off, n int64
	}{
		{"the first byte", 0, 1},
		{"the start", 0, 100},
		{"the middle", 5_000, 300},
		{"the end, exactly", size - 100, 100},
		{"the last byte", size - 1, 1},
		{"a range the end cuts", size - 50, 100},
		{"the whole object, exactly", 0, size},
		{"n larger than the object", 0, 1 << 40},
		{"n as large as can be, from the start", 0, math.MaxInt64},
		{"n as large as can be, from the middle", 4_321, math.MaxInt64},
		{"at the end", size, 1},
		{"past the end", size + 1, 10},
		{"far past the end", 1 << 40, 4096},
		{"at the largest offset", math.MaxInt64, math.MaxInt64},
	} {
		t.Run(c.what, func(t *testing.T) {
			wantRange(t, b, "range/obj", c.off, c.n, body, etag)
		})
	}

	// A zero-length object: every range is past its end.
	empty := put(t, b, "range/empty", nil, ownership.IfAbsent())
	for _, off := range []int64{0, 1, 4096} {
		wantRange(t, b, "range/empty", off, 4096, nil, empty)
	}

	for _, off := range []int64{0, size + 1} {
		obj, err := readRange(t, b, "range/missing", off, 10)
		if !errors.Is(err, ownership.ErrNotFound) {
			t.Errorf("range %d+10 of a missing key: (%s, %v), want ErrNotFound", off, abbrev(obj.Body), err)
		}
		wantOutcome(t, fmt.Sprintf("range %d+10 of a missing key", off), err, ownership.NotFound)
	}

	for _, c := range []struct{ off, n int64 }{{-1, 10}, {math.MinInt64, 10}, {0, 0}, {0, -1}, {size + 1, 0}, {-1, 0}} {
		what := fmt.Sprintf("range %d+%d", c.off, c.n)
		_, err := readRange(t, b, "range/obj", c.off, c.n)
		if !errors.Is(err, ownership.ErrInvalidRange) {
			t.Errorf("%s: %v, want ErrInvalidRange", what, err)
		}
		wantOutcome(t, what, err, ownership.Failed)
		_, err = readRange(t, b, "range/missing", c.off, c.n)
		if !errors.Is(err, ownership.ErrInvalidRange) {
			t.Errorf("%s of a missing key: %v, want ErrInvalidRange, checked before the key is looked up", what, err)
		}
	}
	for _, key := range []string{"", string([]byte{0xff, 0xfe})} {
		_, err := readRange(t, b, key, 0, 10)
		if !errors.Is(err, ownership.ErrInvalidKey) {
			t.Errorf("range of the invalid key %q: %v, want ErrInvalidKey", key, err)
		}
	}

	// The caller owns what it read.
	obj, err := readRange(t, b, "range/obj", 10, 20)
	if err != nil {
		t.Fatalf("range 10+20: %v", err)
	}
	copy(obj.Body, "XXXXXXXXXXXXXXXXXXXX")
	wantRange(t, b, "range/obj", 0, 100, body, etag)
	wantObject(t, b, "range/obj", body, etag)

	// A range read sees the last landed write, and a deleted object is
	// gone to it as to a Get.
	other := randomBytes(2 * size)
	for i := range other {
		other[i] ^= 0x5a
	}
	etag2 := put(t, b, "range/obj", other, ownership.IfMatch(etag))
	wantRange(t, b, "range/obj", size-10, 20, other, etag2)
	wantRange(t, b, "range/obj", 2*size-1, 20, other, etag2)
	if err := b.Delete(t.Context(), "range/obj", ownership.IfMatch(etag2)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = readRange(t, b, "range/obj", 0, 10)
	wantOutcome(t, "range of a deleted key", err, ownership.NotFound)

	// A context already done: unknown, as for a Get.
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = readRangeCtx(t, canceled, b, "range/empty", 0, 10)
	wantOutcome(t, "range read with a canceled context", err, ownership.Unknown)
}

// testRangeOfLargeObject: ranges anywhere in an object of a few MiB,
// across the boundaries of whatever blocks a store reads it in, give its
// bytes.
func testRangeOfLargeObject(t *testing.T, b ownership.Bucket, _ Traits) {
	const size = 3<<20 + 123
	body := randomBytes(size)
	etag := put(t, b, "range/large", body, ownership.IfAbsent())
	for _, c := range []struct{ off, n int64 }{
		{0, 4096},
		{0, 4097},
		{4095, 2},
		{4096, 4096},
		{3*4096 + 17, 10_000},
		{1 << 20, 1},
		{1<<20 - 1, 1<<20 + 2},
		{size - 4096, 4096},
		{size - 4000, 8192},
		{size - 1, 1},
		{123, size},
		{size, 4096},
	} {
		wantRange(t, b, "range/large", c.off, c.n, body, etag)
	}
}

// testRangeReadRace: a range read that races with writes of the key gives
// the range of one version, with that version's ETag, never bytes of one
// version with another's ETag, nor bytes of two versions.
func testRangeReadRace(t *testing.T, b ownership.Bucket, _ Traits) {
	const versions, size = 30, 64 << 10
	version := func(i int) []byte { return bytes.Repeat([]byte{byte('A' + i)}, size) }
	written := map[ownership.ETag]int{}
	written[put(t, b, "range/race", version(0), ownership.IfAbsent())] = 0

	type read struct {
		obj ownership.Object
		err error
	}
	var reads []read
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			obj, err := ownership.ReadRange(t.Context(), b, "range/race", int64(i*997%size), 3000)
			reads = append(reads, read{obj, err})
		}
	})
	for i := 1; i < versions; i++ {
		written[put(t, b, "range/race", version(i), ownership.Always())] = i
	}
	close(done)
	wg.Wait()

	for _, r := range reads {
		if r.err != nil {
			t.Errorf("range read during writes: %v", r.err)
			continue
		}
		i, ok := written[r.obj.ETag]
		if !ok {
			t.Errorf("range read during writes: ETag %q, which no write returned", r.obj.ETag)
			continue
		}
		want := version(i)[:len(r.obj.Body)]
		if len(r.obj.Body) == 0 || !bytes.Equal(r.obj.Body, want) {
			t.Errorf("range read during writes: ETag %q of version %d, body %s", r.obj.ETag, i, abbrev(r.obj.Body))
		}
	}
}
