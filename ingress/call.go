package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
)

// CallChainHeader carries the chain of a call forwarded to another node:
// the actors waiting for it, outermost first, each as its escaped class
// and name joined by "/", separated by commas.
const CallChainHeader = "Wasmkeep-Call-Chain"

// Call routes an actor's call (actors.Caller): the callee runs it as an
// event here when this node holds it or may take it, and the node that
// holds it runs it otherwise, reached like a forwarded HTTP request. A
// refusal by that node (it is stopping, say) comes back as its 503
// response.
func (h *Handler) Call(ctx context.Context, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	if err := h.checkCall(to, req); err != nil {
		return nil, fmt.Errorf("call %s/%s: %w: %w", to.Class, to.Name, actors.ErrBadCall, err)
	}
	if _, ok := h.cfg.Registry.Lookup(to.Class); !ok {
		return nil, fmt.Errorf("call %s/%s: %w", to.Class, to.Name, actors.ErrUnknownClass)
	}
	f := failover{wait: h.cfg.FailoverWait}
	resp, at, err := h.cfg.Host.Dispatch(ctx, to, req)
	for at != nil {
		resp, err = h.forwardCall(ctx, to, *at, req)
		var op *net.OpError
		refused := err == nil && resp.Status == http.StatusServiceUnavailable && resp.Header.Get(NotRunHeader) != ""
		dial := errors.As(err, &op) && op.Op == "dial"
		if dial {
			h.cfg.Keeper.PeerUnreachable(at.Node)
		}
		if refused || err != nil {
			h.cfg.Keeper.RouteFailed(to, at.Node)
		}
		if !refused && !dial || !f.next(ctx) {
			return resp, err
		}
		// The holder took no connection: the call never left; asked
		// again, within the failover wait, once the holder answers or its
		// record is freed.
		resp, at, err = h.cfg.Host.Dispatch(ctx, to, req)
	}
	switch {
	case errors.Is(err, keeper.ErrInvalidActor):
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

// forwardCall sends a call to the node that holds the callee.
func (h *Handler) forwardCall(ctx context.Context, to ownership.Actor, d actors.Elsewhere, req *actors.Request) (*actors.Response, error) {
	if d.Addr == "" {
		return nil, &actors.UnavailableError{Actor: to, Reason: fmt.Sprintf("held by node %s, whose address is not known here", d.Node), RetryAfter: time.Second}
	}
	u := url.URL{Scheme: "http", Host: d.Addr, Path: actorPath(to) + req.Path, RawQuery: req.Query.Encode()}
	u.RawPath = actorEscapedPath(to) + (&url.URL{Path: req.Path}).EscapedPath()
	out, err := http.NewRequestWithContext(ctx, req.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, fmt.Errorf("call %s/%s: %w", to.Class, to.Name, err)
	}
	for k, vs := range req.Header {
		out.Header[k] = vs
	}
	out.Header.Set(ForwardedHeader, string(h.cfg.Node))
	out.Header.Set(ForwardedToHeader, string(d.Node))
	out.Header.Set(CallChainHeader, encodeChain(actors.CallChain(ctx)))
	if len(h.cfg.ClusterKey) > 0 {
		signRequest(out, req.Body, h.cfg.ClusterKey, time.Now())
	}
	res, err := h.cfg.Transport.RoundTrip(out)
	if err != nil {
		h.peerLog.failed(d.Node, d.Addr, "call", err)
		return nil, fmt.Errorf("call %s/%s: %w: node %s at %s: %w", to.Class, to.Name, actors.ErrCallFailed, d.Node, d.Addr, err)
	}
	h.peerLog.answered(d.Node)
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, h.cfg.MaxBody+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("call %s/%s: %w: reading the answer of node %s: %w", to.Class, to.Name, actors.ErrCallFailed, d.Node, err)
	case int64(len(body)) > h.cfg.MaxBody:
		return nil, fmt.Errorf("call %s/%s: %w: answer over %d bytes", to.Class, to.Name, actors.ErrCallFailed, h.cfg.MaxBody)
	}
	return &actors.Response{Status: res.StatusCode, Header: res.Header, Body: body}, nil
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
