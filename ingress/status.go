package ingress

import (
	"log/slog"
	"net/http"

	"github.com/wasmkeep/wasmkeep/peer"
)

// signedOnly serves next to requests signed with the cluster key for this
// node, and answers any other as if nothing were there: the status page
// stays off the public listener for all but the cluster's operators, who
// hold the key.
func (h *Handler) signedOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !peer.IsRequest(r) {
			http.NotFound(w, r)
			return
		}
		if err := h.verifier.Check(r, nil); err != nil {
			h.log.Warn("status request refused", slog.String("from", r.RemoteAddr), slog.Any("err", err))
			text(w, http.StatusUnauthorized, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}
