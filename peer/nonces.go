package peer

import (
	"sync"
	"time"
)

// nonces remembers the nonces of the peer requests taken, by the second
// of their arrival, as long as a signature made then could still be
// taken. Only requests whose MAC checked are remembered, so only a peer
// can fill it, at the rate it forwards.
type nonces struct {
	now  func() time.Time
	mu   sync.Mutex
	secs map[int64]map[string]struct{}
}

func newNonces(now func() time.Time) *nonces {
	return &nonces{now: now, secs: make(map[int64]map[string]struct{})}
}

// first records nonce, seen at now, and says whether it is new.
func (n *nonces) first(nonce string, now time.Time) bool {
	sec := now.Unix()
	// A signature taken at now was made at most a window earlier and is
	// taken at most a window later: its nonce must be remembered for two.
	oldest := sec - int64(2*SignatureWindow/time.Second) - 1
	n.mu.Lock()
	defer n.mu.Unlock()
	for s, set := range n.secs {
		if s < oldest {
			delete(n.secs, s)
			continue
		}
		if _, ok := set[nonce]; ok {
			return false
		}
	}
	set := n.secs[sec]
	if set == nil {
		set = make(map[string]struct{})
		n.secs[sec] = set
	}
	set[nonce] = struct{}{}
	return true
}
