package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Forward sends a client's request r (whose body, read already, is body)
// for actor a to the node d that holds it, and relays the holder's answer
// to w. Unless last, an answer that says the event did not run there, or
// (retrying: an earlier try may have reached it) that it may have or
// still runs, is not relayed: the caller sends it again. What is not
// relayed, Forward does not answer: the caller does, with the error. A
// request another node forwarded here is never forwarded again (no
// loops): it is refused, not run. A WebSocket upgrade is relayed (Relay).
func (c *Client) Forward(w http.ResponseWriter, r *http.Request, a ownership.Actor, d actorhost.Elsewhere, body []byte, last, retrying bool) (out Sent, err error) {
	if c.unsendable(w, r, a, d) {
		return Answered, nil
	}
	// A holder that hangs (stopped, cut off) takes the connection and
	// never answers: once this node takes it for dead (its lease unchanged
	// for ttl + grace, or read fenced) the forward ends, and the caller
	// sends the event again, with its key, to the record freed by the
	// fence: the new hold runs it unless the hung holder's commit of it
	// landed before the seal, which the key then finds. A later commit of
	// the hung holder cannot land (the seal refuses it), and its lease no
	// longer lets it answer.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var holderDead atomic.Bool
	defer c.watchHolder(d.Node, func() { holderDead.Store(true); cancel() })()
	r = r.WithContext(ctx)
	out = Answered
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = c.scheme()
			pr.Out.URL.Host = d.Addr
			pr.Out.Host = d.Addr
			pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			pr.Out.ContentLength = int64(len(body))
			c.header(pr.Out, d, body)
		},
		Transport: c.cfg.Transport,
		ModifyResponse: func(res *http.Response) error {
			c.peers.answered(d.Node)
			return c.judgeAnswer(a, d, res.StatusCode, res.Header, last, retrying)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, e error) {
			switch {
			case errors.Is(e, ErrHolderRefused):
				out, err = Refused, e
			case errors.Is(e, ErrHolderUnknown):
				out, err = Unknown, e
			default:
				out, err = c.judgeFailure(a, d, "forward", e, holderDead.Load())
			}
		},
	}
	proxy.ServeHTTP(w, r)
	return out, err
}

// unsendable refuses (503, not run) a request r that cannot be sent to d:
// one another node forwarded here (it is never forwarded again: no
// loops), or one for a holder whose address is not known here.
func (c *Client) unsendable(w http.ResponseWriter, r *http.Request, a ownership.Actor, d actorhost.Elsewhere) bool {
	switch {
	case r.Header.Get(ForwardedHeader) != "":
		c.log.Warn("not forwarding a forwarded request", slog.String("class", a.Class), slog.String("name", a.Name),
			slog.String("from", r.Header.Get(ForwardedHeader)), slog.String("holder", string(d.Node)))
		refuse(w, time.Second, fmt.Sprintf("actor held by node %s; request already forwarded", d.Node))
	case d.Addr == "":
		refuse(w, time.Second, fmt.Sprintf("actor held by node %s, whose address is not known here", d.Node))
	default:
		return false
	}
	return true
}

// Call sends an actor's call to the node d that holds the callee to, with
// the call's key (nil: none) and the chain of actors waiting for it (from
// ctx), and returns its answer (Answered), or what became of it. Unless
// last, the holder's answer that the call did not run there, or
// (retrying) that its outcome is unknown or it still runs, is not
// returned: the caller sends it again. A holder taken for dead while it
// does not answer ends the call as a forward's does.
func (c *Client) Call(ctx context.Context, to ownership.Actor, d actorhost.Elsewhere, req *actors.Request, key *actorhost.EventKey, last, retrying bool) (*actors.Response, Sent, error) {
	if d.Addr == "" {
		return nil, Answered, &actorhost.UnavailableError{Actor: to, Reason: fmt.Sprintf("held by node %s, whose address is not known here", d.Node), RetryAfter: time.Second}
	}
	u := url.URL{Scheme: c.scheme(), Host: d.Addr, Path: actorPath(to) + req.Path, RawQuery: req.Query.Encode()}
	u.RawPath = actorEscapedPath(to) + (&url.URL{Path: req.Path}).EscapedPath()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var holderDead atomic.Bool
	defer c.watchHolder(d.Node, func() { holderDead.Store(true); cancel() })()
	out, err := http.NewRequestWithContext(ctx, req.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, Answered, fmt.Errorf("call %s/%s: %w", to.Class, to.Name, err)
	}
	// Not sent again by the transport itself (it would, for a GET, on a new
	// connection when a kept-alive one broke): a failed dial would then
	// hide that the call had left.
	out.GetBody = nil
	for k, vs := range req.Header {
		out.Header[k] = vs
	}
	out.Header.Set(CallChainHeader, encodeChain(actorhost.CallChain(ctx)))
	out.Header.Del(EventKeyHeader)
	if key != nil {
		out.Header.Set(EventKeyHeader, key.String())
	}
	c.header(out, d, req.Body)
	res, err := c.cfg.Transport.RoundTrip(out)
	if err != nil {
		o, err := c.judgeFailure(to, d, "call", err, holderDead.Load())
		return nil, o, fmt.Errorf("call %s/%s: %w: node %s at %s: %w", to.Class, to.Name, actors.ErrCallFailed, d.Node, d.Addr, err)
	}
	c.peers.answered(d.Node)
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, c.cfg.MaxBody+1))
	switch {
	case err != nil:
		return nil, Unknown, fmt.Errorf("call %s/%s: %w: reading the answer of node %s: %w", to.Class, to.Name, actors.ErrCallFailed, d.Node, err)
	case int64(len(body)) > c.cfg.MaxBody:
		return nil, Answered, fmt.Errorf("call %s/%s: %w: answer over %d bytes", to.Class, to.Name, actors.ErrCallFailed, c.cfg.MaxBody)
	}
	if err := c.judgeAnswer(to, d, res.StatusCode, res.Header, last, retrying); err != nil {
		o := Refused
		if errors.Is(err, ErrHolderUnknown) {
			o = Unknown
		}
		return nil, o, fmt.Errorf("call %s/%s: node %s: %w", to.Class, to.Name, d.Node, err)
	}
	return &actors.Response{Status: res.StatusCode, Header: res.Header, Body: body}, Answered, nil
}

// Take sends the node t names the take call for its actor (see
// TakeHeader), signed for the target's instance: nil once the target holds
// the actor.
func (c *Client) Take(ctx context.Context, t ownership.Take) error {
	target, addr, a := t.Target, t.Addr, t.Actor
	if addr == "" {
		return fmt.Errorf("take %s/%s: the address of node %s is not known here", a.Class, a.Name, target)
	}
	u := url.URL{Scheme: c.scheme(), Host: addr, Path: actorPath(a), RawPath: actorEscapedPath(a)}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), http.NoBody)
	if err != nil {
		return fmt.Errorf("take %s/%s: %w", a.Class, a.Name, err)
	}
	out.Header.Set(TakeHeader, "1")
	c.header(out, actorhost.Elsewhere{Node: target, Addr: addr, Instance: t.Instance}, nil)
	res, err := c.cfg.Transport.RoundTrip(out)
	if err != nil {
		c.peers.failed(target, addr, "take", err)
		return fmt.Errorf("take %s/%s: node %s at %s: %w", a.Class, a.Name, target, addr, err)
	}
	c.peers.answered(target)
	defer res.Body.Close()
	if res.StatusCode == http.StatusNoContent {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	return fmt.Errorf("take %s/%s: node %s answered %s: %s", a.Class, a.Name, target, res.Status, strings.TrimSpace(string(msg)))
}

// actorPath and actorEscapedPath are the URL path of an actor, plain and
// escaped.
func actorPath(a ownership.Actor) string { return "/actor/" + a.Class + "/" + a.Name }

func actorEscapedPath(a ownership.Actor) string {
	return "/actor/" + url.PathEscape(a.Class) + "/" + url.PathEscape(a.Name)
}

// encodeChain is the value of CallChainHeader for chain.
func encodeChain(chain []ownership.Actor) string {
	parts := make([]string, len(chain))
	for i, a := range chain {
		parts[i] = url.PathEscape(a.Class) + "/" + url.PathEscape(a.Name)
	}
	return strings.Join(parts, ",")
}
