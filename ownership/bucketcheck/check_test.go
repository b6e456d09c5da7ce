package bucketcheck_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketcheck"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// The check runs here against the stores wasmkeep ships and against small
// fakes that misbehave in precise ways; against a real S3-compatible server
// it runs in ownership/s3store's tests.

func TestCheckDirstoreSound(t *testing.T) {
	b, err := dirstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := bucketcheck.Run(t.Context(), b, "probe/", "n0")
	if !r.Sound() || len(r.Missing()) != 0 || len(r.Warnings()) != 0 {
		t.Fatalf("dirstore not sound:\n%s", r)
	}
	wantEmpty(t, b, r.Prefix)
}

func TestCheckMemstoreSound(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	r := bucketcheck.Run(t.Context(), b, "probe/", "n1")
	if !r.Sound() || len(r.Missing()) != 0 || len(r.Warnings()) != 0 {
		t.Fatalf("memstore not sound:\n%s", r)
	}
	if r.Prefix != "probe/n1/" {
		t.Errorf("prefix %q, want probe/n1/", r.Prefix)
	}
	wantEmpty(t, b, r.Prefix)
}

func TestCheckIgnoredConditions(t *testing.T) {
	b := memstore.New(memstore.Faults{IgnoreConditions: true})
	r := bucketcheck.Run(t.Context(), b, "", "n2")
	if r.Sound() {
		t.Fatalf("a store that ignores conditions was judged sound:\n%s", r)
	}
	if r.Err != nil {
		t.Errorf("Err = %v; the store answered every call", r.Err)
	}
	missing := r.Missing()
	for _, want := range []string{"create-only put (If-None-Match: *)", "replace-only put (If-Match)"} {
		if !slices.Contains(missing, want) {
			t.Errorf("Missing() = %q, lacks %q", missing, want)
		}
	}
	if !slices.Contains(r.Warnings(), "conditional delete (If-Match)") {
		t.Errorf("Warnings() = %q, lacks the conditional delete", r.Warnings())
	}
	failed := statuses(r, bucketcheck.ProbeFailed)
	for _, name := range []string{"create-only-existing", "if-match-stale", "if-match-missing"} {
		if !slices.Contains(failed, name) {
			t.Errorf("failed probes %q, lack %q", failed, name)
		}
	}
	if s := r.String(); !strings.Contains(s, "NOT SOUND") || !strings.Contains(s, "If-None-Match") {
		t.Errorf("report does not say what is missing:\n%s", s)
	}
	wantEmpty(t, b, r.Prefix)
}

// TestCheckS3LikeStore runs the check against a faithful store whose ETags
// are content hashes, as S3's are, and which may ignore conditional deletes:
// both are warnings, not fatal.
func TestCheckS3LikeStore(t *testing.T) {
	for _, ignoreDelete := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore-conditional-delete=%v", ignoreDelete), func(t *testing.T) {
			b := &hashStore{objects: map[string][]byte{}, ignoreCondDelete: ignoreDelete}
			r := bucketcheck.Run(t.Context(), b, "p/", "n3")
			if !r.Sound() {
				t.Fatalf("not sound:\n%s", r)
			}
			want := []string{"a new ETag for every write"}
			if ignoreDelete {
				want = append(want, "conditional delete (If-Match)")
			}
			if !slices.Equal(r.Warnings(), want) {
				t.Errorf("Warnings() = %q, want %q\n%s", r.Warnings(), want, r)
			}
			if !strings.Contains(r.String(), "nonce") {
				t.Errorf("the same-ETag warning does not say why it is survivable:\n%s", r)
			}
			wantEmpty(t, b, r.Prefix)
		})
	}
}

// TestCheckUnusableStore checks that a store that answers nothing usable
// stops the check with the reason, and is not sound.
func TestCheckUnusableStore(t *testing.T) {
	denied := errors.New("access denied")
	r := bucketcheck.Run(t.Context(), failingStore{denied}, "", "n4")
	if r.Sound() || !errors.Is(r.Err, denied) {
		t.Fatalf("Sound() = %v, Err = %v; want unsound, Err wrapping the denial", r.Sound(), r.Err)
	}
	if got := r.Missing(); !slices.Equal(got, []string{"a bucket that answers every probe"}) {
		t.Errorf("Missing() = %q", got)
	}
	if skipped := statuses(r, bucketcheck.ProbeSkipped); len(skipped) == 0 {
		t.Errorf("no probe skipped after the store stopped answering:\n%s", r)
	}
	if !strings.Contains(r.String(), "access denied") {
		t.Errorf("report does not give the reason:\n%s", r)
	}
	if !r.Unanswered() || !strings.Contains(r.String(), "NOT CHECKED") || strings.Contains(r.String(), "NOT SOUND") {
		t.Errorf("a store that did not answer is judged on its conditions:\n%s", r)
	}
	// Nothing it wrote is known to have landed, and the store answers no
	// cleanup: one line says so, not a warning per object never written.
	if w := r.Warnings(); len(w) != 0 || strings.Count(r.String(), "access denied") > 2 ||
		!strings.Contains(r.String(), "the bucket answered none of its calls") {
		t.Errorf("the cleanup of a store that answers nothing is not said once:\n%s", r)
	}
}

func TestCheckCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := bucketcheck.Run(ctx, memstore.New(memstore.Faults{}), "", "n5")
	if r.Sound() || r.Err == nil {
		t.Fatalf("a cancelled check was judged sound or gave no reason:\n%s", r)
	}
}

func TestCheckBadArguments(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	for _, tt := range []struct{ prefix, nonce string }{
		{"p/", ""},
		{strings.Repeat("p", ownership.MaxKeyLen), "n"},
		{"\xff", "n"},
	} {
		r := bucketcheck.Run(t.Context(), b, tt.prefix, tt.nonce)
		if r.Sound() || r.Err == nil {
			t.Errorf("prefix %.10q nonce %q: Sound() = %v, Err = %v", tt.prefix, tt.nonce, r.Sound(), r.Err)
		}
	}
}

func statuses(r bucketcheck.Report, s bucketcheck.ProbeStatus) []string {
	var names []string
	for _, p := range r.Probes {
		if p.Status == s {
			names = append(names, p.Name)
		}
	}
	return names
}

func wantEmpty(t *testing.T, b ownership.Bucket, prefix string) {
	t.Helper()
	page, err := b.List(t.Context(), prefix, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 0 {
		t.Errorf("probe objects left under %q: %v", prefix, page.Entries)
	}
}

// hashStore is a faithful bucket whose ETags are content hashes, as S3's
// are, optionally ignoring the condition of a delete.
type hashStore struct {
	mu               sync.Mutex
	objects          map[string][]byte
	ignoreCondDelete bool
}

func etagOf(body []byte) ownership.ETag {
	h := fnv.New64a()
	h.Write(body)
	return ownership.ETag(fmt.Sprintf("%q", fmt.Sprintf("%016x", h.Sum64())))
}

func (s *hashStore) Get(_ context.Context, key string) (ownership.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, ok := s.objects[key]
	if !ok {
		return ownership.Object{}, ownership.ErrNotFound
	}
	return ownership.Object{Body: slices.Clone(body), ETag: etagOf(body)}, nil
}

func (s *hashStore) admits(key string, cond ownership.Condition) error {
	body, ok := s.objects[key]
	switch {
	case cond.Kind == ownership.CreateOnly && ok,
		cond.Kind == ownership.ReplaceOnly && (!ok || etagOf(body) != cond.ETag):
		return ownership.ErrPrecondition
	}
	return nil
}

func (s *hashStore) Put(_ context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admits(key, cond); err != nil {
		return "", err
	}
	s.objects[key] = slices.Clone(body)
	return etagOf(body), nil
}

func (s *hashStore) Delete(_ context.Context, key string, cond ownership.Condition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ignoreCondDelete {
		if err := s.admits(key, cond); err != nil {
			return err
		}
	}
	delete(s.objects, key)
	return nil
}

func (s *hashStore) List(_ context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var page ownership.ListPage
	for k, body := range s.objects {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			page.Entries = append(page.Entries, ownership.ListEntry{Key: k, ETag: etagOf(body), Size: int64(len(body))})
		}
	}
	slices.SortFunc(page.Entries, func(a, b ownership.ListEntry) int { return strings.Compare(a.Key, b.Key) })
	return page, nil
}

// failingStore answers every call with err.
type failingStore struct{ err error }

func (f failingStore) Get(context.Context, string) (ownership.Object, error) {
	return ownership.Object{}, f.err
}

func (f failingStore) Put(context.Context, string, []byte, ownership.Condition) (ownership.ETag, error) {
	return "", f.err
}
func (f failingStore) Delete(context.Context, string, ownership.Condition) error { return f.err }
func (f failingStore) List(context.Context, string, string, int) (ownership.ListPage, error) {
	return ownership.ListPage{}, f.err
}
