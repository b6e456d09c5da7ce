package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/peer"
)

// Caller routes actors' calls (actorhost.Caller) the way of a client's
// request (way.go). It needs no Host: the calling actor's Host passes
// itself with each call, so the node makes the Caller first, then the
// Host with it, then the Handler.
type Caller struct {
	maxBody      int64
	failoverWait time.Duration
	peers        *peer.Client
}

// NewCaller is the Caller of a node whose entry is configured by cfg: its
// Peers, MaxBody and FailoverWait (the rest is the Handler's).
func NewCaller(cfg Config) (*Caller, error) {
	if cfg.Peers == nil {
		return nil, errors.New("ingress caller config: peers are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Caller{maxBody: cfg.MaxBody, failoverWait: cfg.FailoverWait, peers: cfg.Peers}, nil
}

// Call routes an actor's call: the callee runs it as an event here when this node
// holds it or may take it, and the node that holds it runs it otherwise,
// reached like a forwarded HTTP request, sent again with its key within
// the failover wait while that node does not answer. A draining node
// sends it to the peer that takes its actors. A refusal by the node that
// holds the callee (it is stopping, say) comes back as its 503 response.
func (c *Caller) Call(ctx context.Context, here *actorhost.Host, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	if err := checkCall(to, req, c.maxBody); err != nil {
		return nil, fmt.Errorf("call %s/%s: %w: %w", to.Class, to.Name, actors.ErrBadCall, err)
	}
	if err := here.Routable(ctx, to); err != nil {
		// No node serves the class, or none that does is live now.
		return nil, fmt.Errorf("call %s/%s: %w", to.Class, to.Name, err)
	}
	// A key that must be kept only if the call takes effect (one made for
	// an event without a key) is used once the call is sent to another
	// node: run here, the call cannot be lost on its way, and is not sent
	// twice.
	key, keyed := actorhost.EventKeyOf(ctx)
	if keyed {
		ctx = actorhost.WithEventKey(ctx, actorhost.EventKey{}) // the way gives each try its key
	}
	hereCtx := ctx
	if keyed && key.Always {
		hereCtx = actorhost.WithEventKey(ctx, key)
	}
	var first ranHere
	first.resp, first.at, first.err = here.Dispatch(hereCtx, to, req)
	if first.ends(keyed && key.Always, true) {
		return callAnswer(to, first.resp, first.err)
	}
	var sentResp *actors.Response
	end := deliver(c.failoverWait, way{
		a: to, ctx: ctx, key: key, keyed: keyed, keyHere: key.Always, handOver: true,
		here: func(ctx context.Context) (*actors.Response, *actorhost.Elsewhere, error) {
			return here.Dispatch(ctx, to, req)
		},
		send: func(ctx context.Context, at actorhost.Elsewhere, key *actorhost.EventKey, last, retrying bool) (out peer.Sent, err error) {
			sentResp, out, err = c.peers.Call(ctx, to, at, req, key, last, retrying)
			return out, err
		},
	}, first)
	switch {
	case end.at == nil:
		return callAnswer(to, end.resp, end.err)
	case end.sent == peer.Answered:
		return callAnswer(to, sentResp, end.err)
	case end.sent == peer.Unknown && end.retried:
		return nil, fmt.Errorf("call %s/%s: %w: %w: tried again for %s: %w", to.Class, to.Name, actors.ErrCallFailed, actors.ErrOutcomeUnknown, c.failoverWait, end.err)
	case end.sent == peer.Unknown:
		return nil, fmt.Errorf("call %s/%s: %w: %w", to.Class, to.Name, actors.ErrOutcomeUnknown, end.err)
	}
	return nil, end.err
}

// callAnswer is a call's answer as the calling actor gets it.
func callAnswer(to ownership.Actor, resp *actors.Response, err error) (*actors.Response, error) {
	switch {
	case errors.Is(err, ownership.ErrInvalidActor):
		return nil, fmt.Errorf("call %s/%s: %w: %w", to.Class, to.Name, actors.ErrCallFailed, err)
	case err == nil && resp.Accept != nil:
		return nil, fmt.Errorf("call %s/%s: the callee accepted a WebSocket, which a call cannot carry", to.Class, to.Name)
	}
	return resp, err
}

// checkCall checks a call as the ingress checks a client's request, its
// body bounded by maxBody.
func checkCall(to ownership.Actor, req *actors.Request, maxBody int64) error {
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
	case int64(len(req.Body)) > maxBody:
		return fmt.Errorf("body of %d bytes, over %d", len(req.Body), maxBody)
	}
	return nil
}

// decodeChain reads the chain a peer sent with a call (peer.CallChainHeader).
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
