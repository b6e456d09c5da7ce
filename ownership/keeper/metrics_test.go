package keeper

import (
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// TestMetricTablesCoverCore reads the ownership package's source and checks
// that every metric name in it is one the keeper exports, so that a metric
// added to the Core is not silently dropped.
func TestMetricTablesCoverCore(t *testing.T) {
	known := map[string]bool{}
	for _, c := range counterTable {
		known[c.name] = true
	}
	for _, g := range gaugeTable {
		known[g.name] = true
	}
	for _, h := range histogramTable {
		known[h.name] = true
	}
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.HasPrefix(s, "wasmkeep_") {
				return true
			}
			seen++
			if !known[s] {
				t.Errorf("%s: metric %q is not exported by the keeper", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
	if seen < len(known) {
		t.Errorf("found %d metric names in the ownership package, fewer than the keeper's %d", seen, len(known))
	}
}

// TestCountLabels checks how the Core's label strings become labels.
func TestCountLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	m.count(ownership.Count{Name: ownership.MetricReleases, Label: "drain:refused", Add: 1})
	m.count(ownership.Count{Name: ownership.MetricFences, Label: "landed", Add: 2})
	m.count(ownership.Count{Name: ownership.MetricOwnerCloses, Label: "sweep", Add: 1})
	m.count(ownership.Count{Name: ownership.MetricRoutes, Add: 3})
	m.count(ownership.Count{Name: "wasmkeep_not_a_metric_total", Add: 1}) // logged, dropped
	m.set(ownership.SetGauge{Name: ownership.MetricPendingReleases, Value: 4})
	m.observe(ownership.Observe{Name: ownership.MetricLeaseRenewSeconds, Value: 0.01})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := metric.GetCounter().GetValue() + metric.GetGauge().GetValue() + float64(metric.GetHistogram().GetSampleCount())
			if v != 0 {
				got = append(got, mf.GetName()+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
	}
	want := []string{
		"wasmkeep_fences_total{outcome=landed} 2",
		"wasmkeep_lease_renew_seconds{} 1",
		"wasmkeep_pending_releases{} 4",
		"wasmkeep_releases_total{outcome=refused,reason=drain} 1",
		"wasmkeep_routes_total{} 3",
		"wasmkeep_websocket_owner_closes_total{reason=sweep} 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("metrics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A second keeper in the process reuses the collectors.
	if _, err := newMetrics(reg, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("registering again: %v", err)
	}
}
