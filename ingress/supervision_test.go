package ingress_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestSupervisionMetrics: after an event of a class, /metrics shows the
// supervision metrics of that class.
func TestSupervisionMetrics(t *testing.T) {
	n := startTestNode(t, t.TempDir(), "n1", "first")
	n.mustGet(t, "/actor/counter/a", "1")
	status, body := n.get(t, "/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	for _, name := range []string{
		"wasmkeep_actor_restarts_total",
		"wasmkeep_actor_failures_total",
		"wasmkeep_actor_mailbox_depth",
		"wasmkeep_actor_event_seconds_bucket",
	} {
		if !strings.Contains(body, name+`{class="counter"`) {
			t.Errorf("/metrics has no %s for class counter", name)
		}
	}
}
