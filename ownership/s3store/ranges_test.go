package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// TestRangeHeader checks the Range header a range read sends, and that
// the body of the 206 answer comes back as it is, with its ETag.
func TestRangeHeader(t *testing.T) {
	for _, c := range []struct {
		off, n int64
		want   string
	}{
		{0, 1, "bytes=0-0"},
		{10, 100, "bytes=10-109"},
		{5, math.MaxInt64, "bytes=5-"},
		{math.MaxInt64, 1, "bytes=9223372036854775807-9223372036854775807"},
		{math.MaxInt64, 2, "bytes=9223372036854775807-"},
	} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			w.Header().Set("ETag", `"e1"`)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/*", c.off, c.off))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = io.WriteString(w, "x")
		})
		obj, err := f.store(t, "pre/").GetRange(context.Background(), "k", c.off, c.n)
		if err != nil {
			t.Fatalf("range %d+%d: %v", c.off, c.n, err)
		}
		if string(obj.Body) != "x" || obj.ETag != `"e1"` {
			t.Errorf("range %d+%d: (%q, %s), want (\"x\", \"e1\")", c.off, c.n, obj.Body, obj.ETag)
		}
		r := f.lastRequest()
		if got := r.Header.Get("Range"); r.Method != http.MethodGet || r.URL.Path != "/b/pre/k" || got != c.want {
			t.Errorf("range %d+%d: %s %s Range %q, want GET /b/pre/k Range %q", c.off, c.n, r.Method, r.URL.Path, got, c.want)
		}
	}
}

// TestRangePastTheEnd: S3 answers 416 for a range at or past the end of
// the object. The store asks for its head and answers the empty body and
// the ETag, as the contract says; if the head shows a longer version than
// the 416 was about, it reads the range of that one. A head that finds
// the key gone is not found.
func TestRangePastTheEnd(t *testing.T) {
	invalidRange := s3Error(http.StatusRequestedRangeNotSatisfiable, "InvalidRange")
	head := func(size int, etag string) func(http.ResponseWriter, *http.Request, int) {
		return func(w http.ResponseWriter, r *http.Request, _ int) {
			if r.Method != http.MethodHead {
				t.Errorf("%s after a 416, want HEAD", r.Method)
			}
			w.Header().Set("ETag", etag)
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.WriteHeader(http.StatusOK)
		}
	}
	t.Run("empty", func(t *testing.T) {
		answers := []func(http.ResponseWriter, *http.Request, int){invalidRange, head(10, `"e1"`)}
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) { answers[n-1](w, r, n) })
		obj, err := f.store(t, "").GetRange(context.Background(), "k", 10, 5)
		if err != nil || obj.Body == nil || len(obj.Body) != 0 || obj.ETag != `"e1"` {
			t.Fatalf("range past the end: (%q, nil body %v, %s, %v), want an empty body and \"e1\"", obj.Body, obj.Body == nil, obj.ETag, err)
		}
		if n := f.requests.Load(); n != 2 {
			t.Errorf("server saw %d requests, want 2", n)
		}
	})
	t.Run("longer since", func(t *testing.T) {
		answers := []func(http.ResponseWriter, *http.Request, int){invalidRange, head(100, `"e2"`),
			func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("ETag", `"e2"`)
				w.Header().Set("Content-Range", "bytes 10-14/100")
				w.WriteHeader(http.StatusPartialContent)
				_, _ = io.WriteString(w, "01234")
			}}
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) { answers[n-1](w, r, n) })
		obj, err := f.store(t, "").GetRange(context.Background(), "k", 10, 5)
		if err != nil || string(obj.Body) != "01234" || obj.ETag != `"e2"` {
			t.Fatalf("range of a version longer since the 416: (%q, %s, %v), want (\"01234\", \"e2\")", obj.Body, obj.ETag, err)
		}
		if n := f.requests.Load(); n != 3 {
			t.Errorf("server saw %d requests, want 3", n)
		}
	})
	t.Run("gone since", func(t *testing.T) {
		answers := []func(http.ResponseWriter, *http.Request, int){invalidRange, s3Error(404, "")}
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) { answers[n-1](w, r, n) })
		_, err := f.store(t, "").GetRange(context.Background(), "k", 10, 5)
		if !errors.Is(err, ownership.ErrNotFound) {
			t.Fatalf("range of a key gone since the 416: %v, want ErrNotFound", err)
		}
	})
	t.Run("always longer", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if r.Method == http.MethodHead {
				head(100, `"e3"`)(w, r, n)
				return
			}
			invalidRange(w, r, n)
		})
		_, err := f.store(t, "").GetRange(context.Background(), "k", 10, 5)
		if ownership.OutcomeOf(err) != ownership.Unknown {
			t.Fatalf("416 while every head finds the range: %v, want unknown", err)
		}
	})
}

// TestRangeAnswers: a server that ignores Range (200, the whole object)
// has its answer cut to the range; one that answers another range than
// asked fails the read.
func TestRangeAnswers(t *testing.T) {
	whole := func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("ETag", `"e1"`)
		_, _ = io.WriteString(w, "0123456789")
	}
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, 3, "012"}, {8, 5, "89"}, {10, 1, ""}, {20, 1, ""}} {
		f := newFake(t, whole)
		obj, err := f.store(t, "").GetRange(context.Background(), "k", c.off, c.n)
		if err != nil || string(obj.Body) != c.want || obj.Body == nil || obj.ETag != `"e1"` {
			t.Errorf("range %d+%d of a whole-object answer: (%q, %s, %v), want (%q, \"e1\")", c.off, c.n, obj.Body, obj.ETag, err, c.want)
		}
	}
	for _, contentRange := range []string{"bytes 0-4/10", "bytes 2-9/10", "bytes x-y/10", "items 2-4/10"} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			w.Header().Set("ETag", `"e1"`)
			w.Header().Set("Content-Range", contentRange)
			w.WriteHeader(http.StatusPartialContent)
			_, _ = io.WriteString(w, "234")
		})
		_, err := f.store(t, "").GetRange(context.Background(), "k", 2, 3)
		if ownership.OutcomeOf(err) != ownership.Failed || !strings.Contains(err.Error(), "answered") {
			t.Errorf("bytes 2-4 answered with Content-Range %q: %v, want a failure saying what the server answered", contentRange, err)
		}
	}
}
