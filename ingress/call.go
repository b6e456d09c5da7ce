package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// CallChainHeader carries the chain of a call forwarded to another node:
// the actors waiting for it, outermost first, each as its escaped class
// and name joined by "/", separated by commas.
const CallChainHeader = "Wasmkeep-Call-Chain"

// Call routes an actor's call (actors.Caller) the way of a client's
// request (way.go): the callee runs it as an event here when this node
// holds it or may take it, and the node that holds it runs it otherwise,
// reached like a forwarded HTTP request, sent again with its key within
// the failover wait while that node does not answer. A draining node
// sends it to the peer that takes its actors. A refusal by the node that
// holds the callee (it is stopping, say) comes back as its 503 response.
func (h *Handler) Call(ctx context.Context, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	if err := h.checkCall(to, req); err != nil {
		return nil, fmt.Errorf("call %s/%s: %w: %w", to.Class, to.Name, actors.ErrBadCall, err)
	}
	if _, ok := h.cfg.Registry.Lookup(to.Class); !ok {
		return nil, fmt.Errorf("call %s/%s: %w", to.Class, to.Name, actors.ErrUnknownClass)
	}
	// A key that must be kept only if the call takes effect (one made for
	// an event without a key) is used once the call is sent to another
	// node: run here, the call cannot be lost on its way, and is not sent
	// twice.
	key, keyed := actors.EventKeyOf(ctx)
	var sentResp *actors.Response
	end := h.deliver(way{
		a: to, ctx: ctx, key: key, keyed: keyed, keyHere: key.Always, handOver: true,
		here: func(ctx context.Context) (*actors.Response, *actors.Elsewhere, error) {
			return h.cfg.Host.Dispatch(ctx, to, req)
		},
		send: func(ctx context.Context, at actors.Elsewhere, key *actors.EventKey, last, retrying bool) (out forwarded, err error) {
			sentResp, out, err = h.forwardCall(ctx, to, at, req, key, last, retrying)
			return out, err
		},
	})
	switch {
	case end.at == nil:
		return h.callAnswer(to, end.resp, end.err)
	case end.sent == forwardDone:
		return h.callAnswer(to, sentResp, end.err)
	case end.sent == forwardUnknown && end.retried:
		return nil, fmt.Errorf("call %s/%s: %w: %w: tried again for %s: %w", to.Class, to.Name, actors.ErrCallFailed, actors.ErrOutcomeUnknown, h.cfg.FailoverWait, end.err)
	case end.sent == forwardUnknown:
		return nil, fmt.Errorf("call %s/%s: %w: %w", to.Class, to.Name, actors.ErrOutcomeUnknown, end.err)
	}
	return nil, end.err
}

// callAnswer is a call's answer as the calling actor gets it.
func (h *Handler) callAnswer(to ownership.Actor, resp *actors.Response, err error) (*actors.Response, error) {
	switch {
	case errors.Is(err, ownership.ErrInvalidActor):
		return nil, fmt.Errorf("call %s/%s: %w: %w", to.Class, to.Name, actors.ErrCallFailed, err)
	case err == nil && resp.Accept != nil:
		return nil, fmt.Errorf("call %s/%s: the callee accepted a WebSocket, which a call cannot carry", to.Class, to.Name)
	}
	return resp, err
}

// checkCall checks a call as the ingress checks a client's request.
func (h *Handler) checkCall(to ownership.Actor, req *actors.Request) error {
	if err := checkName("class", to.Class); err != nil {
		return err
	}
	if err := checkName("name", to.Name); err != nil {
		return err
	}
	switch {
	case req == nil:
		return errors.New("no request")
	case req.Method != http.MethodGet && req.Method != http.MethodPost && req.Method != http.MethodPut && req.Method != http.MethodDelete:
		return fmt.Errorf("method %q: a call is a GET, POST, PUT or DELETE", req.Method)
	case req.Path != "" && !strings.HasPrefix(req.Path, "/"):
		return fmt.Errorf("path %q: want empty or starting with /", req.Path)
	case int64(len(req.Body)) > h.cfg.MaxBody:
		return fmt.Errorf("body of %d bytes, over %d", len(req.Body), h.cfg.MaxBody)
	}
	return nil
}

// forwardCall sends a call to the node that holds the callee, with the
// call's key, and returns its answer (forwardDone), or what became of it.
// Unless last, the holder's answer that the call did not run there, or
// (retrying) that its outcome is unknown or it still runs, is not
// returned: the caller sends it again. A holder taken for dead while it
// does not answer ends the call as a forward's does.
func (h *Handler) forwardCall(ctx context.Context, to ownership.Actor, d actors.Elsewhere, req *actors.Request, key *actors.EventKey, last, retrying bool) (*actors.Response, forwarded, error) {
	if d.Addr == "" {
		return nil, forwardDone, &actors.UnavailableError{Actor: to, Reason: fmt.Sprintf("held by node %s, whose address is not known here", d.Node), RetryAfter: time.Second}
	}
	u := url.URL{Scheme: "http", Host: d.Addr, Path: actorPath(to) + req.Path, RawQuery: req.Query.Encode()}
	u.RawPath = actorEscapedPath(to) + (&url.URL{Path: req.Path}).EscapedPath()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var holderDead atomic.Bool
	defer h.watchHolder(d.Node, func() { holderDead.Store(true); cancel() })()
	out, err := http.NewRequestWithContext(ctx, req.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, forwardDone, fmt.Errorf("call %s/%s: %w", to.Class, to.Name, err)
	}
	// Not sent again by the transport itself (it would, for a GET, on a new
	// connection when a kept-alive one broke): a failed dial would then
	// hide that the call had left.
	out.GetBody = nil
	for k, vs := range req.Header {
		out.Header[k] = vs
	}
	out.Header.Set(ForwardedHeader, string(h.cfg.Node))
	out.Header.Set(ForwardedToHeader, string(d.Node))
	setInstance(out.Header, d.Instance)
	out.Header.Set(CallChainHeader, encodeChain(actors.CallChain(ctx)))
	out.Header.Del(EventKeyHeader)
	if key != nil {
		out.Header.Set(EventKeyHeader, key.String())
	}
	if len(h.cfg.ClusterKey) > 0 {
		signRequest(out, req.Body, h.cfg.ClusterKey, time.Now())
	}
	res, err := h.cfg.Transport.RoundTrip(out)
	if err != nil {
		o, err := h.judgeFailure(to, d, "call", err, holderDead.Load())
		return nil, o, fmt.Errorf("call %s/%s: %w: node %s at %s: %w", to.Class, to.Name, actors.ErrCallFailed, d.Node, d.Addr, err)
	}
	h.peerLog.answered(d.Node)
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, h.cfg.MaxBody+1))
	switch {
	case err != nil:
		return nil, forwardUnknown, fmt.Errorf("call %s/%s: %w: reading the answer of node %s: %w", to.Class, to.Name, actors.ErrCallFailed, d.Node, err)
	case int64(len(body)) > h.cfg.MaxBody:
		return nil, forwardDone, fmt.Errorf("call %s/%s: %w: answer over %d bytes", to.Class, to.Name, actors.ErrCallFailed, h.cfg.MaxBody)
	}
	if err := h.judgeAnswer(to, d, res.StatusCode, res.Header, last, retrying); err != nil {
		o := forwardRefused
		if errors.Is(err, errHolderUnknown) {
			o = forwardUnknown
		}
		return nil, o, fmt.Errorf("call %s/%s: node %s: %w", to.Class, to.Name, d.Node, err)
	}
	return &actors.Response{Status: res.StatusCode, Header: res.Header, Body: body}, forwardDone, nil
}

// actorPath and actorEscapedPath are the URL path of an actor, plain and
// escaped.
func actorPath(a ownership.Actor) string { return "/actor/" + a.Class + "/" + a.Name }

func actorEscapedPath(a ownership.Actor) string {
	return "/actor/" + url.PathEscape(a.Class) + "/" + url.PathEscape(a.Name)
}

// encodeChain and decodeChain write and read CallChainHeader.
func encodeChain(chain []ownership.Actor) string {
	parts := make([]string, len(chain))
	for i, a := range chain {
		parts[i] = url.PathEscape(a.Class) + "/" + url.PathEscape(a.Name)
	}
	return strings.Join(parts, ",")
}

func decodeChain(s string) ([]ownership.Actor, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > actors.MaxCallDepth+1 {
		return nil, fmt.Errorf("call chain of %d actors, over %d", len(parts), actors.MaxCallDepth+1)
	}
	chain := make([]ownership.Actor, len(parts))
	for i, p := range parts {
		class, name, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("call chain entry %q: want class/name", p)
		}
		var err error
		if chain[i].Class, err = validName("class", class); err != nil {
			return nil, fmt.Errorf("call chain: %w", err)
		}
		if chain[i].Name, err = validName("name", name); err != nil {
			return nil, fmt.Errorf("call chain: %w", err)
		}
	}
	return chain, nil
}
