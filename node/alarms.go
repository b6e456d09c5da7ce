package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// The alarm poller finds the actors' due alarms and delivers them. Every
// node lists the start of the bucket's alarm index (actorstore.IndexKey:
// entries named by when they are due, earliest first) every AlarmPoll (and
// once more in between when the first entry not due yet comes due before
// the next pass; a quarter of the period apart at least), one page of at
// most alarmPage entries (and the next while all of one are due), and
// hands each due entry to
// Host.DispatchAlarm: the actor is acquired here and its alarm event run,
// or it is held by another live node, whose poller delivers it (a parked
// room's is its sockets' node). A delivery that came to an end (fired,
// set for its retry, given up, or found gone) deletes its entry; one that
// did not (refused, the bucket, not due by the actor's node's clock)
// leaves it for the next pass. So a node's bucket requests for alarms are
// one list a pass (and one more per alarmPage alarms due), plus a delete and
// an actor's event for each alarm due: alarms due later cost nothing until
// they are due.

// DefaultAlarmPoll is how often a node lists the due alarms.
const DefaultAlarmPoll = time.Second

// alarmIO bounds a pass's bucket calls and each delivery (an actor's wake,
// its event and its commit).
const alarmIO = 30 * time.Second

// alarmPage bounds the entries one pass reads; alarmDeliveries the
// deliveries one node runs at once.
const (
	alarmPage       = 256
	alarmDeliveries = 64
)

type alarmPoller struct {
	host   *actorhost.Host
	bucket ownership.Bucket
	every  time.Duration
	io     time.Duration // bounds each bucket call and delivery
	log    *slog.Logger
	m      *alarmMetrics

	mu       sync.Mutex
	inflight map[string]bool // index keys being delivered
	// deleted are the index keys this node deleted, with when: a listing
	// that began before a delete may still show the key, and its alarm
	// would be delivered again only to be found gone.
	deleted map[string]time.Time
	slots   chan struct{}
	passes  *repeater
	// deliveries are the deliveries a pass started, which stop waits for.
	deliveries sync.WaitGroup
}

type alarmMetrics struct {
	outcomes *prometheus.CounterVec
	lateness prometheus.Histogram
	due      prometheus.Gauge
	requests *prometheus.CounterVec
}

func newAlarmMetrics(reg prometheus.Registerer, host *actorhost.Host) (*alarmMetrics, error) {
	m := &alarmMetrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmkeep_alarms_total",
			Help: "Alarm deliveries this node ran to an end, by outcome: fired, retried (the event failed; set again), given_up (after its retries), gone (the entry's alarm was deleted or set again)."}, []string{"outcome"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wasmkeep_alarm_lateness_seconds",
			Help: "Time from when a fired alarm was due to its event's end.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		due: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wasmkeep_alarms_pending",
			Help: "Alarms due and not yet delivered, as this node found them in its last pass over the alarm index (at most one page: 256)."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "wasmkeep_alarm_bucket_requests_total",
			Help: "Bucket requests of this node's alarm poller, by operation (list, delete); an alarm's event is counted with the actors' storage."}, []string{"op"}),
	}
	for _, o := range []string{"fired", "retried", "given_up", "gone"} {
		m.outcomes.WithLabelValues(o)
	}
	set := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "wasmkeep_alarms_set_total",
		Help: "Alarms the actors of this node set (actors.SetAlarm in an event whose writes were kept)."}, func() float64 { return float64(host.AlarmsSet()) })
	for _, c := range []prometheus.Collector{m.outcomes, m.lateness, m.due, m.requests, set} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *alarmMetrics) ended(o actorhost.AlarmOutcome, due time.Time) {
	switch o {
	case actorhost.AlarmFired:
		m.outcomes.WithLabelValues("fired").Inc()
		m.lateness.Observe(time.Since(due).Seconds())
	case actorhost.AlarmRetried:
		m.outcomes.WithLabelValues("retried").Inc()
	case actorhost.AlarmGivenUp:
		m.outcomes.WithLabelValues("given_up").Inc()
	case actorhost.AlarmGone:
		m.outcomes.WithLabelValues("gone").Inc()
	}
}

// startAlarms starts the poller; stop ends it and waits for its
// deliveries.
func startAlarms(host *actorhost.Host, bucket ownership.Bucket, every, io time.Duration, m *alarmMetrics, log *slog.Logger) *alarmPoller {
	p := &alarmPoller{host: host, bucket: bucket, every: every, io: io, log: log, m: m,
		inflight: map[string]bool{}, deleted: map[string]time.Time{}, slots: make(chan struct{}, alarmDeliveries)}
	p.passes = startRepeater(0, p.run)
	return p
}

// stop ends the passes, then waits for the deliveries they started.
func (p *alarmPoller) stop() {
	p.passes.stop()
	p.deliveries.Wait()
}

// run makes a pass and says when the next is due.
func (p *alarmPoller) run(ctx context.Context) time.Duration {
	start := time.Now()
	wait := p.every
	if next := p.pass(ctx, &p.deliveries); !next.IsZero() {
		// The first entry not due yet comes due before the next pass:
		// a pass then instead, so that an alarm waits for its time, not
		// for the period; passes stay a quarter of the period apart, so
		// at most four a period, and only while alarms come due.
		wait = min(wait, max(time.Until(next), 0))
	}
	return max(wait, p.every/4-time.Since(start))
}

// pass lists the start of the index and delivers what is due, page after
// page while every entry of a page is due (so a burst of due alarms is
// listed as fast as it is delivered, a list per alarmPage of them); an
// entry that comes due before the next pass is delivered at its time from
// this listing. It returns when the first entry due after the next pass
// is, if it saw one.
func (p *alarmPoller) pass(ctx context.Context, wg *sync.WaitGroup) (next time.Time) {
	now, due, after := time.Now(), 0, ""
	ahead := 0 // entries due before the next pass, waiting for their time
	p.mu.Lock()
	for k, at := range p.deleted {
		if at.Before(now) { // this pass's listings begin after it
			delete(p.deleted, k)
		}
	}
	p.mu.Unlock()
	defer func() { p.m.due.Set(float64(due)) }()
	for {
		lctx, cancel := context.WithTimeout(ctx, p.io)
		page, err := p.bucket.List(lctx, actorstore.IndexPrefix, after, alarmPage)
		cancel()
		p.m.requests.WithLabelValues("list").Inc()
		if err != nil {
			if ctx.Err() == nil {
				p.log.Info("alarm index not listed", slog.Any("err", err))
			}
			return next
		}
		for _, le := range page.Entries {
			key := le.Key
			after = key
			e, err := actorstore.ParseIndexKey(key)
			if err != nil {
				p.log.Warn("alarm index entry not understood: deleted", slog.String("key", key), slog.Any("err", err))
				p.delete(ctx, key)
				continue
			}
			soon := e.At.After(now)
			if soon && (!e.At.Before(now.Add(p.every)) || ahead >= alarmPage) {
				return e.At // the rest are due later (or the next pass takes them)
			}
			if soon {
				ahead++
			}
			if !soon {
				due++
			}
			p.mu.Lock()
			_, gone := p.deleted[key]
			busy := p.inflight[key] || gone
			if !busy {
				p.inflight[key] = true
			}
			p.mu.Unlock()
			if busy {
				continue
			}
			if soon {
				// Due before the next pass: delivered at its time, from
				// this listing.
				wg.Go(func() {
					defer p.delivered(key)
					t := time.NewTimer(time.Until(e.At))
					defer t.Stop()
					select {
					case <-t.C:
					case <-ctx.Done():
						return
					}
					select {
					case p.slots <- struct{}{}:
					case <-ctx.Done():
						return
					}
					defer func() { <-p.slots }()
					p.deliver(ctx, e)
				})
				continue
			}
			select {
			case p.slots <- struct{}{}:
			case <-ctx.Done():
				p.delivered(key)
				return next
			}
			wg.Go(func() {
				defer p.delivered(key)
				defer func() { <-p.slots }()
				p.deliver(ctx, e)
			})
		}
		if !page.Truncated {
			return next
		}
	}
}

// delivered forgets that key is being delivered.
func (p *alarmPoller) delivered(key string) {
	p.mu.Lock()
	delete(p.inflight, key)
	p.mu.Unlock()
}

// deliver hands one due entry to its actor, and deletes the entry once
// the delivery came to an end that is durable (ownership.AlarmEntryDone):
// otherwise the entry stays for a later pass, here or on its holder.
func (p *alarmPoller) deliver(ctx context.Context, e actorstore.IndexEntry) {
	dctx, cancel := context.WithTimeout(ctx, p.io)
	defer cancel()
	o, at, err := p.host.DispatchAlarm(dctx, e)
	if !ownership.AlarmEntryDone(o.Verdict(), at == nil && err == nil) {
		if err != nil && ctx.Err() == nil {
			p.log.Debug("alarm not delivered: tried again at the next pass", slog.String("actor", e.Actor.String()),
				slog.String("alarm", e.Name), slog.Any("err", err))
		}
		return
	}
	p.m.ended(o, e.At)
	if p.delete(ctx, e.Key) {
		p.mu.Lock()
		p.deleted[e.Key] = time.Now()
		p.mu.Unlock()
	}
}

// delete deletes an index entry, and reports whether it did.
func (p *alarmPoller) delete(ctx context.Context, key string) bool {
	dctx, cancel := context.WithTimeout(ctx, p.io)
	defer cancel()
	p.m.requests.WithLabelValues("delete").Inc()
	err := p.bucket.Delete(dctx, key, ownership.Always())
	if err != nil && ctx.Err() == nil {
		p.log.Info("alarm index entry not deleted: its alarm will be found gone", slog.String("key", key), slog.Any("err", err))
	}
	return err == nil
}
