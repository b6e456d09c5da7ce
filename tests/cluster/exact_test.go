package cluster

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every answer means one thing, and the checker here holds the cluster to
// it under faults: a 200 is an increment that happened once; a 503 is one
// that did not happen; a 504 marked Wasmkeep-Outcome: unknown, or an
// answer lost on its way (a connection that broke after the request was
// sent), may have happened. So for every counter, the increments that took
// effect without a 200 are at most the unknown and lost answers: a 503 for
// an increment that happened, or one counted twice, breaks that bound.
// With an Idempotency-Key retried until it succeeds, the count is exact.

// tally is what the load saw of one counter's increments.
type tally struct {
	acked, refused, unknown, lost int
	// keys: the distinct Idempotency-Keys that succeeded (keyed load).
	keys int
}

// exactLoad increments counters through every node in turn, as a
// balancer would, and keeps what each answer said.
type exactLoad struct {
	ms       []*member
	counters int
	next     atomic.Int64
	client   *http.Client
	mu       sync.Mutex
	per      map[string]*tally
	odd      []string // answers that are none of the four, or keys given up
}

func newExactLoad(ms []*member, counters int) *exactLoad {
	return &exactLoad{ms: ms, counters: counters, per: map[string]*tally{},
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
}

// answer is what became of one request.
type answer uint8

const (
	answerNotSent answer = iota // refused connection: nothing was sent
	answerAcked
	answerRefused
	answerUnknown
	answerLost
	answerOdd
)

// send sends one increment of counter name to the next node, with key
// ("": none).
func (l *exactLoad) send(name, key string) (answer, string) {
	m := l.ms[int(l.next.Add(1))%len(l.ms)]
	req, err := http.NewRequest(http.MethodGet, "http://"+m.node().Addr+"/actor/counter/"+name, nil)
	if err != nil {
		return answerOdd, err.Error()
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	// A body that cannot be sent again: Go's transport would otherwise send
	// a GET again, on a new connection, when the kept-alive one it used
	// broke, and a refused second connection would hide that the first
	// had carried the request.
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader("")), 0
	res, err := l.client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return answerNotSent, ""
		}
		return answerLost, err.Error()
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	switch {
	case err != nil:
		return answerLost, err.Error()
	case res.StatusCode == http.StatusOK:
		return answerAcked, ""
	case res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "":
		return answerRefused, ""
	case res.StatusCode == http.StatusGatewayTimeout && res.Header.Get("Wasmkeep-Outcome") == "unknown":
		return answerUnknown, strings.TrimSpace(string(body))
	case key != "" && res.StatusCode == http.StatusConflict && res.Header.Get("Wasmkeep-Outcome") == "running":
		return answerRefused, "" // the first with the key still runs: nothing new happened
	}
	return answerOdd, fmt.Sprintf("%s: %d %s", m.name, res.StatusCode, strings.TrimSpace(string(body)))
}

func (l *exactLoad) note(name string, a answer, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tl := l.per[name]
	if tl == nil {
		tl = &tally{}
		l.per[name] = tl
	}
	switch a {
	case answerAcked:
		tl.acked++
	case answerRefused:
		tl.refused++
	case answerUnknown:
		tl.unknown++
	case answerLost:
		tl.lost++
	case answerOdd:
		l.odd = append(l.odd, name+": "+detail)
	}
}

// run increments counters, one request each, until stop is closed.
func (l *exactLoad) run(stop <-chan struct{}, worker int) {
	for i := worker; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		name := fmt.Sprintf("c%d", i%l.counters)
		a, detail := l.send(name, "")
		l.note(name, a, detail)
		if a != answerAcked {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// runKeyed increments counters, each increment with a key of its own,
// sent again with the same key after every answer but a 200, until stop is
// closed (the increment under way is finished first, within a minute).
func (l *exactLoad) runKeyed(stop <-chan struct{}, worker int) {
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		default:
		}
		name := fmt.Sprintf("c%d", (worker+k)%l.counters)
		key := fmt.Sprintf("w%d-%d", worker, k)
		deadline := time.Now().Add(time.Minute)
		for {
			a, detail := l.send(name, key)
			l.note(name, a, detail)
			if a == answerAcked {
				l.mu.Lock()
				l.per[name].keys++
				l.mu.Unlock()
				break
			}
			if time.Now().After(deadline) {
				l.mu.Lock()
				l.odd = append(l.odd, fmt.Sprintf("%s: key %s given up after a minute", name, key))
				l.mu.Unlock()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// start runs workers of the load (keyed or not) until the returned stop is
// called, which waits for them.
func (l *exactLoad) start(workers int, keyed bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if keyed {
				l.runKeyed(done, w)
			} else {
				l.run(done, w)
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// count reads counter name through any node that serves it.
func (l *exactLoad) count(t *testing.T, name string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := l.ms[int(l.next.Add(1))%len(l.ms)]
		code, body, err := m.node().Get("/actor/counter/" + name + "?read")
		if err == nil && code == http.StatusOK {
			n, err := strconv.Atoi(strings.TrimSpace(body))
			require.NoError(t, err)
			return n
		}
		require.True(t, time.Now().Before(deadline), "no node served %s: %v %d %s", name, err, code, body)
		time.Sleep(100 * time.Millisecond)
	}
}

// check holds every counter to what the answers said: its increments
// without a 200 are at most its unknown and lost answers (exactly the
// distinct keys, keyed). It returns the totals.
func (l *exactLoad) check(t *testing.T, keyed bool) tally {
	t.Helper()
	assert.Empty(t, l.odd, "answers that mean none of success, refusal, unknown outcome, or lost on the way")
	var total tally
	extra := 0
	for name, tl := range l.per {
		got := l.count(t, name)
		if keyed {
			assert.Equal(t, tl.keys, got, "counter %s: every key counted once (%+v)", name, *tl)
		} else {
			more := got - tl.acked
			assert.True(t, more >= 0 && more <= tl.unknown+tl.lost,
				"counter %s: %d counted, %d acknowledged: %d without an acknowledgement, but only %d unknown and %d lost answers (%d refused)",
				name, got, tl.acked, more, tl.unknown, tl.lost, tl.refused)
			extra += more
		}
		total.acked += tl.acked
		total.refused += tl.refused
		total.unknown += tl.unknown
		total.lost += tl.lost
		total.keys += tl.keys
	}
	t.Logf("%d acknowledged, %d refused, %d unknown, %d lost on the way; %d increments took effect without an acknowledgement; %d keys",
		total.acked, total.refused, total.unknown, total.lost, extra, total.keys)
	return total
}

// restart starts m again (after it exited) and waits until every member
// sees every other live.
func restart(t *testing.T, ms []*member, m *member) {
	t.Helper()
	m.start(t)
	for _, o := range ms {
		o.awaitPeers(t, len(ms)-1)
	}
}

// clusterSizes are the sizes the fault tests run at.
var clusterSizes = []int{3, 4}

// TestRollingRestart restarts every node of a cluster in turn, each with
// SIGTERM (it drains to its peers first, as --drain-on-stop says), while
// clients increment counters through every node: every count is held to
// the answers (see tally), a WebSocket on the node being stopped, and one
// relayed through it, close with 1012, and each node exits 0.
func TestRollingRestart(t *testing.T) {
	for _, size := range clusterSizes {
		t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) {
			ms := startCluster(t, size)
			l := newExactLoad(ms, 20)
			stop := l.start(4, false)
			for i, m := range ms {
				time.Sleep(500 * time.Millisecond) // load on every node
				own, _, err := websocket.DefaultDialer.Dial("ws://"+m.node().Addr+"/actor/chat/lobby-"+m.name, nil)
				require.NoError(t, err)
				// A room another node holds, reached through m: relayed.
				other := ms[(i+1)%len(ms)]
				held, _, err := websocket.DefaultDialer.Dial("ws://"+other.node().Addr+"/actor/chat/relay-"+m.name, nil)
				require.NoError(t, err)
				relayed, _, err := websocket.DefaultDialer.Dial("ws://"+m.node().Addr+"/actor/chat/relay-"+m.name, nil)
				require.NoError(t, err)
				ownClosed, relayClosed := closeCode(own), closeCode(relayed)
				m.node().Signal(t, syscall.SIGTERM)
				assert.Equal(t, 0, m.node().Wait(t, 30*time.Second), "%s exits 0 after its drain and stop", m.name)
				assert.Contains(t, m.node().Stderr.String(), "drained before the stop", "%s drained first", m.name)
				for what, closed := range map[string]<-chan int{"its own": ownClosed, "relayed": relayClosed} {
					select {
					case code := <-closed:
						assert.Equal(t, 1012, code, "%s socket on %s closes with 1012", what, m.name)
					case <-time.After(10 * time.Second):
						t.Errorf("%s socket on %s was not closed", what, m.name)
					}
				}
				own.Close()
				relayed.Close()
				held.Close()
				restart(t, ms, m)
			}
			time.Sleep(500 * time.Millisecond)
			stop()
			total := l.check(t, false)
			assert.Greater(t, total.acked, 100)
		})
	}
}

// underLoad runs fault on a cluster of each size that start makes, while
// clients increment counters through every node, and holds every count to
// the answers.
func underLoad(t *testing.T, start func(t *testing.T, n int, extra ...string) []*member, fault func(t *testing.T, ms []*member)) {
	for _, size := range clusterSizes {
		t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) {
			ms := start(t, size)
			l := newExactLoad(ms, 20)
			stop := l.start(4, false)
			time.Sleep(time.Second)
			fault(t, ms)
			time.Sleep(time.Second)
			stop()
			total := l.check(t, false)
			assert.Greater(t, total.acked, 100)
		})
	}
}

// TestKilledNodeUnderLoad kills a node (SIGKILL: nothing is released)
// under load, then starts it again.
func TestKilledNodeUnderLoad(t *testing.T) {
	underLoad(t, startCluster, func(t *testing.T, ms []*member) {
		ms[0].node().Signal(t, syscall.SIGKILL)
		ms[0].node().Wait(t, 10*time.Second)
		time.Sleep(7 * time.Second) // fenced after 5 s; its actors served by the others
		restart(t, ms, ms[0])
	})
}

// TestHungNodeUnderLoad stops a node (SIGSTOP: it keeps its connections
// and answers nothing) under load, until its peers have fenced it;
// resumed, it exits non-zero, and is started again. On S3 (see
// startS3Cluster).
func TestHungNodeUnderLoad(t *testing.T) {
	underLoad(t, startS3Cluster, func(t *testing.T, ms []*member) {
		hung := ms[len(ms)-1]
		hung.node().Signal(t, syscall.SIGSTOP)
		time.Sleep(8 * time.Second) // fenced after 5 s
		hung.node().Signal(t, syscall.SIGCONT)
		assert.NotEqual(t, 0, hung.node().Wait(t, 30*time.Second), "the fenced node exits non-zero")
		restart(t, ms, hung)
	})
}

// TestIdempotencyKeysThroughFaults increments counters with an
// Idempotency-Key each, sent again with the same key after every answer
// but a 200, while the holders are killed (SIGKILL), stopped (SIGTERM) and
// hung (SIGSTOP) in turn: every counter ends at exactly the number of keys
// that succeeded, and every key succeeds. On S3 (see startS3Cluster).
func TestIdempotencyKeysThroughFaults(t *testing.T) {
	ms := startS3Cluster(t, 3)
	l := newExactLoad(ms, 12)
	stop := l.start(6, true)
	time.Sleep(time.Second)
	ms[0].node().Signal(t, syscall.SIGKILL)
	ms[0].node().Wait(t, 10*time.Second)
	time.Sleep(6 * time.Second)
	restart(t, ms, ms[0])
	time.Sleep(time.Second)
	ms[1].node().Signal(t, syscall.SIGTERM)
	assert.Equal(t, 0, ms[1].node().Wait(t, 30*time.Second))
	restart(t, ms, ms[1])
	time.Sleep(time.Second)
	ms[2].node().Signal(t, syscall.SIGSTOP)
	time.Sleep(7 * time.Second)
	ms[2].node().Signal(t, syscall.SIGCONT)
	assert.NotEqual(t, 0, ms[2].node().Wait(t, 30*time.Second), "the fenced node exits non-zero")
	restart(t, ms, ms[2])
	time.Sleep(time.Second)
	stop()
	total := l.check(t, true)
	assert.Greater(t, total.keys, 100)
}
