package node

import (
	"encoding/json"
	"net/http"

	"github.com/wasmkeep/wasmkeep/supervisors"
)

// debugHandler serves GET /debug/tree: the node's tree, one actor a line
// (role, name, state, restarts, mailbox depth, progress), as text, or as
// JSON with ?format=json.
func debugHandler(lines func() []supervisors.Line) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/tree", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") == "json" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(lines())
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(supervisors.Text(lines())))
	})
	return mux
}
