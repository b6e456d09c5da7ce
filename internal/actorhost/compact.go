package actorhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/internal/kvrun"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Compaction merges runs into one, in the background, so that an actor
// has a few runs, however many commits flushed (RATIONALE: "Why an
// actor's storage is a small head over immutable runs"). The newest runs
// are merged with the next older one while it is at most mergeRatio
// times the size of all of them together: so each run is more than
// mergeRatio times the size of every newer run together, sizes grow
// geometrically from the newest to the oldest, and an actor of size S
// holds about log(S / flushAt) / log(1 + mergeRatio) runs, each byte
// rewritten about once per run it passes through. A merge that reaches
// the oldest run drops the deletes, as nothing older is left for them to
// hide. Runs are immutable, so a merge reads them while events go on; its
// result replaces them in the working state if they are still there when
// it is done (a DeleteAll may have dropped them), and the next commit's
// head lists it. Before each merge, a sweep deletes the run objects of
// earlier generations that the state does not list (ownership.RunGarbage):
// what a superseded hold wrote, and what a hold that ended between a
// run's write and its head's left behind.
const mergeRatio = 2

// pickCompaction chooses the runs [0, n) (newest first) to merge, if
// any: the newest one and every older one that is at most mergeRatio
// times the size of those before it.
func pickCompaction(runs []*run) (n int, ok bool) {
	if len(runs) < 2 {
		return 0, false
	}
	newer, k := runs[0].size(), 0
	for m := 1; m < len(runs) && runs[m].size() <= mergeRatio*newer; m++ {
		k, newer = m, newer+runs[m].size()
	}
	return k + 1, k > 0
}

// compactedMsg brings a merge's result back to its resident actor.
type compactedMsg struct {
	gen   ownership.Generation
	group []*run // the merged runs, as they were in the state
	out   *run   // their merge (no parts: nothing was left)
	err   error
}

// maybeCompact starts a merge if the state's runs call for one and none
// is running.
func (ra *residentActor) maybeCompact(ctx actor.Context) {
	// Not while the actor settles its events to stop or reload: the merge
	// would be cancelled as soon as it started.
	if ra.compacting != nil || !ra.loaded || ra.settling || ra.stopping {
		return
	}
	n, ok := pickCompaction(ra.state.runs)
	if !ok {
		return
	}
	s := ra.state
	group, bottom := slices.Clone(s.runs[:n]), n == len(s.runs)
	listed := map[runName]bool{}
	for _, r := range s.runs {
		for _, p := range r.parts {
			listed[p.name()] = true
		}
		if r.man != nil {
			listed[*r.man] = true
		}
	}
	for _, g := range s.garbage {
		listed[g] = true
	}
	// The actor stays resident until the merge is back (see mergingMsg).
	ctx.Send(ctx.Parent(), &mergingMsg{actor: ra.actor, pid: ctx.Self(), on: true})
	bucket, a, gen, timeout := ra.h.cfg.Bucket, ra.actor, ra.gen, ra.h.cfg.IOTimeout
	runs, log := ra.h.runs(), ra.log()
	slots := ra.h.merges
	ra.compacting = goBackground(ctx, ra.h.cfg.System.Root, func(cctx context.Context) *compactedMsg {
		// A node runs few merges at once, whatever its actors: a merge
		// reads and writes megabytes, and the bucket must keep room for
		// the commits of events and the node's lease.
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-cctx.Done():
			return &compactedMsg{gen: gen, group: group, out: &run{}, err: cctx.Err()}
		}
		if err := sweepRuns(cctx, bucket, a, gen, listed, timeout); err != nil {
			log.Info("actor run sweep did not finish", slog.Any("err", err))
		}
		out, err := mergeRuns(cctx, runs, a, gen, group, bottom)
		if err != nil && len(out.parts) > 0 {
			// No head lists what a failed merge wrote: it goes now, not
			// at a later hold's sweep. A part whose write failed (p.r
			// unset) is deleted too, as it may have landed, but it stays
			// garbage all the same, since it may land yet, after the
			// delete; so does what is not deleted.
			var all []runName
			for _, p := range out.parts {
				all = append(all, p.name())
			}
			dctx, dcancel := context.WithTimeout(context.Background(), timeout)
			deleted := deleteRuns(dctx, bucket, a, all)
			dcancel()
			out.parts = slices.DeleteFunc(out.parts, func(p *part) bool { return p.r != nil && slices.Contains(deleted, p.name()) })
		}
		return &compactedMsg{gen: gen, group: group, out: out, err: err}
	}, func(t *background[*compactedMsg]) any { return t.result })
}

// compacted takes a merge's result.
func (ra *residentActor) compacted(ctx actor.Context, m *compactedMsg) {
	ra.compacting = nil
	// Whatever happens to the result, the merge no longer keeps the actor
	// resident, and a commit that waited for it (see stalled) goes now.
	// The commit that lists the result goes before the actor leaves
	// memory: an idle stop commits what is pending first.
	defer func() {
		ctx.Send(ctx.Parent(), &mergingMsg{actor: ra.actor, pid: ctx.Self()})
		if ra.loaded {
			ra.pump(ctx)
		}
	}()
	if !ra.loaded || ra.gen != m.gen {
		return // the state was dropped: what the merge wrote is swept later
	}
	s := ra.state
	if m.err != nil {
		if !errors.Is(m.err, context.Canceled) { // a stop or a drop ended it
			ra.log().Warn("actor run merge failed", slog.Any("err", m.err))
		}
		if m.out != nil {
			s.drop(m.out)
		}
		return
	}
	i := slices.Index(s.runs, m.group[0])
	if i < 0 || i+len(m.group) > len(s.runs) || !slices.Equal(s.runs[i:i+len(m.group)], m.group) {
		s.drop(m.out) // the runs left the state meanwhile (DeleteAll)
		return
	}
	for _, r := range m.group {
		s.drop(r)
	}
	var keep []*run
	if len(m.out.parts) > 0 {
		keep = []*run{m.out}
	}
	s.runs = slices.Concat(s.runs[:i], keep, s.runs[i+len(m.group):])
	// A change of the state without an event: the next commit's head
	// lists the merge, and drops what it replaced.
	ra.version++
}

// sweepRuns deletes the run objects of actor a that the rule of
// ownership.RunGarbage makes garbage to the hold at gen, given the names
// its state lists (runs and garbage).
func sweepRuns(ctx context.Context, b ownership.Bucket, a ownership.Actor, gen ownership.Generation, listed map[runName]bool, timeout time.Duration) error {
	prefix, after := ownership.RunsPrefix(a), ""
	for {
		lctx, cancel := context.WithTimeout(ctx, timeout)
		page, err := b.List(lctx, prefix, after, 0)
		cancel()
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, e := range page.Entries {
			after = e.Key
			g, n, ok := ownership.ParseRunName(e.Key[len(prefix):])
			if !ok || !ownership.RunGarbage(gen, listed[runName{g, n}], g) {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, timeout)
			err := b.Delete(dctx, e.Key, ownership.Always())
			cancel()
			if err != nil {
				return fmt.Errorf("delete %s: %w", e.Key, err)
			}
		}
		if !page.Truncated || len(page.Entries) == 0 {
			return nil
		}
	}
}

// mergeRuns merges group (newest first) into one run of parts of at most
// about o.part bytes, each written before it returns. bottom drops
// deletes. On an error, out holds the parts written so far.
func mergeRuns(ctx context.Context, o runOpener, a ownership.Actor, gen ownership.Generation, group []*run, bottom bool) (out *run, err error) {
	its := make([]kvrun.Iterator, len(group))
	for i, r := range group {
		its[i] = r.iter(ctx, kvrun.IterOptions{})
	}
	return writeRun(ctx, o, a, gen, kvrun.Merge(false, its...), bottom)
}

// writeRun writes the entries m yields, in ascending key order, as one
// run of parts of at most about o.part bytes, each part named by gen and
// a random number and written (If-None-Match) before it returns. bottom
// drops deletes. On an error, out holds the parts written so far, and
// those whose write failed, which may land yet.
func writeRun(ctx context.Context, o runOpener, a ownership.Actor, gen ownership.Generation, m kvrun.Iterator, bottom bool) (out *run, err error) {
	out = &run{}
	var w *kvrun.Writer
	var bytes int
	finish := func() error {
		body, meta, err := w.Finish()
		if err != nil {
			return fmt.Errorf("build run: %w", err)
		}
		p := &part{gen: gen, n: rand.Uint64(), meta: meta}
		pctx, cancel := context.WithTimeout(ctx, o.timeout)
		o.wroteRun(len(body))
		_, err = o.b.Put(pctx, ownership.RunKey(a, p.gen, p.n), body, ownership.IfAbsent())
		cancel()
		if err != nil {
			// It may land yet: it is garbage either way.
			out.parts = append(out.parts, p)
			return fmt.Errorf("write run part: %w", err)
		}
		p.r = o.open(a, p)
		out.parts = append(out.parts, p)
		w, bytes = nil, 0
		return nil
	}
	for {
		e, ok := m.Next()
		if !ok {
			break
		}
		if e.Tombstone && bottom {
			continue
		}
		if w == nil {
			w = kvrun.NewWriter(kvrun.Options{})
		}
		if err := w.Add(e); err != nil {
			return out, fmt.Errorf("build run: %w", err)
		}
		if bytes += len(e.Key) + len(e.Value); bytes >= o.part {
			if err := finish(); err != nil {
				return out, err
			}
		}
	}
	if err := m.Err(); err != nil {
		return out, fmt.Errorf("read entries: %w", err)
	}
	if w != nil {
		if err := finish(); err != nil {
			return out, err
		}
	}
	return out, nil
}
