package egress

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the client's: requests by status class, bytes each way,
// latency, and refusals by reason.
type metrics struct {
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	seconds  prometheus.Histogram
	refusals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmkeep_fetch_requests_total",
			Help: "Outbound HTTP requests of actors that were sent, by the answer's status class (2xx..5xx), or failed when none came."}, []string{"status"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmkeep_fetch_bytes_total",
			Help: "Bytes of the bodies of actors' outbound HTTP requests (sent) and of their answers (received)."}, []string{"direction"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wasmkeep_fetch_seconds",
			Help: "Time from an actor's outbound HTTP request to its whole answer (or its failure).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmkeep_fetch_refusals_total",
			Help: "Outbound HTTP requests of actors refused before or while sent: by the egress allow-list, a body limit, or as malformed."}, []string{"reason"}),
	}
	for _, r := range []string{"allow-list", "limit", "invalid"} {
		m.refusals.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.bytes, m.seconds, m.refusals} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) refused(reason string) { m.refusals.WithLabelValues(reason).Inc() }
func (m *metrics) failed()               { m.requests.WithLabelValues("failed").Inc() }
func (m *metrics) sent(n int)            { m.bytes.WithLabelValues("sent").Add(float64(n)) }
func (m *metrics) received(n int)        { m.bytes.WithLabelValues("received").Add(float64(n)) }
func (m *metrics) latency(d time.Duration) {
	m.seconds.Observe(d.Seconds())
}

func (m *metrics) done(status int, d time.Duration) {
	m.requests.WithLabelValues(strconv.Itoa(status/100) + "xx").Inc()
	m.latency(d)
}
