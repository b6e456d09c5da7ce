package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/deploys"
	"github.com/wasmkeep/wasmkeep/internal/metricreg"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// DefaultDeployPoll is how often a node looks for deploys unless
// configured.
const DefaultDeployPoll = 5 * time.Second

// Compiler makes a class, or the front, of a deployed module (the node's
// wasm runtime, whose compilation cache is keyed by the module's hash).
type Compiler interface {
	Compile(ctx context.Context, class string, wasm []byte) (actors.Class, error)
	Front(ctx context.Context, wasm []byte) (actors.Front, error)
}

// deployStatus is what the node serves of one deployed class, for its
// status page.
type deployStatus struct {
	Class   string `json:"class"`
	Version string `json:"version,omitempty"`
	// Failed: the version the node could not compile, and why; it serves
	// Version (the one before) meanwhile.
	Failed string `json:"failed,omitempty"`
}

// deployWatch serves the classes deployed through the bucket
// (internal/deploys): every period it lists their records, reads the ones
// whose ETag changed, and for a current version it does not serve yet
// reads the module, compiles it and puts it in the registry, where the
// next events find it. Resident actors go on with the version they were
// made with until they hibernate, or switch at their next event when the
// deploy says now (actorhost.Host.SwitchNow). A version that does not
// compile is logged, counted and shown, and the one before served.
type deployWatch struct {
	bucket   ownership.Bucket
	registry *actors.Registry
	compiler Compiler
	host     *actorhost.Host
	// setFront serves a deployed front (deploys.FrontName).
	setFront func(actors.Front)
	every    time.Duration
	log      *slog.Logger
	// local are the classes the node serves of its own (--classes and Go
	// classes): a deployed class of the same name wins, said once.
	local []string

	applied  prometheus.Counter
	failures prometheus.Counter
	requests *prometheus.CounterVec

	mu      sync.Mutex
	etags   map[string]ownership.ETag
	serving map[string]deployStatus

	passes *repeater // nil until start
}

func newDeployWatch(b ownership.Bucket, reg *actors.Registry, c Compiler, host *actorhost.Host, setFront func(actors.Front), every time.Duration, metrics prometheus.Registerer, log *slog.Logger) (*deployWatch, error) {
	w := &deployWatch{bucket: b, registry: reg, compiler: c, host: host, setFront: setFront, every: every, log: log.With(slog.String("component", "deploys")),
		local: reg.Names(), etags: map[string]ownership.ETag{}, serving: map[string]deployStatus{}}
	var errs [3]error
	w.applied, errs[0] = metricreg.Register(metrics, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "wasmkeep_deploys_applied_total", Help: "Deployed class versions this node compiled and serves (the events after take them)."}))
	w.failures, errs[1] = metricreg.Register(metrics, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "wasmkeep_deploy_failures_total", Help: "Deployed class versions this node could not read or compile; it serves the version before."}))
	w.requests, errs[2] = metricreg.Register(metrics, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_deploy_bucket_requests_total", Help: "Bucket requests the node made to learn of deploys, by op (list, record, module)."}, []string{"op"}))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return w, nil
}

// start runs a first pass now (a restarted node serves the current
// versions from its first event) and the others every period.
func (w *deployWatch) start(ctx context.Context) {
	w.pass(ctx)
	w.passes = startRepeater(w.every, periodic(w.every, w.pass))
}

func (w *deployWatch) stop() {
	if w.passes != nil {
		w.passes.stop()
	}
}

// status lists the deployed classes this node knows, by name.
func (w *deployWatch) status() []deployStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]deployStatus, 0, len(w.serving))
	for _, s := range w.serving {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b deployStatus) int { return strings.Compare(a.Class, b.Class) })
	return out
}

// pass looks for deploys once.
func (w *deployWatch) pass(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(w.every, 30*time.Second))
	defer cancel()
	w.requests.WithLabelValues("list").Inc()
	list, err := deploys.List(ctx, w.bucket)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("deploys not listed; tried again next period", slog.Any("err", err))
		}
		return
	}
	for _, e := range list {
		w.mu.Lock()
		seen := w.etags[e.Class] == e.ETag
		w.mu.Unlock()
		if seen {
			continue
		}
		if err := w.apply(ctx, e); err != nil && ctx.Err() == nil {
			w.log.Warn("deploy not read; tried again next period", slog.String("class", e.Class), slog.Any("err", err))
		}
	}
}

// apply serves the current version of e's class, if the node does not.
func (w *deployWatch) apply(ctx context.Context, e deploys.Entry) error {
	w.requests.WithLabelValues("record").Inc()
	rec, etag, err := deploys.Read(ctx, w.bucket, e.Class)
	if err != nil {
		return err
	}
	cur := rec.Current()
	w.mu.Lock()
	st := w.serving[e.Class]
	w.mu.Unlock()
	st.Class = e.Class
	if st.Version == cur.Version {
		w.remember(etag, st)
		return nil
	}
	w.requests.WithLabelValues("module").Inc()
	module, err := deploys.ReadModule(ctx, w.bucket, e.Class, cur.Version)
	if err != nil {
		return err
	}
	if e.Class == deploys.FrontName {
		return w.applyFront(ctx, etag, st, cur, module)
	}
	class, err := w.compiler.Compile(ctx, e.Class, module)
	if err != nil {
		w.failures.Inc()
		st.Failed = fmt.Sprintf("version %s: %v", cur.Version, err)
		w.log.Error("deployed class version does not compile here: the version before is served", slog.String("class", e.Class),
			slog.String("version", cur.Version), slog.String("serving", st.Version), slog.Any("err", err))
		w.remember(etag, st) // tried again only when the record changes
		return nil
	}
	if slices.Contains(w.local, e.Class) && st.Version == "" {
		w.log.Warn("a deployed class replaces this node's own class of the same name", slog.String("class", e.Class))
	}
	if err := w.registry.Replace(e.Class, class); err != nil {
		return err
	}
	if cur.Now {
		w.host.SwitchNow(e.Class)
	}
	w.applied.Inc()
	w.log.Info("deployed class version served", slog.String("class", e.Class), slog.String("version", cur.Version),
		slog.Bool("now", cur.Now), slog.Bool("rollback", cur.Rollback))
	st.Version, st.Failed = cur.Version, ""
	w.remember(etag, st)
	return nil
}

func (w *deployWatch) remember(etag ownership.ETag, st deployStatus) {
	w.mu.Lock()
	w.etags[st.Class], w.serving[st.Class] = etag, st
	w.mu.Unlock()
}

// applyFront serves a deployed front's module, in place of the node's own
// front; one that does not compile leaves the front before.
func (w *deployWatch) applyFront(ctx context.Context, etag ownership.ETag, st deployStatus, cur deploys.Deploy, module []byte) error {
	f, err := w.compiler.Front(ctx, module)
	if err != nil {
		w.failures.Inc()
		st.Failed = fmt.Sprintf("version %s: %v", cur.Version, err)
		w.log.Error("deployed front version does not compile here: the front before is served", slog.String("version", cur.Version), slog.Any("err", err))
		w.remember(etag, st)
		return nil
	}
	w.setFront(f)
	w.applied.Inc()
	w.log.Info("deployed front version served", slog.String("version", cur.Version), slog.Bool("rollback", cur.Rollback))
	st.Version, st.Failed = cur.Version, ""
	w.remember(etag, st)
	return nil
}
