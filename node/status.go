package node

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/supervisors"
)

// statusPage is what GET /status shows: the node, its lease, its drain,
// what it holds, the classes it serves, its peers as its membership view
// sees them, and its tree.
type statusPage struct {
	Node       string             `json:"node"`
	Instance   string             `json:"instance"`
	Addr       string             `json:"address"`
	Phase      string             `json:"phase"`
	LeaseValid bool               `json:"lease_valid"`
	Draining   bool               `json:"draining"`
	DrainStuck bool               `json:"drain_stuck"`
	Held       int                `json:"held"`
	Parked     int                `json:"parked"`
	Pending    int                `json:"pending"`
	Unresolved int                `json:"unresolved"`
	Sockets    int                `json:"sockets"`
	Classes    []string           `json:"classes"`
	Deploys    []deployStatus     `json:"deploys"`
	Peers      []statusPeer       `json:"peers"`
	Tree       []supervisors.Line `json:"tree"`
	At         time.Time          `json:"at"`
}

type statusPeer struct {
	Node      string `json:"node"`
	Instance  string `json:"instance"`
	State     string `json:"state"`
	Live      bool   `json:"live"`
	Addr      string `json:"address"`
	Unchanged string `json:"lease_unchanged_for"`
	DeadIn    string `json:"taken_for_dead_in,omitempty"`
	// Held and Parked: as the peer published them in its lease.
	Held   uint64 `json:"held"`
	Parked uint64 `json:"parked"`
	// Classes: what the peer serves, as it published it when its instance
	// started; empty when it published none (a node of an earlier version).
	Classes []string `json:"classes"`
}

func (n *Node) statusPage(ctx context.Context) statusPage {
	st := n.keeper.Status()
	classes := n.directory.peerClassList(ctx)
	p := statusPage{Node: string(st.Node), Instance: string(st.Instance), Addr: n.addr, Phase: st.Phase, LeaseValid: st.LeaseValid,
		Draining: st.Draining, DrainStuck: st.DrainStuck, Held: st.Live, Parked: st.Parked, Pending: st.Pending,
		Unresolved: st.Unresolved, Sockets: n.sockets.Held(), Classes: n.classes, Peers: []statusPeer{}, Tree: n.Tree(), At: time.Now().UTC()}
	for _, q := range st.Peers {
		sp := statusPeer{Node: string(q.Node), Instance: string(q.Instance), State: string(q.State), Live: q.Live, Addr: q.Addr,
			Unchanged: q.Unchanged.Truncate(100 * time.Millisecond).String(), Held: q.Held, Parked: q.Parked, Classes: classes[q.Node]}
		if sp.Classes == nil {
			sp.Classes = []string{}
		}
		if q.State == "live" || q.State == "draining" {
			sp.DeadIn = q.DeadIn.Truncate(100 * time.Millisecond).String()
		}
		p.Peers = append(p.Peers, sp)
	}
	p.Deploys = []deployStatus{}
	if n.deploys != nil {
		p.Deploys = n.deploys.status()
	}
	return p
}

// statusHandler serves GET /status: a page for people (no external
// assets), or JSON when asked with Accept: application/json or
// ?format=json.
func (n *Node) statusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := n.statusPage(r.Context())
		if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(p)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = statusTemplate.Execute(w, p)
	})
}

var statusTemplate = template.Must(template.New("status").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>wasmkeep {{.Node}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{padding:.25em .8em;border-bottom:1px solid #ddd;text-align:left}
th{font-weight:600}.bad{color:#b00}.ok{color:#070}code{font-size:13px}
</style></head><body>
<h1>Node {{.Node}}</h1>
<p>instance <code>{{.Instance}}</code> at <code>{{.Addr}}</code>, {{.Phase}};
lease {{if .LeaseValid}}<span class="ok">valid</span>{{else}}<span class="bad">not valid</span>{{end}}
{{- if .Draining}}; <span class="bad">draining{{if .DrainStuck}} (stuck: no live peer, serving meanwhile){{end}}</span>{{end}}.</p>
<table><tr><th>held</th><th>parked</th><th>pending releases</th><th>unresolved</th><th>WebSockets</th></tr>
<tr><td>{{.Held}}</td><td>{{.Parked}}</td><td>{{.Pending}}</td><td>{{.Unresolved}}</td><td>{{.Sockets}}</td></tr></table>
<p>classes served: {{range $i, $c := .Classes}}{{if $i}}, {{end}}<code>{{$c}}</code>{{end}}</p>
{{if .Deploys}}<h2>Deployed classes</h2>
<table><tr><th>class</th><th>version served</th><th>failed</th></tr>
{{range .Deploys}}<tr><td><code>{{.Class}}</code></td><td><code>{{.Version}}</code></td><td>{{if .Failed}}<span class="bad">{{.Failed}}</span>{{end}}</td></tr>
{{end}}</table>{{end}}
<h2>Peers</h2>
{{if .Peers}}<table id="peers"><tr><th>node</th><th>instance</th><th>lease</th><th>live</th><th>address</th><th>lease unchanged for</th><th>taken for dead in</th><th>held*</th><th>parked*</th><th>classes</th></tr>
{{range .Peers}}<tr><td>{{.Node}}</td><td><code>{{.Instance}}</code></td><td>{{.State}}</td><td>{{if .Live}}<span class="ok">yes</span>{{else}}<span class="bad">no</span>{{end}}</td><td><code>{{.Addr}}</code></td><td>{{.Unchanged}}</td><td>{{.DeadIn}}</td><td>{{.Held}}</td><td>{{.Parked}}</td><td>{{range $i, $c := .Classes}}{{if $i}}, {{end}}<code>{{$c}}</code>{{end}}</td></tr>
{{end}}</table><p><small>* as the peer published them at its last lease write; a draining peer's fall to 0.</small></p>{{else}}<p>none seen</p>{{end}}
<h2>Supervision tree</h2>
<table id="tree"><tr><th>role</th><th>name</th><th>state</th><th>restarts</th><th>mailbox</th><th>progress</th></tr>
{{range .Tree}}<tr><td>{{.Role}}</td><td>{{.Name}}</td><td>{{.State}}</td><td>{{.Restarts}}</td><td>{{.Mailbox}}</td><td>{{.Progress}}</td></tr>
{{end}}</table>
<p><small>{{.At.Format "2006-01-02 15:04:05 UTC"}} · <a href="/status?format=json">JSON</a> · <a href="/metrics">metrics</a> · <a href="/debug/tree">tree as text</a></small></p>
</body></html>
`))

// AdminHandler serves the node's admin pages: /status, /debug/tree and
// /metrics, for an admin listener apart from the public one (serve's
// --admin-listen).
func (n *Node) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /status", n.statusHandler())
	mux.Handle("GET /debug/tree", debugHandler(n.Tree))
	mux.Handle("GET /metrics", n.metrics)
	return mux
}
