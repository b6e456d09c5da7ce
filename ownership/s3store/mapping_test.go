package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

// These tests run the store against an httptest server on 127.0.0.1 that
// answers what real servers answer in bad moments, and check the outcome a
// caller sees and how many requests reached the server.

const testAttempts = 3

// fakeS3 counts requests and answers them with handle.
type fakeS3 struct {
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	last     *http.Request // header and URL of the latest request
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *fakeS3 {
	t.Helper()
	f := &fakeS3{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(f.requests.Add(1))
		_, _ = io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.last = r.Clone(context.Background())
		f.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeS3) lastRequest() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeS3) store(t *testing.T, prefix string) *s3store.Store {
	t.Helper()
	s, err := s3store.New(context.Background(), s3store.Config{
		Endpoint:       f.srv.URL,
		Region:         "us-east-1",
		Bucket:         "b",
		Prefix:         prefix,
		PathStyle:      true,
		AccessKey:      "k",
		SecretKey:      "s",
		AttemptTimeout: 300 * time.Millisecond,
		MaxAttempts:    testAttempts,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func s3Error(status int, code string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
				`<Error><Code>%s</Code><Message>test</Message><RequestId>req</RequestId></Error>`, code)
		}
	}
}

// hang never answers; the client's per-attempt timeout must end the request.
func hang(w http.ResponseWriter, r *http.Request, _ int) {
	<-r.Context().Done()
}

// reset aborts the connection with a TCP RST after reading the request.
func reset(w http.ResponseWriter, r *http.Request, _ int) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	conn.Close()
}

// hangUp closes the connection cleanly without answering: the client sees EOF.
func hangUp(w http.ResponseWriter, r *http.Request, _ int) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// call is one store operation under test.
type call struct {
	name string
	do   func(context.Context, *s3store.Store) error
}

var (
	getCall = call{"get", func(ctx context.Context, s *s3store.Store) error {
		_, err := s.Get(ctx, "k")
		return err
	}}
	putCall = call{"put", func(ctx context.Context, s *s3store.Store) error {
		_, err := s.Put(ctx, "k", []byte("v"), ownership.Always())
		return err
	}}
	createCall = call{"put-if-absent", func(ctx context.Context, s *s3store.Store) error {
		_, err := s.Put(ctx, "k", []byte("v"), ownership.IfAbsent())
		return err
	}}
	replaceCall = call{"put-if-match", func(ctx context.Context, s *s3store.Store) error {
		_, err := s.Put(ctx, "k", []byte("v"), ownership.IfMatch(`"e1"`))
		return err
	}}
	deleteCall = call{"delete", func(ctx context.Context, s *s3store.Store) error {
		return s.Delete(ctx, "k", ownership.Always())
	}}
	condDeleteCall = call{"delete-if-match", func(ctx context.Context, s *s3store.Store) error {
		return s.Delete(ctx, "k", ownership.IfMatch(`"e1"`))
	}}
	rangeCall = call{"get-range", func(ctx context.Context, s *s3store.Store) error {
		_, err := s.GetRange(ctx, "k", 10, 100)
		return err
	}}
	listCall = call{"list", func(ctx context.Context, s *s3store.Store) error {
		_, err := s.List(ctx, "", "", 0)
		return err
	}}
)

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		call     call
		server   string
		handle   func(http.ResponseWriter, *http.Request, int)
		want     ownership.Outcome
		requests int
	}{
		// Refusals of conditional writes, in every form servers send them.
		{createCall, "412", s3Error(412, "PreconditionFailed"), ownership.Refused, 1},
		{replaceCall, "412", s3Error(412, "PreconditionFailed"), ownership.Refused, 1},
		{createCall, "409 conflict", s3Error(409, "ConditionalRequestConflict"), ownership.Refused, 1},
		{replaceCall, "409 conflict", s3Error(409, "ConditionalRequestConflict"), ownership.Refused, 1},
		{replaceCall, "404 if-match", s3Error(404, "NoSuchKey"), ownership.Refused, 1},
		{condDeleteCall, "412", s3Error(412, "PreconditionFailed"), ownership.Refused, 1},
		{condDeleteCall, "404 if-match", s3Error(404, "NoSuchKey"), ownership.Refused, 1},

		// No answer. A conditional write is sent exactly once; repeatable
		// operations are retried up to MaxAttempts.
		{createCall, "500", s3Error(500, "InternalError"), ownership.Unknown, 1},
		{replaceCall, "503", s3Error(503, "SlowDown"), ownership.Unknown, 1},
		{condDeleteCall, "500", s3Error(500, "InternalError"), ownership.Unknown, 1},
		{createCall, "hung", hang, ownership.Unknown, 1},
		{replaceCall, "hung", hang, ownership.Unknown, 1},
		{condDeleteCall, "hung", hang, ownership.Unknown, 1},
		{createCall, "reset", reset, ownership.Unknown, 1},
		{replaceCall, "eof", hangUp, ownership.Unknown, 1},
		{getCall, "500", s3Error(500, "InternalError"), ownership.Unknown, testAttempts},
		{getCall, "503", s3Error(503, "SlowDown"), ownership.Unknown, testAttempts},
		{getCall, "hung", hang, ownership.Unknown, testAttempts},
		{getCall, "reset", reset, ownership.Unknown, testAttempts},
		{getCall, "eof", hangUp, ownership.Unknown, testAttempts},
		{rangeCall, "500", s3Error(500, "InternalError"), ownership.Unknown, testAttempts},
		{rangeCall, "hung", hang, ownership.Unknown, testAttempts},
		{rangeCall, "reset", reset, ownership.Unknown, testAttempts},
		{putCall, "500", s3Error(500, "InternalError"), ownership.Unknown, testAttempts},
		{putCall, "hung", hang, ownership.Unknown, testAttempts},
		{deleteCall, "503", s3Error(503, "SlowDown"), ownership.Unknown, testAttempts},
		{listCall, "500", s3Error(500, "InternalError"), ownership.Unknown, testAttempts},
		{listCall, "reset", reset, ownership.Unknown, testAttempts},

		// Absent keys.
		{getCall, "404", s3Error(404, "NoSuchKey"), ownership.NotFound, 1},
		{rangeCall, "404", s3Error(404, "NoSuchKey"), ownership.NotFound, 1},
		{deleteCall, "404", s3Error(404, "NoSuchKey"), ownership.Landed, 1},

		// Definite failures: nothing written, nothing retried.
		{createCall, "403", s3Error(403, "AccessDenied"), ownership.Failed, 1},
		{getCall, "403", s3Error(403, "AccessDenied"), ownership.Failed, 1},
		{rangeCall, "403", s3Error(403, "AccessDenied"), ownership.Failed, 1},
		{rangeCall, "404 bucket", s3Error(404, "NoSuchBucket"), ownership.Failed, 1},
		{putCall, "400", s3Error(400, "InvalidArgument"), ownership.Failed, 1},
		{createCall, "409 other", s3Error(409, "OperationAborted"), ownership.Failed, 1},
		{createCall, "501", s3Error(501, "NotImplemented"), ownership.Failed, 1},
		{getCall, "404 bucket", s3Error(404, "NoSuchBucket"), ownership.Failed, 1},
		{createCall, "404 bucket", s3Error(404, "NoSuchBucket"), ownership.Failed, 1},
		{listCall, "404 bucket", s3Error(404, "NoSuchBucket"), ownership.Failed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.call.name+"/"+strings.ReplaceAll(tt.server, " ", "-"), func(t *testing.T) {
			// Each case has its own server; most of the time goes to
			// attempts timing out, which overlap well.
			t.Parallel()
			f := newFake(t, tt.handle)
			err := tt.call.do(context.Background(), f.store(t, ""))
			if got := ownership.OutcomeOf(err); got != tt.want {
				t.Errorf("outcome %v, want %v (err: %v)", got, tt.want, err)
			}
			if got := int(f.requests.Load()); got != tt.requests {
				t.Errorf("server saw %d requests, want %d", got, tt.requests)
			}
		})
	}
}

// TestUnknownKeepsCause checks that an unknown outcome still says why.
func TestUnknownKeepsCause(t *testing.T) {
	f := newFake(t, hang)
	_, err := f.store(t, "").Put(context.Background(), "k", nil, ownership.IfAbsent())
	if !errors.Is(err, ownership.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrUnknownOutcome wrapping context.DeadlineExceeded", err)
	}
}

func TestRetryThenSuccess(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			s3Error(500, "InternalError")(w, r, n)
			return
		}
		w.Header().Set("ETag", `"e2"`)
		_, _ = io.WriteString(w, "body")
	})
	obj, err := f.store(t, "").Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if string(obj.Body) != "body" || obj.ETag != `"e2"` {
		t.Errorf("got %q %s, want \"body\" \"e2\"", obj.Body, obj.ETag)
	}
	if n := f.requests.Load(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

// TestCallerContextEndsRetries checks that a cancelled caller gets an unknown
// outcome at once instead of further attempts.
func TestCallerContextEndsRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		cancel()
		<-r.Context().Done()
	})
	_, err := f.store(t, "").Get(ctx, "k")
	if ownership.OutcomeOf(err) != ownership.Unknown || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want unknown wrapping context.Canceled", err)
	}
	if n := f.requests.Load(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// TestConditionHeaders checks the headers of conditional requests, the
// prefix in the path, and that ETags travel verbatim both ways.
func TestConditionHeaders(t *testing.T) {
	const etag = `"3858f62230ac3c915f300c664312c63f-2"`
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusOK)
	})
	s := f.store(t, "pre/")
	ctx := context.Background()

	got, err := s.Put(ctx, "k", []byte("v"), ownership.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	if got != etag {
		t.Errorf("put returned %s, want %s", got, etag)
	}
	r := f.lastRequest()
	if r.Method != http.MethodPut || r.URL.Path != "/b/pre/k" {
		t.Errorf("request %s %s, want PUT /b/pre/k", r.Method, r.URL.Path)
	}
	if h := r.Header.Get("If-None-Match"); h != "*" {
		t.Errorf("If-None-Match %q, want *", h)
	}
	if h := r.Header.Get("If-Match"); h != "" {
		t.Errorf("If-Match %q on a create", h)
	}

	if _, err := s.Put(ctx, "k", []byte("v2"), ownership.IfMatch(got)); err != nil {
		t.Fatal(err)
	}
	if h := f.lastRequest().Header.Get("If-Match"); h != etag {
		t.Errorf("If-Match %q, want %q", h, etag)
	}

	if _, err := s.Put(ctx, "k", []byte("v3"), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	r = f.lastRequest()
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" {
		t.Errorf("unconditional put sent conditions: %v", r.Header)
	}

	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.last = r.Clone(context.Background())
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	if err := s.Delete(ctx, "k", ownership.IfMatch(etag)); err != nil {
		t.Fatal(err)
	}
	r = f.lastRequest()
	if r.Method != http.MethodDelete || r.Header.Get("If-Match") != etag {
		t.Errorf("delete sent %s If-Match %q, want DELETE %q", r.Method, r.Header.Get("If-Match"), etag)
	}
}

func TestListStripsPrefix(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Name>b</Name><Prefix>pre/a</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>
<Contents><Key>pre/a1</Key><ETag>&quot;e1&quot;</ETag><Size>3</Size></Contents>
<Contents><Key>pre/a2</Key><ETag>&quot;e2&quot;</ETag><Size>5</Size></Contents>
</ListBucketResult>`)
	})
	page, err := f.store(t, "pre/").List(context.Background(), "a", "a0", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := ownership.ListPage{Truncated: true, Entries: []ownership.ListEntry{
		{Key: "a1", ETag: `"e1"`, Size: 3},
		{Key: "a2", ETag: `"e2"`, Size: 5},
	}}
	if fmt.Sprint(page) != fmt.Sprint(want) {
		t.Errorf("page %+v, want %+v", page, want)
	}
	q := f.lastRequest().URL.Query()
	wantQuery := url.Values{"list-type": {"2"}, "prefix": {"pre/a"}, "start-after": {"pre/a0"}, "max-keys": {"2"}}
	for k, v := range wantQuery {
		if q.Get(k) != v[0] {
			t.Errorf("query %s=%q, want %q", k, q.Get(k), v[0])
		}
	}
}

// TestListDecodesKeys: keys a server URL-encodes (because encoding-type=url
// was asked for and it says it applied it) are decoded as S3 encodes them;
// keys it sends plain are taken as they are.
func TestListDecodesKeys(t *testing.T) {
	for _, c := range []struct {
		encodingType string
		keys         []string
		want         []string
	}{
		{"url", []string{"pre/with+space", "pre/plus%2Bsign", "pre/%01ctrl", "pre/%C3%A9"},
			[]string{"with space", "plus+sign", "\x01ctrl", "é"}},
		{"", []string{"pre/with space", "pre/plus+sign", "pre/%41"},
			[]string{"with space", "plus+sign", "%41"}},
	} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			if got := r.URL.Query().Get("encoding-type"); got != "url" {
				t.Errorf("encoding-type=%q, want url", got)
			}
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>`)
			if c.encodingType != "" {
				fmt.Fprintf(w, "<EncodingType>%s</EncodingType>", c.encodingType)
			}
			for _, k := range c.keys {
				fmt.Fprintf(w, "<Contents><Key>%s</Key><ETag>&quot;e&quot;</ETag><Size>1</Size></Contents>", k)
			}
			fmt.Fprint(w, `<IsTruncated>false</IsTruncated></ListBucketResult>`)
		})
		page, err := f.store(t, "pre/").List(context.Background(), "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range page.Entries {
			got = append(got, e.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("encoding %q: keys %q, want %q", c.encodingType, got, c.want)
		}
	}
}

// TestRejectedBeforeSending checks that invalid arguments never reach the
// server.
func TestRejectedBeforeSending(t *testing.T) {
	f := newFake(t, s3Error(500, "InternalError"))
	s := f.store(t, strings.Repeat("p", 1000))
	ctx := context.Background()
	cases := []struct {
		name    string
		err     error
		invalid bool
	}{
		{"empty key", func() error { _, err := s.Get(ctx, ""); return err }(), true},
		{"not utf-8", func() error { _, err := s.Put(ctx, "\xff", nil, ownership.Always()); return err }(), true},
		{"over limit with prefix", func() error { _, err := s.Get(ctx, strings.Repeat("k", 25)); return err }(), true},
		{"delete if-absent", s.Delete(ctx, "k", ownership.IfAbsent()), false},
		{"range of an invalid key", func() error { _, err := s.GetRange(ctx, "", 0, 1); return err }(), true},
		{"range at a negative offset", func() error { _, err := s.GetRange(ctx, "k", -1, 1); return err }(), false},
		{"range of no bytes", func() error { _, err := s.GetRange(ctx, "k", 0, 0); return err }(), false},
	}
	for _, err := range []error{
		func() error { _, err := s.Put(ctx, "k", nil, ownership.IfMatch("")); return err }(),
		s.Delete(ctx, "k", ownership.IfMatch("")),
	} {
		if ownership.OutcomeOf(err) != ownership.Refused {
			t.Errorf("if-match with the empty ETag: %v, want refused", err)
		}
	}
	for _, c := range cases {
		if ownership.OutcomeOf(c.err) != ownership.Failed || errors.Is(c.err, ownership.ErrInvalidKey) != c.invalid {
			t.Errorf("%s: err = %v, want a failure (invalid key: %v)", c.name, c.err, c.invalid)
		}
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := s3store.Config{Bucket: "b", Endpoint: "http://127.0.0.1:9000"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*s3store.Config)
	}{
		{"no bucket", func(c *s3store.Config) { c.Bucket = "" }},
		{"slash in bucket", func(c *s3store.Config) { c.Bucket = "a/b" }},
		{"endpoint scheme", func(c *s3store.Config) { c.Endpoint = "ftp://x" }},
		{"endpoint host", func(c *s3store.Config) { c.Endpoint = "http://" }},
		{"endpoint syntax", func(c *s3store.Config) { c.Endpoint = "http://[::1" }},
		{"prefix utf-8", func(c *s3store.Config) { c.Prefix = "\xff" }},
		{"prefix length", func(c *s3store.Config) { c.Prefix = strings.Repeat("p", ownership.MaxKeyLen) }},
		{"secret without access", func(c *s3store.Config) { c.SecretKey = "s" }},
		{"access without secret", func(c *s3store.Config) { c.AccessKey = "a" }},
		{"token alone", func(c *s3store.Config) { c.SessionToken = "t" }},
		{"negative timeout", func(c *s3store.Config) { c.AttemptTimeout = -time.Second }},
		{"negative attempts", func(c *s3store.Config) { c.MaxAttempts = -1 }},
	}
	for _, tt := range tests {
		c := ok
		tt.edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate() = nil", tt.name)
		}
		if _, err := s3store.New(context.Background(), c); err == nil {
			t.Errorf("%s: New() = nil error", tt.name)
		}
	}
}
