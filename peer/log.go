package peer

import (
	"log/slog"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// peerLog logs the failures of forwards and calls to peers once per peer
// per change of state: the first failure after success (or ever), then,
// once one succeeds again, how many failed and for how long. A peer that
// stops answering would otherwise log a line per request (a single
// client polling made hundreds in seconds).
type peerLog struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	peers map[ownership.NodeID]*peerFailing
}

type peerFailing struct {
	since  time.Time
	failed int
}

func newPeerLog(log *slog.Logger) *peerLog {
	return &peerLog{log: log, now: time.Now, peers: map[ownership.NodeID]*peerFailing{}}
}

// failed notes that what went to peer at addr failed with err.
func (p *peerLog) failed(peer ownership.NodeID, addr, what string, err error) {
	p.mu.Lock()
	f := p.peers[peer]
	first := f == nil
	if first {
		f = &peerFailing{since: p.now()}
		p.peers[peer] = f
	}
	f.failed++
	p.mu.Unlock()
	if first {
		p.log.Warn(what+" to a peer failed; further failures to it are counted, not logged, until one succeeds",
			slog.String("peer", string(peer)), slog.String("addr", addr), slog.Any("err", err))
	}
}

// answered notes that peer answered; the first answer after failures is
// logged with their count.
func (p *peerLog) answered(peer ownership.NodeID) {
	p.mu.Lock()
	f := p.peers[peer]
	if f != nil {
		delete(p.peers, peer)
	}
	p.mu.Unlock()
	if f != nil {
		p.log.Info("a peer answers again", slog.String("peer", string(peer)),
			slog.Int("failed", f.failed), slog.Duration("for", p.now().Sub(f.since).Round(time.Millisecond)))
	}
}
