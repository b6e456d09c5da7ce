package ingress

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/peer"
)

// serveTake takes a for this node (a move's take call, peer.TakeHeader): it acquires the actor and makes it
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
		slog.String("from", r.Header.Get(peer.ForwardedHeader)))
	w.WriteHeader(http.StatusNoContent)
}
