package wasmhost

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/internal/metricreg"
)

// metrics are the runtime's Prometheus series.
type metrics struct {
	// failures: guest failures (a trap, an exit, a limit, an ABI
	// violation), each of which discarded a guest, by class and
	// isolation.
	failures *prometheus.CounterVec
	// dropped: the in-memory objects of resident actors lost with a shared
	// guest that was discarded, by class.
	dropped *prometheus.CounterVec
	// shared: shared guests started, by class.
	shared *prometheus.GaugeVec
}

// newMetrics registers the metrics on r (nil: kept, not exported). A
// second runtime on the same registry shares the registered series.
func newMetrics(r prometheus.Registerer) (*metrics, error) {
	failures, err1 := metricreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_wasm_guest_failures_total",
		Help: "Events (and starts, and leave notices) that a wasm guest failed: a trap, an exit, an unrecovered panic, a limit or an ABI violation; each discarded the guest, shared by many actors in isolation class. By class and isolation (actor or class).",
	}, []string{"class", "isolation"}))
	dropped, err2 := metricreg.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_wasm_shared_actors_dropped_total",
		Help: "Resident actors whose in-memory objects were dropped with the shared guest they were placed on, discarded after a guest failure; their next events rebuild them from storage on a fresh guest. By class.",
	}, []string{"class"}))
	shared, err3 := metricreg.Register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wasmkeep_wasm_shared_guests",
		Help: "Shared guests started, serving the resident actors of a class in isolation class. By class.",
	}, []string{"class"}))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("wasmhost metrics: %w", err)
	}
	return &metrics{failures: failures, dropped: dropped, shared: shared}, nil
}

// moduleStats are a Module's counts, as Stats reports them.
type moduleStats struct {
	failures atomic.Uint64
	dropped  atomic.Uint64
}

// Stats are what a Module counts since it was compiled.
type Stats struct {
	// Isolation is the class's, as declared or overridden.
	Isolation Isolation
	// Declared is what the module declares.
	Declared Isolation
	// Minor is the minor version of the guest ABI the module speaks (its
	// export wasmkeep_abi_minor, 0 without it).
	Minor int
	// Failures counts guest failures, each of which discarded a guest.
	Failures uint64
	// Dropped counts the resident actors whose in-memory objects were
	// dropped with their shared guest.
	Dropped uint64
	// Shared is how many shared guests are started now, and Placed how many
	// resident actors are placed on them (isolation class).
	Shared, Placed int
}

// Stats returns the module's counts.
func (m *Module) Stats() Stats {
	st := Stats{Isolation: m.isolation, Declared: m.declared, Minor: int(m.minor), Failures: m.stats.failures.Load(), Dropped: m.stats.dropped.Load()}
	st.Shared, st.Placed = m.shared.counts()
	return st
}

// failed counts a guest failure (which discarded the guest), and the
// resident actors whose objects it dropped with it (shared ones).
func (m *Module) failed(dropped int) {
	m.stats.failures.Add(1)
	m.r.metrics.failures.WithLabelValues(m.class, m.isolation.String()).Inc()
	if dropped > 0 {
		m.stats.dropped.Add(uint64(dropped))
		m.r.metrics.dropped.WithLabelValues(m.class).Add(float64(dropped))
	}
}
