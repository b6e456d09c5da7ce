package keeper

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/internal/metricreg"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// The Core names its metrics and gives each Count one label string; this
// file says what those strings mean. A counter's label is one of:
//
//   - nothing (schemaNone);
//   - a reason (why a hold ended, why sockets closed), an outcome (how a
//     write or a resolution ended) or what an object is (a damaged one), as
//     one Prometheus label;
//   - "reason:outcome" for releases, split into two labels so that either
//     can be summed over.
//
// Invariant: every metric name the ownership package emits is in these
// tables (TestMetricTablesCoverCore reads the package's source to check).
// A name that is not is logged once and not exported.

type labelSchema uint8

const (
	schemaNone labelSchema = iota
	schemaReason
	schemaOutcome
	schemaReasonOutcome
	schemaWhat
)

func (s labelSchema) names() []string {
	switch s {
	case schemaReason:
		return []string{"reason"}
	case schemaOutcome:
		return []string{"outcome"}
	case schemaReasonOutcome:
		return []string{"reason", "outcome"}
	case schemaWhat:
		return []string{"what"}
	}
	return nil
}

// metricParks is counted by the Core under a literal name, not a constant.
const metricParks = "wasmkeep_parks_total"

var counterTable = []struct {
	name   string
	schema labelSchema
	help   string
}{
	{ownership.MetricAcquisitions, schemaOutcome,
		"Acquisitions of ownership records that landed: outcome created (generation 1) or taken (a later generation)."},
	{ownership.MetricReleases, schemaReasonOutcome,
		"Releases of ownership records that ended, by why the hold ended (idle, drain, stop, move, lapse, last_socket, resolver, ...) and how the release ended (landed, or refused because the record had moved on)."},
	{ownership.MetricParkedReleases, schemaReason,
		"Releases of parked records that landed, by why the record was released."},
	{ownership.MetricParkedWakes, schemaNone,
		"Parked records woken by a new acquisition on this node."},
	{metricParks, schemaNone,
		"Live holds parked because the actor went idle with sockets open."},
	{ownership.MetricPendingRetries, schemaNone,
		"Retries of pending releases after a write with no answer."},
	{ownership.MetricResolver, schemaOutcome,
		"Decisions of the resolver of acquisitions with an unknown outcome."},
	{ownership.MetricLeaseLapses, schemaNone,
		"Times this node's lease lapsed (no acknowledged renewal for ttl minus safety)."},
	{ownership.MetricFences, schemaOutcome,
		"Fences of dead peers this node attempted, by outcome (landed, refused, unknown)."},
	{ownership.MetricUnreadable, schemaNone,
		"Bucket records this node could not decode and passed over."},
	{ownership.MetricDamaged, schemaWhat,
		"Reads that found an object in the bucket damaged (it failed the store's checksum or could not be decoded), by what it is: " +
			"lease, record, state, move or other; what=bucket counts a store found damaged as a whole, which ends the node."},
	{ownership.MetricSweepUnreadable, schemaNone,
		"Ownership records the sweep could not decode."},
	{ownership.MetricOwnerCloses, schemaReason,
		"Closes of an actor's sockets because another node holds it, by what found out (sweep, move)."},
	{ownership.MetricRoutes, schemaNone,
		"Events routed to the node that holds their actor."},
}

var gaugeTable = []struct{ name, help string }{
	{ownership.MetricLiveHolds, "Live holds on this node."},
	{ownership.MetricParkedRecords, "Parked records on this node (held for sockets, no instance in memory)."},
	{ownership.MetricPendingReleases, "Releases waiting to be written or retried."},
}

var histogramTable = []struct {
	name    string
	help    string
	buckets []float64
}{
	{ownership.MetricLeaseRenewSeconds, "Time from sending a lease write to its acknowledgement.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
}

const (
	metricBucketRequests = "wasmkeep_ownership_bucket_requests_total"
	metricBucketSeconds  = "wasmkeep_ownership_bucket_request_seconds"
)

type counter struct {
	schema labelSchema
	vec    *prometheus.CounterVec
}

// metrics exports a keeper's metrics. count, set and observe are called on
// the actor's goroutine only (warned is not locked); request is called from
// the bucket goroutines, and touches only collectors, which are safe.
type metrics struct {
	counters   map[string]counter
	gauges     map[string]prometheus.Gauge
	histograms map[string]prometheus.Observer
	requests   *prometheus.CounterVec
	seconds    *prometheus.HistogramVec
	log        *slog.Logger
	warned     map[string]bool
}

// newMetrics makes the collectors and registers them on r (none when r is
// nil). A collector already registered by an earlier keeper of this process
// is reused, so that a node that starts a keeper again keeps counting.
func newMetrics(r prometheus.Registerer, log *slog.Logger) (*metrics, error) {
	m := &metrics{
		counters:   map[string]counter{},
		gauges:     map[string]prometheus.Gauge{},
		histograms: map[string]prometheus.Observer{},
		log:        log,
		warned:     map[string]bool{},
	}
	var errs []error
	for _, c := range counterTable {
		vec, err := metricreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: c.name, Help: c.help}, c.schema.names()))
		errs = append(errs, err)
		if c.schema == schemaNone {
			vec.WithLabelValues() // exported as 0 from the start, not from the first count
		}
		m.counters[c.name] = counter{schema: c.schema, vec: vec}
	}
	for _, g := range gaugeTable {
		gauge, err := metricreg.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: g.name, Help: g.help}))
		errs = append(errs, err)
		m.gauges[g.name] = gauge
	}
	for _, h := range histogramTable {
		hist, err := metricreg.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Name: h.name, Help: h.help, Buckets: h.buckets}))
		errs = append(errs, err)
		m.histograms[h.name] = hist
	}
	var err error
	m.requests, err = metricreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricBucketRequests,
		Help: "Bucket calls of the ownership keeper, by operation and outcome (landed, not_found, refused, unknown, failed).",
	}, []string{"op", "outcome"}))
	errs = append(errs, err)
	m.seconds, err = metricreg.Register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricBucketSeconds,
		Help:    "Duration of the ownership keeper's bucket calls, by operation.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"op"}))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ownership keeper: metrics: %w", err)
	}
	return m, nil
}

func (m *metrics) warnOnce(kind, name, label string) {
	if m.warned[kind+" "+name] {
		return
	}
	m.warned[kind+" "+name] = true
	m.log.Warn("ownership core emitted a metric the keeper does not export",
		slog.String("kind", kind), slog.String("metric", name), slog.String("label", label))
}

func (m *metrics) count(e ownership.Count) {
	c, ok := m.counters[e.Name]
	if !ok {
		m.warnOnce("counter", e.Name, e.Label)
		return
	}
	switch c.schema {
	case schemaNone:
		if e.Label != "" {
			m.warnOnce("counter label", e.Name, e.Label)
		}
		c.vec.WithLabelValues().Add(e.Add)
	case schemaReason, schemaOutcome, schemaWhat:
		c.vec.WithLabelValues(e.Label).Add(e.Add)
	case schemaReasonOutcome:
		reason, outcome, _ := strings.Cut(e.Label, ":")
		c.vec.WithLabelValues(reason, outcome).Add(e.Add)
	}
}

func (m *metrics) set(e ownership.SetGauge) {
	g, ok := m.gauges[e.Name]
	if !ok {
		m.warnOnce("gauge", e.Name, "")
		return
	}
	g.Set(e.Value)
}

func (m *metrics) observe(e ownership.Observe) {
	h, ok := m.histograms[e.Name]
	if !ok {
		m.warnOnce("histogram", e.Name, "")
		return
	}
	h.Observe(e.Value)
}

// request records one bucket call; safe from any goroutine.
func (m *metrics) request(op ownership.Op, outcome ownership.Outcome, seconds float64) {
	m.requests.WithLabelValues(op.String(), outcome.String()).Inc()
	m.seconds.WithLabelValues(op.String()).Observe(seconds)
}
