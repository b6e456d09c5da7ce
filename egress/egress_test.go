package egress_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/ownership"
)

var ada = ownership.Actor{Class: "c", Name: "ada"}

// names resolves the names it has, and no other.
type names map[string][]netip.Addr

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ips, ok := n[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func client(t *testing.T, cfg egress.Config, rules ...string) (*egress.Client, *prometheus.Registry) {
	t.Helper()
	allow, err := egress.ParseAllow(rules)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	cfg.Allow, cfg.Metrics = allow, reg
	c, err := egress.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, reg
}

func TestParseAllow(t *testing.T) {
	for _, ok := range []string{"api.example.com", "*.example.com", "api.example.com:443", "10.0.0.0/8", "127.0.0.1", "127.0.0.1:8080", "[::1]:80", "::1", "fd00::/8"} {
		_, err := egress.ParseAllow([]string{ok})
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{"http://example.com", "exa mple.com", "example.com:0", "example.com:99999", "-a.com", "10.0.0.0/33", "a/b"} {
		_, err := egress.ParseAllow([]string{bad})
		require.Error(t, err, bad)
	}
	a, err := egress.ParseAllow(nil)
	require.NoError(t, err)
	require.True(t, a.Empty())
	require.Equal(t, "(nothing)", a.String())
}

// TestFetch: a request to an allowed address goes out with its method,
// headers and body, and its whole answer comes back; the metrics count it.
func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Token")+" "+string(body))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "made")
	}))
	defer srv.Close()
	c, reg := client(t, egress.Config{}, "127.0.0.1")
	resp, err := c.Fetch(t.Context(), ada, &actors.FetchRequest{Method: "POST", URL: srv.URL + "/things?x=1",
		Header: http.Header{"X-Token": {"t1"}}, Body: []byte("hello")})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status)
	require.Equal(t, "made", string(resp.Body))
	require.Equal(t, "POST /things t1 hello", resp.Header.Get("X-Seen"))
	require.Equal(t, 1.0, value(t, reg, "wasmkeep_fetch_requests_total", "2xx"))
	require.Equal(t, 5.0, value(t, reg, "wasmkeep_fetch_bytes_total", "sent"))
	require.Equal(t, 4.0, value(t, reg, "wasmkeep_fetch_bytes_total", "received"))
}

// value is the counter of name with the one label value (0 if none).
func value(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestAllowList: nothing is allowed but what the list names; a name the
// list allows cannot reach a loopback or private address it resolves to
// unless an address rule covers it; ports are checked; every refusal is
// ErrFetchRefused, sends nothing, and is counted.
func TestAllowList(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	res := names{"api.test": loop, "sub.api.test": loop}
	url := func(host string) string { return fmt.Sprintf("http://%s:%d/", host, port) }

	cases := []struct {
		rules []string
		host  string
		ok    bool
	}{
		{nil, "127.0.0.1", false},                                           // nothing by default
		{[]string{"api.test"}, "api.test", false},                           // a name smuggling loopback
		{[]string{"*.api.test"}, "sub.api.test", false},                     // so too a subdomain
		{[]string{"api.test", "127.0.0.0/8"}, "api.test", true},             // loopback named on its own
		{[]string{"127.0.0.1"}, "127.0.0.1", true},                          // an address
		{[]string{fmt.Sprintf("127.0.0.1:%d", port)}, "127.0.0.1", true},    // with its port
		{[]string{fmt.Sprintf("127.0.0.1:%d", port+1)}, "127.0.0.1", false}, // another port
		{[]string{"10.0.0.0/8"}, "127.0.0.1", false},                        // another range
		{[]string{"api.test"}, "127.0.0.1", false},                          // an address is not a name
		{[]string{"127.0.0.0/8"}, "api.test", true},                         // a name resolved into a range
		{[]string{"127.0.0.0/8"}, "nowhere.test", false},                    // a name that does not resolve
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.rules, ",")+"→"+tc.host, func(t *testing.T) {
			c, reg := client(t, egress.Config{Resolver: res}, tc.rules...)
			before := hits.Load()
			_, err := c.Fetch(t.Context(), ada, &actors.FetchRequest{URL: url(tc.host)})
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, before+1, hits.Load())
				return
			}
			require.Error(t, err)
			require.Equal(t, before, hits.Load(), "nothing was sent")
			if tc.host == "nowhere.test" {
				require.ErrorIs(t, err, actors.ErrFetchFailed)
				return
			}
			require.ErrorIs(t, err, actors.ErrFetchRefused)
			require.Equal(t, 1.0, value(t, reg, "wasmkeep_fetch_refusals_total", "allow-list"))
		})
	}
}

// TestRedirects: a redirect is followed to an allowed place, at most
// MaxRedirects times, and never to a place the list does not allow.
func TestRedirects(t *testing.T) {
	var other atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.Add(1) }))
	defer elsewhere.Close()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, srv.URL+"/loop", http.StatusFound)
		case "/once":
			http.Redirect(w, r, srv.URL+"/here", http.StatusFound)
		default:
			fmt.Fprint(w, "here")
		}
	}))
	defer srv.Close()
	c, _ := client(t, egress.Config{MaxRedirects: 3}, srv.Listener.Addr().String())

	resp, err := c.Fetch(t.Context(), ada, &actors.FetchRequest{URL: srv.URL + "/once"})
	require.NoError(t, err)
	require.Equal(t, "here", string(resp.Body))

	_, err = c.Fetch(t.Context(), ada, &actors.FetchRequest{URL: srv.URL + "/away"})
	require.ErrorIs(t, err, actors.ErrFetchRefused)
	require.Zero(t, other.Load(), "the redirect to a place not allowed was not followed")

	_, err = c.Fetch(t.Context(), ada, &actors.FetchRequest{URL: srv.URL + "/loop"})
	require.ErrorIs(t, err, actors.ErrFetchFailed)
	require.Contains(t, err.Error(), "more than 3 redirects")
}

// TestBounds: bodies over their bounds, a malformed request, and a
// service that does not answer in time each fail clearly.
func TestBounds(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		w.Write(make([]byte, 2048))
	}))
	defer srv.Close()
	c, reg := client(t, egress.Config{MaxRequestBody: 100, MaxResponseBody: 1024, Timeout: 300 * time.Millisecond}, "127.0.0.1")

	_, err := c.Fetch(t.Context(), ada, &actors.FetchRequest{Method: "POST", URL: srv.URL, Body: make([]byte, 101)})
	require.ErrorIs(t, err, actors.ErrLimit)
	_, err = c.Fetch(t.Context(), ada, &actors.FetchRequest{URL: srv.URL})
	require.ErrorIs(t, err, actors.ErrLimit)
	require.Contains(t, err.Error(), "over 1024 bytes")
	require.Equal(t, 2.0, value(t, reg, "wasmkeep_fetch_refusals_total", "limit"))

	for _, bad := range []*actors.FetchRequest{{URL: "ftp://127.0.0.1/"}, {URL: "/relative"}, {Method: "CONNECT", URL: srv.URL}, {URL: "http://%zz"}} {
		_, err = c.Fetch(t.Context(), ada, bad)
		require.ErrorIs(t, err, actors.ErrBadFetch, bad.URL)
	}

	start := time.Now()
	_, err = c.Fetch(t.Context(), ada, &actors.FetchRequest{URL: srv.URL + "/hang?secret=1"})
	require.ErrorIs(t, err, actors.ErrFetchFailed)
	require.NotContains(t, err.Error(), "secret", "an error never carries the query")
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestPerActorBound: one actor's requests beyond PerActor wait for a
// slot; another actor's do not.
func TestPerActorBound(t *testing.T) {
	var mu sync.Mutex
	inflight := map[string]int{}
	most := map[string]int{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := r.URL.Query().Get("who")
		mu.Lock()
		inflight[who]++
		most[who] = max(most[who], inflight[who])
		mu.Unlock()
		<-release
		mu.Lock()
		inflight[who]--
		mu.Unlock()
	}))
	defer srv.Close()
	c, _ := client(t, egress.Config{PerActor: 2}, "127.0.0.1")
	bob := ownership.Actor{Class: "c", Name: "bob"}
	var wg sync.WaitGroup
	for i := range 5 {
		a, who := ada, "ada"
		if i == 4 {
			a, who = bob, "bob"
		}
		wg.Go(func() {
			_, err := c.Fetch(t.Context(), a, &actors.FetchRequest{URL: srv.URL + "/?who=" + who})
			require.NoError(t, err)
		})
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inflight["ada"] == 2 && inflight["bob"] == 1
	}, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	require.Equal(t, 2, most["ada"])
	require.Equal(t, 1, most["bob"])
}

// TestSocketChecks: an outbound socket's URL is checked as a request's
// is (ws:// and wss:// with their ports), and its dial checks the address
// it dials, counting a refusal.
func TestSocketChecks(t *testing.T) {
	c, reg := client(t, egress.Config{}, "127.0.0.1:9000", "feeds.example.com")
	require.NoError(t, c.CheckSocket("ws://127.0.0.1:9000/feed"))
	require.NoError(t, c.CheckSocket("wss://feeds.example.com/ticks"), "443 by the scheme")
	require.ErrorIs(t, c.CheckSocket("ws://127.0.0.1:9001/feed"), actors.ErrFetchRefused)
	for _, bad := range []string{"http://127.0.0.1:9000/", "ws://", "%zz"} {
		require.ErrorIs(t, c.CheckSocket(bad), actors.ErrBadFetch, bad)
	}
	_, err := c.Dial(t.Context(), "tcp", "127.0.0.2:9000")
	require.ErrorIs(t, err, actors.ErrFetchRefused, "the address dialed is checked")
	require.Equal(t, 2.0, value(t, reg, "wasmkeep_fetch_refusals_total", "allow-list"))
}
