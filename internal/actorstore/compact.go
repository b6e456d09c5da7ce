package actorstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

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
func pickCompaction(runs []*Run) (n int, ok bool) {
	if len(runs) < 2 {
		return 0, false
	}
	newer, k := runs[0].size(), 0
	for m := 1; m < len(runs) && runs[m].size() <= mergeRatio*newer; m++ {
		k, newer = m, newer+runs[m].size()
	}
	return k + 1, k > 0
}

// Compaction chooses the runs to merge, if any (pickCompaction): group,
// newest first, and bottom when it reaches the oldest run, so that the
// merge drops the deletes.
func (s *State) Compaction() (group []*Run, bottom, ok bool) {
	n, ok := pickCompaction(s.runs)
	if !ok {
		return nil, false, false
	}
	return slices.Clone(s.runs[:n]), n == len(s.runs), true
}

// Listed is every run object the state names: the parts and manifests of
// its runs, and its garbage.
func (s *State) Listed() map[RunName]bool {
	listed := map[RunName]bool{}
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
	return listed
}

// Merged replaces group, the runs a merge read, with out, its result,
// if they are still in the state; if they are not (a DeleteAll dropped
// them meanwhile), it drops out and reports false.
func (s *State) Merged(group []*Run, out *Run) bool {
	i := slices.Index(s.runs, group[0])
	if i < 0 || i+len(group) > len(s.runs) || !slices.Equal(s.runs[i:i+len(group)], group) {
		s.Drop(out)
		return false
	}
	for _, r := range group {
		s.Drop(r)
	}
	var keep []*Run
	if len(out.parts) > 0 {
		keep = []*Run{out}
	}
	s.runs = slices.Concat(s.runs[:i], keep, s.runs[i+len(group):])
	return true
}

// MergeGroup merges group (mergeRuns) and, when the merge fails, deletes
// the parts it wrote, each within timeout.
func MergeGroup(ctx context.Context, o RunOpener, b ownership.Bucket, a ownership.Actor, gen ownership.Generation, group []*Run, bottom bool, timeout time.Duration) (*Run, error) {
	out, err := mergeRuns(ctx, o, a, gen, group, bottom)
	if err != nil && len(out.parts) > 0 {
		// No head lists what a failed merge wrote: it goes now, not
		// at a later hold's sweep. A part whose write failed (p.r
		// unset) is deleted too, as it may have landed, but it stays
		// garbage all the same, since it may land yet, after the
		// delete; so does what is not deleted.
		var all []RunName
		for _, p := range out.parts {
			all = append(all, p.name())
		}
		dctx, dcancel := context.WithTimeout(context.Background(), timeout)
		deleted := DeleteRuns(dctx, b, a, all)
		dcancel()
		out.parts = slices.DeleteFunc(out.parts, func(p *part) bool { return p.r != nil && slices.Contains(deleted, p.name()) })
	}
	return out, err
}

// DeleteRuns deletes runs that a landed head no longer lists, and returns
// those whose delete landed. (One that did not stays listed as garbage,
// and the next commit tries again.)
func DeleteRuns(ctx context.Context, b ownership.Bucket, a ownership.Actor, runs []RunName) []RunName {
	var done []RunName
	for _, r := range runs {
		if err := b.Delete(ctx, ownership.RunKey(a, r.gen, r.n), ownership.Always()); err == nil {
			done = append(done, r)
		}
	}
	return done
}

// SweepRuns deletes the run objects of actor a that the rule of
// ownership.RunGarbage makes garbage to the hold at gen, given the names
// its state lists (runs and garbage).
func SweepRuns(ctx context.Context, b ownership.Bucket, a ownership.Actor, gen ownership.Generation, listed map[RunName]bool, timeout time.Duration) error {
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
			if !ok || !ownership.RunGarbage(gen, listed[RunName{g, n}], g) {
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
func mergeRuns(ctx context.Context, o RunOpener, a ownership.Actor, gen ownership.Generation, group []*Run, bottom bool) (out *Run, err error) {
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
func writeRun(ctx context.Context, o RunOpener, a ownership.Actor, gen ownership.Generation, m kvrun.Iterator, bottom bool) (out *Run, err error) {
	out = &Run{}
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
