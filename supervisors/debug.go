package supervisors

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// debugHandler serves GET /debug/tree: the node's tree, one actor a line
// (role, name, state, restarts, mailbox depth, progress), as text, or as
// JSON with ?format=json.
func debugHandler(t *Tree) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/tree", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") == "json" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(t.Lines())
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(t.Text()))
	})
	return mux
}

// residents turns the director's counts by class into the tree's lines,
// with each class's restarts and mailbox depth from the metrics.
func (m *Metrics) residents(counts map[string]int) []ResidentCount {
	classes := make([]string, 0, len(counts))
	for c := range counts {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	out := make([]ResidentCount, 0, len(classes))
	for _, c := range classes {
		cm := m.class(c)
		out = append(out, ResidentCount{Class: c, Resident: counts[c],
			Restarts: int(value(cm.restarts)), Mailbox: int(value(cm.depth))})
	}
	return out
}

// value reads a counter's or gauge's value.
func value(c prometheus.Metric) float64 {
	var d dto.Metric
	if c.Write(&d) != nil {
		return 0
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
