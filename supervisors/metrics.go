package supervisors

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the supervision metrics of one registry, labelled by class.
type Metrics struct {
	restarts *prometheus.CounterVec
	failures *prometheus.CounterVec
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
	if m.restarts, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_actor_restarts_total",
		Help: "Resident instances restarted by their supervisor after a failure.",
	}, []string{"class"})); err != nil {
		return nil, err
	}
	if m.failures, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_actor_failures_total",
		Help: "Panics that escaped a resident instance's Receive and reached its supervisor.",
	}, []string{"class"})); err != nil {
		return nil, err
	}
	if m.depth, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wasmkeep_actor_mailbox_depth",
		Help: "Messages queued in the mailboxes of a class's resident instances.",
	}, []string{"class"})); err != nil {
		return nil, err
	}
	if m.event, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wasmkeep_actor_event_seconds",
		Help:    "Time a resident instance spent in Receive per message.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100 µs to 26 s
	}, []string{"class"})); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg, or returns the collector reg already has
// under the same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		var zero C
		return zero, fmt.Errorf("supervisor metrics: %w", err)
	}
	return c, nil
}

// classMetrics are the series of one class.
type classMetrics struct {
	restarts prometheus.Counter
	failures prometheus.Counter
	depth    prometheus.Gauge
	event    prometheus.Observer
}

// class returns the series of class, creating them (at zero) so that they
// show before the first failure.
func (m *Metrics) class(class string) classMetrics {
	return classMetrics{
		restarts: m.restarts.WithLabelValues(class),
		failures: m.failures.WithLabelValues(class),
		depth:    m.depth.WithLabelValues(class),
		event:    m.event.WithLabelValues(class),
	}
}
