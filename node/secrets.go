package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/internal/metricreg"
	"github.com/wasmkeep/wasmkeep/internal/secrets"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
)

// DefaultSecretsPoll is how often a node reads the secrets again unless
// configured.
const DefaultSecretsPoll = 30 * time.Second

// secretsDrainBy starts the By of a drain request the node writes for
// itself when it cannot open the secrets: it takes back only such a one.
const secretsDrainBy = "the node itself: secrets: "

// secretsWatch reads the application's secrets into the vault every
// period. A node that cannot open one drains, as a node shut out of the
// application's secrets must not serve its actors: it writes a drain
// request for itself in the bucket (so that `wasmkeep cluster status`
// says why), and takes it back once it can open them all.
type secretsWatch struct {
	vault  *secrets.Vault
	bucket ownership.Bucket
	node   ownership.NodeID
	every  time.Duration
	log    *slog.Logger
	m      struct{ open, unopened prometheus.Gauge }
	passes *repeater
	// drained: this node's drain request for the secrets is in the bucket.
	drained bool
}

func startSecrets(v *secrets.Vault, b ownership.Bucket, node ownership.NodeID, every time.Duration, reg prometheus.Registerer, log *slog.Logger) (*secretsWatch, error) {
	w := &secretsWatch{vault: v, bucket: b, node: node, every: every, log: log.With(slog.String("component", "secrets"))}
	var err1, err2 error
	w.m.open, err1 = metricreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wasmkeep_secrets_open", Help: "Application secrets this node holds open (their names and values are never exported)."}))
	w.m.unopened, err2 = metricreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "wasmkeep_secrets_unopened", Help: "Application secrets this node cannot open with its identity at its last read: above 0, the node drains."}))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	// A drain request of an earlier start of this node for its secrets is
	// this start's to take back (one read of the node's drain request).
	if o, err := b.Get(context.Background(), ownership.DrainRequestKey(node)); err == nil {
		var req cluster.DrainRequest
		if json.Unmarshal(o.Body, &req) == nil && strings.HasPrefix(req.By, secretsDrainBy) {
			w.drained = true
		}
	}
	w.passes = startRepeater(0, periodic(w.every, w.pass))
	return w, nil
}

func (w *secretsWatch) stop() { w.passes.stop() }

// pass reads the secrets once and drains, or takes its drain back, as it
// finds them.
func (w *secretsWatch) pass(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.every)
	defer cancel()
	unopened, err := w.vault.Refresh(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("secrets not read; the ones open are kept", slog.Any("err", err))
		}
		return
	}
	open, _ := w.vault.Counts()
	w.m.open.Set(float64(open))
	w.m.unopened.Set(float64(len(unopened)))
	switch {
	case len(unopened) > 0 && !w.drained:
		why := fmt.Sprintf("%scannot open %d of %d (%s) with its identity: not among their recipients",
			secretsDrainBy, len(unopened), len(unopened)+open, strings.Join(unopened, ", "))
		w.log.Error("this node cannot open the application's secrets: it drains", slog.Any("secrets", unopened))
		if _, err := cluster.RequestDrain(ctx, w.bucket, w.node, why, time.Now()); err != nil {
			w.log.Error("drain request not written; tried again at the next read", slog.Any("err", err))
			return
		}
		w.drained = true
	case len(unopened) == 0 && w.drained:
		if err := cluster.TakeBackDrain(ctx, w.bucket, w.node); err != nil && !errors.Is(err, cluster.ErrNoDrainRequest) {
			w.log.Error("drain request not taken back; tried again at the next read", slog.Any("err", err))
			return
		}
		w.log.Info("this node opens every secret now: it serves again")
		w.drained = false
	}
}
