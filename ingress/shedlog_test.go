package ingress

import (
	"log/slog"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/testlog"
)

// TestShedLog: shedding connections is said in the log at once, then at
// most every shedLogEvery with what was shed since, never a line each.
func TestShedLog(t *testing.T) {
	logs := &testlog.Log{}
	s := shedLog{log: slog.New(logs), max: 100}
	t0 := time.Unix(1_700_000_000, 0)
	s.shed("evicted", t0)
	for i := range 500 {
		s.shed("evicted", t0.Add(time.Duration(i)*time.Millisecond))
	}
	s.shed("refused", t0.Add(time.Second))
	if n := logs.Count("shedding HTTP connections"); n != 1 {
		t.Fatalf("%d lines within the first interval, want 1:\n%s", n, logs)
	}
	if !logs.Has("WARN", "began shedding HTTP connections", "max_conns=100", "evicted=1") {
		t.Errorf("the first line:\n%s", logs)
	}
	s.shed("evicted", t0.Add(shedLogEvery+time.Second))
	if !logs.Has("WARN", "shedding HTTP connections to stay", "evicted=501", "refused=1") {
		t.Errorf("the second line does not count what was shed since the first:\n%s", logs)
	}
}
