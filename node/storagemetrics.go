package node

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
)

// registerStorage registers the metrics of the resident actors' storage,
// read from the host at each scrape: what a wake and an event read from
// the bucket (the head, then the runs' indexes and blocks), and the block
// cache the node's actors share.
func registerStorage(reg prometheus.Registerer, h *actorhost.Host) error {
	for _, m := range []struct {
		name, help string
		gauge      bool
		f          func(actorhost.StorageStats) int64
	}{
		{"wasmkeep_storage_head_reads_total", "Reads of actors' state objects (their heads) from the bucket: one per load without a seal's copy.", false,
			func(s actorhost.StorageStats) int64 { return s.HeadReads }},
		{"wasmkeep_storage_manifest_reads_total", "Reads of the manifests of actors' runs of more than one part: one per such run at each load.", false,
			func(s actorhost.StorageStats) int64 { return s.ManifestReads }},
		{"wasmkeep_storage_run_reads_total", "Ranged reads of actors' run objects from the bucket: an index with its filter, or a block.", false,
			func(s actorhost.StorageStats) int64 { return s.RunReads }},
		{"wasmkeep_storage_run_read_bytes_total", "Bytes of the ranged reads of actors' run objects.", false,
			func(s actorhost.StorageStats) int64 { return s.RunBytes }},
		{"wasmkeep_storage_head_writes_total", "Writes of actors' state objects (their heads): commits and fences.", false,
			func(s actorhost.StorageStats) int64 { return s.HeadWrites }},
		{"wasmkeep_storage_head_written_bytes_total", "Bytes of the writes of actors' state objects.", false,
			func(s actorhost.StorageStats) int64 { return s.HeadBytes }},
		{"wasmkeep_storage_run_writes_total", "Writes of actors' run objects: flushes of commits, merges' parts and manifests.", false,
			func(s actorhost.StorageStats) int64 { return s.RunWrites }},
		{"wasmkeep_storage_run_written_bytes_total", "Bytes of the writes of actors' run objects.", false,
			func(s actorhost.StorageStats) int64 { return s.RunWriteBytes }},
		{"wasmkeep_storage_commit_stalls_total", "Times an actor's commit waited for the merge of its runs, its runs having outrun the merges (past actorhost.MaxRuns): its clients were slowed down.", false,
			func(s actorhost.StorageStats) int64 { return s.Stalls }},
		{"wasmkeep_storage_cache_hits_total", "Reads of runs' blocks and indexes answered by the node's block cache.", false,
			func(s actorhost.StorageStats) int64 { return s.Cache.Hits }},
		{"wasmkeep_storage_cache_misses_total", "Reads of runs' blocks and indexes the node's block cache did not hold.", false,
			func(s actorhost.StorageStats) int64 { return s.Cache.Misses }},
		{"wasmkeep_storage_cache_evictions_total", "Blocks and indexes dropped from the node's block cache to make room.", false,
			func(s actorhost.StorageStats) int64 { return s.Cache.Evictions }},
		{"wasmkeep_storage_cache_bytes", "Bytes the node's block cache holds (at most --block-cache).", true,
			func(s actorhost.StorageStats) int64 { return s.Cache.Bytes }},
	} {
		f := m.f
		read := func() float64 { return float64(f(h.StorageStats())) }
		var c prometheus.Collector
		if m.gauge {
			c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.name, Help: m.help}, read)
		} else {
			c = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help}, read)
		}
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("storage metrics: %w", err)
		}
	}
	return nil
}
