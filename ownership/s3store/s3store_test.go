package s3store_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketcheck"
	"github.com/wasmkeep/wasmkeep/ownership/buckettest"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

// gw is one versitygw for the whole test binary; tests share its bucket and
// keep apart by key prefix.
var gw *s3test.Server

func TestMain(m *testing.M) {
	srv, stop, err := s3test.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gw = srv
	code := m.Run()
	stop()
	os.Exit(code)
}

// randomPrefix returns a key prefix no other test uses.
func randomPrefix(tb testing.TB) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "t-" + hex.EncodeToString(b[:]) + "/"
}

// open returns a store over a fresh, empty prefix of the shared bucket.
func open(tb testing.TB) *s3store.Store {
	tb.Helper()
	s, err := s3store.New(tb.Context(), gw.Config(randomPrefix(tb)))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestContract holds the store, over a real S3-compatible server, to the
// contract every store keeps, with the traits of S3 on the test server
// declared: ETags derived from content (as S3 derives them), an if-match
// delete of a missing key that lands (versitygw answers 204 where S3 answers
// 404), and keys kept as file paths (versitygw's posix backend: "a" and
// "a/b" cannot both exist, "." and ".." segments are cleaned away, and a
// segment is a file name of at most 255 bytes). Every subtest runs and
// asserts what those traits imply; none is skipped. The store reaches the
// server through a proxy that can hold writes, so the suite also checks
// writes whose deadline passes while the server has not answered.
func TestContract(t *testing.T) {
	buckettest.Run(t, func(t *testing.T) ownership.Bucket {
		return openHeld(t)
	}, buckettest.Traits{
		ContentETags:              true,
		IfMatchDeleteMissingLands: true,
		PathKeys:                  true,
	})
}

// heldStore is a store whose requests pass a holdingProxy. It passes
// GetRange on, so the suite checks the store's own range reads.
type heldStore struct {
	*s3store.Store
	proxy *holdingProxy
}

var _ ownership.RangeReader = heldStore{}

// HoldWrites implements buckettest.Holder.
func (h heldStore) HoldWrites(t *testing.T) (release func()) { return h.proxy.hold() }

func openHeld(t *testing.T) heldStore {
	target, err := url.Parse(gw.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy passes the Host header through unchanged, so the server
	// checks the signature over the host the client signed.
	p := &holdingProxy{next: httputil.NewSingleHostReverseProxy(target)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	cfg := gw.Config(randomPrefix(t))
	cfg.Endpoint = srv.URL
	s, err := s3store.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return heldStore{Store: s, proxy: p}
}

// holdingProxy forwards requests to the server, except that while held it
// keeps PUT and DELETE requests waiting. A held request whose client gives up
// is dropped: the server never sees it, one of the things an unknown outcome
// covers.
type holdingProxy struct {
	next http.Handler
	mu   sync.Mutex
	gate chan struct{} // non-nil while holding; closed on release
}

func (p *holdingProxy) hold() (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.gate = nil
		p.mu.Unlock()
		close(gate)
	}
}

func (p *holdingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut || r.Method == http.MethodDelete {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
	}
	p.next.ServeHTTP(w, r)
}

// TestCheckConditions runs the conditional-write check against the server
// the tests use: it must be sound. Its content-derived ETags are a warning.
func TestCheckConditions(t *testing.T) {
	r := bucketcheck.Run(t.Context(), open(t), "check/", "n1")
	if !r.Sound() {
		t.Fatalf("versitygw judged unsound:\n%s", r)
	}
	t.Logf("\n%s", r)
}

func BenchmarkPutIfAbsent(b *testing.B) {
	s := open(b)
	body := make([]byte, 200)
	i := 0
	for b.Loop() {
		if _, err := s.Put(b.Context(), fmt.Sprintf("k%d", i), body, ownership.IfAbsent()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkPutIfMatch(b *testing.B) {
	s := open(b)
	body := make([]byte, 200)
	etag, err := s.Put(b.Context(), "k", body, ownership.IfAbsent())
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		// Distinct bytes each time: equal bytes would give S3 the same
		// ETag back, which is not what a record write looks like.
		copy(body, fmt.Sprintf("%d", i))
		if etag, err = s.Put(b.Context(), "k", body, ownership.IfMatch(etag)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkGet(b *testing.B) {
	s := open(b)
	if _, err := s.Put(b.Context(), "k", make([]byte, 200), ownership.IfAbsent()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(b.Context(), "k"); err != nil {
			b.Fatal(err)
		}
	}
}
