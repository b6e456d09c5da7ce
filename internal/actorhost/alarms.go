package actorhost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// An actor's alarms (actors.SetAlarm) are records of its storage
// (internal/actorstore/alarms.go); the bucket's alarm index names each by
// when it is due. The node's alarm poller (package node) lists the due
// entries and hands each to DispatchAlarm, which acquires the actor here,
// or says where it is held (that node's poller delivers it). The alarm's
// event checks the entry against the actor's record: only the set the
// entry was written for fires, so an entry left by an earlier set, or by
// a commit that did not land, costs one event and nothing else. The rules
// of a delivery are ownership's (ownership/alarm.go), which the
// simulation runs too.

// AlarmOutcome is what an alarm's delivery came to.
type AlarmOutcome int

const (
	// AlarmFired: the class handled it; the alarm ended with the event
	// (unless the event set it again).
	AlarmFired AlarmOutcome = iota + 1
	// AlarmRetried: the event failed; the alarm is set again for a retry.
	AlarmRetried
	// AlarmGivenUp: the event failed after MaxAlarmRetries retries (or the
	// class handles no alarms); the alarm is deleted.
	AlarmGivenUp
	// AlarmGone: the actor has no such alarm as the entry names (it was
	// deleted, set again, or its commit never landed).
	AlarmGone
	// AlarmNotDue: the alarm is not due yet by this node's clock.
	AlarmNotDue
)

// Verdict is what the alarm's event judged (ownership.JudgeAlarm): the
// handler ran (fired, retried, given up), or the entry was gone or not
// due; 0 when no event judged it.
func (o AlarmOutcome) Verdict() ownership.AlarmVerdict {
	switch o {
	case AlarmFired, AlarmRetried, AlarmGivenUp:
		return ownership.AlarmFire
	case AlarmGone:
		return ownership.AlarmGone
	case AlarmNotDue:
		return ownership.AlarmNotDue
	}
	return 0
}

func (o AlarmOutcome) String() string {
	switch o {
	case AlarmFired:
		return "fired"
	case AlarmRetried:
		return "retried"
	case AlarmGivenUp:
		return "given up"
	case AlarmGone:
		return "gone"
	case AlarmNotDue:
		return "not due"
	}
	return fmt.Sprintf("AlarmOutcome(%d)", int(o))
}

// MaxAlarmRetries bounds the retries of an alarm whose event fails; the
// n-th retry comes FirstAlarmRetry << (n-1) after the failure before it.
const (
	MaxAlarmRetries = 6
	FirstAlarmRetry = 2 * time.Second
)

// alarmEvent is an alarm's delivery: the index entry it is for, and what
// became of it (set on the actor's goroutine; read by the delivery, which
// may have stopped waiting for the answer, hence atomic).
type alarmEvent struct {
	entry   actorstore.IndexEntry
	outcome atomic.Int32 // an AlarmOutcome
	rec     actorstore.AlarmRecord
}

func (ae *alarmEvent) set(o AlarmOutcome) { ae.outcome.Store(int32(o)) }

// DispatchAlarm delivers the alarm the index entry due names to its actor, as
// Dispatch delivers a request: it acquires the actor here, or returns
// where it is held. The outcome is what the alarm's event came to (0 if
// none ran here); it is durable only when err is nil: the event's answer
// came through the output gate, so its writes (the alarm ended, or set
// for its retry) are durable, and so is what it read. Whether the entry
// may go is ownership.AlarmEntryDone's to say.
func (e *Entry) DispatchAlarm(ctx context.Context, due actorstore.IndexEntry) (AlarmOutcome, *Elsewhere, error) {
	ae := &alarmEvent{entry: due}
	at, err := e.dispatch(ctx, due.Actor, 0, func(gen ownership.Generation, state *ownership.Sealed) error {
		ae.set(0)
		return e.run(ctx, &eventMsg{ctx: ctx, actor: due.Actor, gen: gen, sealed: state, alarm: ae}).err
	})
	if at != nil {
		return 0, at, err
	}
	return AlarmOutcome(ae.outcome.Load()), nil, err
}

// alarmCounts counts the alarms the classes set (AlarmStats).
type alarmCounts struct {
	set atomic.Int64
}

// AlarmsSet is how many alarms the node's actors set (and committed)
// since the host started.
func (h *Host) AlarmsSet() int64 { return h.alarms.set.Load() }

// runAlarm runs an alarm's event on the class's handler c: unless the
// entry's set of the alarm is the one the actor keeps, due by this node's
// clock, nothing runs. It returns the handler's error.
func (ra *residentActor) runAlarm(ctx context.Context, c actors.Handler, ae *alarmEvent, t *actorstore.Txn) error {
	rec, ok, err := t.Alarm(ae.entry.Name)
	if err != nil {
		return err
	}
	switch ownership.JudgeAlarm(ae.entry.Set(), rec.Set(), ok, time.Now()) {
	case ownership.AlarmGone:
		ae.set(AlarmGone)
		return nil
	case ownership.AlarmNotDue:
		ae.set(AlarmNotDue)
		return nil
	}
	ae.rec = rec
	h, ok := c.(actors.AlarmHandler)
	if !ok {
		ra.log().Warn("alarm due for a class that handles none: given up", slog.String("alarm", rec.Name))
		t.DeleteAlarm(rec.Name)
		ae.set(AlarmGivenUp)
		return nil
	}
	if err := h.HandleAlarm(ctx, rec.Alarm, t); errors.Is(err, actors.ErrAlarmsNotHandled) {
		ra.log().Warn("alarm due for a class that handles none: given up", slog.String("alarm", rec.Name))
		t.Discard()
		t.DeleteAlarm(rec.Name)
		ae.set(AlarmGivenUp)
		return nil
	} else if err != nil {
		return err
	}
	// The event ends its alarm, unless it set it again (a new nonce) or
	// deleted it.
	if cur, ok, _ := t.Alarm(rec.Name); ownership.AlarmEnds(rec.Nonce, cur.Set(), ok) {
		t.DeleteAlarm(rec.Name)
	}
	ae.set(AlarmFired)
	return nil
}

// alarmFailed writes what an alarm whose event failed (err) comes to, the
// event's own writes discarded: set again for its next retry, or deleted
// after the last.
func (ra *residentActor) alarmFailed(ae *alarmEvent, t *actorstore.Txn, err error) {
	rec := ae.rec
	if rec.Retry >= MaxAlarmRetries {
		ra.log().Warn("alarm given up after its retries", slog.String("alarm", rec.Name), slog.Int("retries", rec.Retry), slog.Any("err", err))
		t.DeleteAlarm(rec.Name)
		ae.set(AlarmGivenUp)
		return
	}
	next := time.Now().Add(cmp.Or(ra.h.cfg.AlarmRetry, FirstAlarmRetry) << rec.Retry)
	if werr := t.RetryAlarm(rec.Name, next, rec.Retry+1); werr != nil {
		ra.log().Error("alarm could not be set for its retry: given up", slog.String("alarm", rec.Name), slog.Any("err", errors.Join(err, werr)))
		t.DeleteAlarm(rec.Name)
		ae.set(AlarmGivenUp)
		return
	}
	ra.log().Info("alarm failed: retried later", slog.String("alarm", rec.Name), slog.Int("retry", rec.Retry+1),
		slog.Time("at", next), slog.Any("err", err))
	ae.set(AlarmRetried)
}

// SetAlarm is actors.SetAlarm for the event.
func (ev *eventValues) SetAlarm(name string, at time.Time) error {
	if err := ev.call.t.SetAlarm(name, at); err != nil {
		return err
	}
	ev.alarmsSet++
	return nil
}

// GetAlarm is actors.GetAlarm for the event.
func (ev *eventValues) GetAlarm(name string) (time.Time, bool, error) {
	if err := actorstore.CheckAlarmName(name); err != nil {
		return time.Time{}, false, err
	}
	r, ok, err := ev.call.t.Alarm(name)
	return r.At, ok, err
}

// DeleteAlarm is actors.DeleteAlarm for the event.
func (ev *eventValues) DeleteAlarm(name string) error {
	if err := actorstore.CheckAlarmName(name); err != nil {
		return err
	}
	ev.call.t.DeleteAlarm(name)
	return nil
}

// ListAlarms is actors.ListAlarms for the event.
func (ev *eventValues) ListAlarms() ([]actors.Alarm, error) {
	rs, err := ev.call.t.Alarms()
	if err != nil {
		return nil, err
	}
	out := make([]actors.Alarm, len(rs))
	for i, r := range rs {
		out[i] = r.Alarm
	}
	return out, nil
}
