package supervisors

import (
	"fmt"
	"sort"

	"github.com/wasmkeep/wasmkeep/internal/metricreg"

	"errors"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the supervision metrics of one registry, labelled by class.
type Metrics struct {
	restarts *prometheus.CounterVec
	failures *prometheus.CounterVec
	events   *prometheus.CounterVec // events failed by their handler
	depth    *prometheus.GaugeVec
	event    *prometheus.HistogramVec
}

// NewMetrics registers the supervision metrics on reg. If reg already has
// them (a second NewMetrics on the same registry), the registered
// collectors are shared rather than registered again: both values then
// count into the same series.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("supervisor metrics: no registerer")
	}
	m := &Metrics{}
	var err error
	if m.restarts, err = metricreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_actor_restarts_total",
		Help: "Resident actors restarted by their supervisor after a failure.",
	}, []string{"class"})); err != nil {
		return nil, fmt.Errorf("supervisor metrics: %w", err)
	}
	if m.failures, err = metricreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_actor_failures_total",
		Help: "Panics that escaped a resident actor's Receive and reached its supervisor.",
	}, []string{"class"})); err != nil {
		return nil, fmt.Errorf("supervisor metrics: %w", err)
	}
	if m.events, err = metricreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_actor_event_failures_total",
		Help: "Events whose handler failed (returned an error, panicked, or, in a wasm guest, trapped or ran out of time or memory): answered 500 (413 past a storage limit), their writes discarded.",
	}, []string{"class"})); err != nil {
		return nil, fmt.Errorf("supervisor metrics: %w", err)
	}
	if m.depth, err = metricreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wasmkeep_actor_mailbox_depth",
		Help: "Messages queued in the mailboxes of a class's resident actors.",
	}, []string{"class"})); err != nil {
		return nil, fmt.Errorf("supervisor metrics: %w", err)
	}
	if m.event, err = metricreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wasmkeep_actor_event_seconds",
		Help:    "Time a resident actor spent in Receive per message.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100 µs to 26 s
	}, []string{"class"})); err != nil {
		return nil, fmt.Errorf("supervisor metrics: %w", err)
	}
	return m, nil
}

// classMetrics are the series of one class.
type classMetrics struct {
	restarts prometheus.Counter
	failures prometheus.Counter
	events   prometheus.Counter
	depth    prometheus.Gauge
	event    prometheus.Observer
}

// class returns the series of class, creating them (at zero) so that they
// show before the first failure.
func (m *Metrics) class(class string) classMetrics {
	return classMetrics{
		restarts: m.restarts.WithLabelValues(class),
		failures: m.failures.WithLabelValues(class),
		events:   m.events.WithLabelValues(class),
		depth:    m.depth.WithLabelValues(class),
		event:    m.event.WithLabelValues(class),
	}
}

// ResidentLines turns the director's counts of resident actors by class
// into lines that follow the tree's (Tree.Lines), one a class, with each
// class's restarts and mailbox depth from the metrics.
func (m *Metrics) ResidentLines(counts map[string]int) []Line {
	classes := make([]string, 0, len(counts))
	for c := range counts {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	out := make([]Line, 0, len(classes))
	for _, c := range classes {
		cm := m.class(c)
		out = append(out, Line{Role: "resident", Name: c, State: fmt.Sprintf("%d resident", counts[c]),
			Restarts: int(value(cm.restarts)), Mailbox: int64(value(cm.depth))})
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
