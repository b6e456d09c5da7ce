package actorhost

import (
	"context"
	"errors"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// The merges of an actor's runs (compact.go), driven by its resident
// actor: one at a time, in the background, its result taken through the
// mailbox.

// compactedMsg brings a merge's result back to its resident actor.
type compactedMsg struct {
	gen   ownership.Generation
	group []*actorstore.Run // the merged runs, as they were in the state
	out   *actorstore.Run   // their merge (no parts: nothing was left)
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
	group, bottom, ok := ra.state.Compaction()
	if !ok {
		return
	}
	listed := ra.state.Listed()
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
			return &compactedMsg{gen: gen, group: group, out: &actorstore.Run{}, err: cctx.Err()}
		}
		if err := actorstore.SweepRuns(cctx, bucket, a, gen, listed, timeout); err != nil {
			log.Info("actor run sweep did not finish", slog.Any("err", err))
		}
		out, err := actorstore.MergeGroup(cctx, runs, bucket, a, gen, group, bottom, timeout)
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
			s.Drop(m.out)
		}
		return
	}
	if !s.Merged(m.group, m.out) {
		return // the runs left the state meanwhile (DeleteAll)
	}
	// A change of the state without an event: the next commit's head
	// lists the merge, and drops what it replaced.
	ra.version++
}
