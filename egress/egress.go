// Package egress sends the outbound HTTP requests of actors (actors.Fetch,
// and a wasm guest's http_fetch): one HTTP client for the node, bounded in
// time and in bytes both ways, following a bounded number of redirects,
// with a bound on the requests one actor has in flight, and an allow-list
// (Allow) checked against every address it dials. Nothing is allowed but
// what the operator names.
//
// The commit point before a request leaves (the event's writes so far made
// durable) is the runtime's (internal/actorhost): this package only sends.
package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Defaults of Config.
const (
	DefaultConnectTimeout  = 5 * time.Second
	DefaultTimeout         = 30 * time.Second
	DefaultMaxRequestBody  = 1 << 20
	DefaultMaxResponseBody = 8 << 20
	DefaultMaxRedirects    = 5
	DefaultPerActor        = 6
)

// Config is what a Client runs with; zero fields take the defaults.
type Config struct {
	// Allow is where requests may go; nil or empty allows nothing.
	Allow *Allow
	// ConnectTimeout bounds a connection's dial and TLS handshake;
	// Timeout, a whole request, redirects and the response body included
	// (an event's own deadline, if sooner, bounds it too).
	ConnectTimeout, Timeout time.Duration
	// MaxRequestBody and MaxResponseBody bound the bodies, in bytes.
	MaxRequestBody, MaxResponseBody int64
	// MaxRedirects bounds the redirects one request follows; a negative
	// value follows none (the 3xx is the answer).
	MaxRedirects int
	// PerActor bounds the requests one actor has in flight; more wait for
	// a slot, within their deadline.
	PerActor int
	// Metrics, when set, registers the client's metrics.
	Metrics prometheus.Registerer
	// Resolver resolves host names (default net.DefaultResolver).
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
}

func (c Config) withDefaults() Config {
	if c.Allow == nil {
		c.Allow = &Allow{}
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxRequestBody <= 0 {
		c.MaxRequestBody = DefaultMaxRequestBody
	}
	if c.MaxResponseBody <= 0 {
		c.MaxResponseBody = DefaultMaxResponseBody
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = DefaultMaxRedirects
	}
	if c.PerActor <= 0 {
		c.PerActor = DefaultPerActor
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	return c
}

// Client sends actors' outbound requests. It is safe for concurrent use.
type Client struct {
	cfg    Config
	client *http.Client
	dialer net.Dialer
	m      *metrics

	mu    sync.Mutex
	slots map[ownership.Actor]*slot
}

// slot is one actor's requests in flight: ch holds a token for each; users
// counts those in flight or waiting, so that the entry goes with the last.
type slot struct {
	ch    chan struct{}
	users int
}

// New returns a Client of cfg.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg, slots: map[ownership.Actor]*slot{}, dialer: net.Dialer{Timeout: cfg.ConnectTimeout}}
	t := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment: the list is checked against what is dialed
		DialContext:           c.dial,
		TLSHandshakeTimeout:   cfg.ConnectTimeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	c.client = &http.Client{Transport: t, CheckRedirect: c.checkRedirect}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	c.m = m
	return c, nil
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.client.CloseIdleConnections() }

// refusedError is a request the allow-list refuses.
type refusedError struct{ what string }

func (e *refusedError) Error() string {
	return actors.ErrFetchRefused.Error() + ": " + e.what + " (wasmkeep serve --egress-allow)"
}
func (e *refusedError) Unwrap() error { return actors.ErrFetchRefused }

// methods are the methods a request may have.
var methods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true}

// Check reports whether req may be sent at all, without sending it or
// resolving any name: its method, URL, body and the allow-list's rules
// for the host it names. An IP address the name resolves to is checked
// again when it is dialed (Fetch).
func (c *Client) Check(req *actors.FetchRequest) error {
	_, err := c.check(req)
	return err
}

func (c *Client) check(req *actors.FetchRequest) (*url.URL, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !methods[method] {
		c.m.refused("invalid")
		return nil, fmt.Errorf("%w: method %q: want GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", actors.ErrBadFetch, method)
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		c.m.refused("invalid")
		return nil, fmt.Errorf("%w: %v", actors.ErrBadFetch, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		c.m.refused("invalid")
		return nil, fmt.Errorf("%w: URL %q: want http:// or https:// and a host", actors.ErrBadFetch, redact(u))
	}
	if int64(len(req.Body)) > c.cfg.MaxRequestBody {
		c.m.refused("limit")
		return nil, fmt.Errorf("%w: request body of %d bytes, limit %d", actors.ErrLimit, len(req.Body), c.cfg.MaxRequestBody)
	}
	if err := c.reachable(u); err != nil {
		return nil, err
	}
	return u, nil
}

// reachable checks u's host and port against the list's rules.
func (c *Client) reachable(u *url.URL) error {
	host, port := hostPort(u)
	if !c.cfg.Allow.mayReach(host, port) {
		c.m.refused("allow-list")
		return &refusedError{what: fmt.Sprintf("%s port %d is not allowed; allowed: %s", host, port, c.cfg.Allow)}
	}
	return nil
}

// hostPort is u's host, lower case, and its port (the scheme's if none).
func hostPort(u *url.URL) (string, int) {
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	port, err := strconv.Atoi(u.Port())
	if err != nil || port == 0 {
		port = 80
		if u.Scheme == "https" || u.Scheme == "wss" {
			port = 443
		}
	}
	return host, port
}

// redact is u without its user information or query, for an error.
func redact(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
}

// Fetch sends req for actor a and reads its response, whole, within the
// bounds of Config. Errors match actors.ErrBadFetch (the request is
// malformed), actors.ErrFetchRefused (the allow-list), actors.ErrLimit
// (a body over its bound) or actors.ErrFetchFailed (no answer: a
// connection, a timeout, a bound of redirects).
func (c *Client) Fetch(ctx context.Context, a ownership.Actor, req *actors.FetchRequest) (*actors.FetchResponse, error) {
	u, err := c.check(req)
	if err != nil {
		return nil, err
	}
	release, err := c.acquire(ctx, a)
	if err != nil {
		c.m.failed()
		return nil, fmt.Errorf("%w: waiting for one of the actor's %d request slots: %w", actors.ErrFetchFailed, c.cfg.PerActor, err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		c.m.refused("invalid")
		return nil, fmt.Errorf("%w: %v", actors.ErrBadFetch, err)
	}
	if req.Header != nil {
		hr.Header = req.Header.Clone()
	}
	if h := hr.Header.Get("Host"); h != "" {
		hr.Host = h // as a browser's fetch cannot, but a server-side client can
	}
	start := time.Now()
	c.m.sent(len(req.Body))
	resp, err := c.client.Do(hr)
	if err != nil {
		return nil, c.failure(u, start, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBody+1))
	c.m.received(len(body))
	if err != nil {
		return nil, c.failure(u, start, err)
	}
	if int64(len(body)) > c.cfg.MaxResponseBody {
		c.m.refused("limit")
		return nil, fmt.Errorf("%w: response body of %s over %d bytes", actors.ErrLimit, redact(u), c.cfg.MaxResponseBody)
	}
	c.m.done(resp.StatusCode, time.Since(start))
	return &actors.FetchResponse{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// failure counts and words a request that got no answer.
func (c *Client) failure(u *url.URL, start time.Time, err error) error {
	if re := (*refusedError)(nil); errors.As(err, &re) {
		c.m.refused("allow-list")
		return re
	}
	c.m.failed()
	c.m.latency(time.Since(start))
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL, query and all
	}
	return fmt.Errorf("%w: %s %s: %w", actors.ErrFetchFailed, "request to", redact(u), err)
}

// checkRedirect follows at most MaxRedirects redirects, each to a URL the
// list's rules allow (the dial checks its addresses again).
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if c.cfg.MaxRedirects < 0 {
		return http.ErrUseLastResponse
	}
	if len(via) > c.cfg.MaxRedirects {
		return fmt.Errorf("more than %d redirects", c.cfg.MaxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirect to %q: want http:// or https://", redact(req.URL))
	}
	return c.reachable(req.URL)
}

// dial connects to addr (host:port) at an address the list allows: a
// name is resolved here, and each of its addresses checked, so that the
// address checked is the one dialed.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return nil, err
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = c.cfg.Resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, err
	}
	var last error
	for _, ip := range ips {
		if !c.cfg.Allow.dialAllowed(host, ip, port) {
			continue
		}
		conn, err := c.dialer.DialContext(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		last = err
	}
	if last == nil {
		return nil, &refusedError{what: fmt.Sprintf("%s port %d resolves to %v, none allowed; allowed: %s", host, port, ips, c.cfg.Allow)}
	}
	return nil, last
}

// CheckSocket reports whether an outbound WebSocket may be opened to raw
// at all, without dialing or resolving anything: a ws:// or wss:// URL
// with a host, and the allow-list's rules for that host and port (80 or
// 443 by the scheme unless given). Errors match actors.ErrBadFetch or
// actors.ErrFetchRefused. Dial checks the address dialed again.
func (c *Client) CheckSocket(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		c.m.refused("invalid")
		return fmt.Errorf("%w: %v", actors.ErrBadFetch, err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" || u.Host == "" {
		c.m.refused("invalid")
		return fmt.Errorf("%w: URL %q: want ws:// or wss:// and a host", actors.ErrBadFetch, redact(u))
	}
	return c.reachable(u)
}

// Dial connects an outbound WebSocket's connection to addr (host:port)
// as a fetch's are dialed: each address a name resolves to is checked
// against the allow-list, and only an allowed one is dialed, within the
// connect timeout. A refusal matches actors.ErrFetchRefused and is
// counted.
func (c *Client) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dial(ctx, network, addr)
	if re := (*refusedError)(nil); errors.As(err, &re) {
		c.m.refused("allow-list")
	}
	return conn, err
}

// acquire takes one of a's request slots, waiting within ctx.
func (c *Client) acquire(ctx context.Context, a ownership.Actor) (func(), error) {
	c.mu.Lock()
	s := c.slots[a]
	if s == nil {
		s = &slot{ch: make(chan struct{}, c.cfg.PerActor)}
		c.slots[a] = s
	}
	s.users++
	c.mu.Unlock()
	leave := func() {
		c.mu.Lock()
		if s.users--; s.users == 0 {
			delete(c.slots, a)
		}
		c.mu.Unlock()
	}
	select {
	case s.ch <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	return func() {
		<-s.ch
		leave()
	}, nil
}
