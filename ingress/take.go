package ingress

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// TakeHeader marks a move's take call: a peer that released an actor for
// this node asks it to take the actor (docs/PROTOCOL.md §5). It is a POST to
// the actor's path from a peer (signed with the cluster key when the nodes
// have one); the class runs no event for it.
const TakeHeader = "Wasmkeep-Take"

// serveTake takes a for this node: it acquires the actor and makes it
// resident here without an event, so that the events that follow the move
// find it here. 204 when taken; 409 when another live node holds it; 503
// when it cannot be taken now.
func (h *Handler) serveTake(w http.ResponseWriter, r *http.Request, a ownership.Actor) {
	// The route this node may keep to the actor's holder, the sender, is
	// over: the take reads the record it released.
	h.cfg.Keeper.RouteFailed(a, "")
	at, err := h.cfg.Host.Take(r.Context(), a)
	if at != nil {
		text(w, http.StatusConflict, fmt.Sprintf("held by node %s", at.Node))
		return
	}
	if err != nil {
		h.answer(w, r, a, nil, err)
		return
	}
	h.log.Info("took an actor moved here", slog.String("class", a.Class), slog.String("name", a.Name),
		slog.String("from", r.Header.Get(ForwardedHeader)))
	w.WriteHeader(http.StatusNoContent)
}

// Take sends the node t names the take call for its actor (see
// TakeHeader), signed for the target's instance: nil once the target holds
// the actor.
func (h *Handler) Take(ctx context.Context, t ownership.Take) error {
	target, addr, a := t.Target, t.Addr, t.Actor
	if addr == "" {
		return fmt.Errorf("take %s/%s: the address of node %s is not known here", a.Class, a.Name, target)
	}
	u := url.URL{Scheme: "http", Host: addr, Path: actorPath(a), RawPath: actorEscapedPath(a)}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), http.NoBody)
	if err != nil {
		return fmt.Errorf("take %s/%s: %w", a.Class, a.Name, err)
	}
	out.Header.Set(ForwardedHeader, string(h.cfg.Node))
	out.Header.Set(ForwardedToHeader, string(target))
	setInstance(out.Header, t.Instance)
	out.Header.Set(TakeHeader, "1")
	if len(h.cfg.ClusterKey) > 0 {
		signRequest(out, nil, h.cfg.ClusterKey, time.Now())
	}
	res, err := h.cfg.Transport.RoundTrip(out)
	if err != nil {
		h.peerLog.failed(target, addr, "take", err)
		return fmt.Errorf("take %s/%s: node %s at %s: %w", a.Class, a.Name, target, addr, err)
	}
	h.peerLog.answered(target)
	defer res.Body.Close()
	if res.StatusCode == http.StatusNoContent {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	return fmt.Errorf("take %s/%s: node %s answered %s: %s", a.Class, a.Name, target, res.Status, strings.TrimSpace(string(msg)))
}
