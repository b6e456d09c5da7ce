package node_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// countingBucket counts the node's bucket calls by operation and by the
// kind of key (owners/, actors/, nodes/).
type countingBucket struct {
	ownership.Bucket
	mu     sync.Mutex
	counts map[string]int
	// at, when set, takes the counts the moment at.what reaches at.n.
	at *countsAt
}

// countsAt is a take of the counts at the moment a count reaches n.
type countsAt struct {
	what string
	n    int
	done chan map[string]int
}

func (c *countingBucket) count(op, key string) {
	kind, _, _ := strings.Cut(key, "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[op+" "+kind]++
	if a := c.at; a != nil && c.counts[a.what] == a.n {
		c.at = nil
		a.done <- c.counts
		c.counts = map[string]int{}
	}
}

// takeAt waits until what (say "PUT nodes") has been counted n times since
// the last take, and returns the counts of that moment.
func (c *countingBucket) takeAt(t *testing.T, what string, n int, within time.Duration) map[string]int {
	t.Helper()
	a := &countsAt{what: what, n: n, done: make(chan map[string]int, 1)}
	c.mu.Lock()
	if c.counts[what] >= n {
		c.mu.Unlock()
		t.Fatalf("%s counted %d times already", what, c.counts[what])
	}
	c.at = a
	c.mu.Unlock()
	select {
	case counts := <-a.done:
		return counts
	case <-time.After(within):
		t.Fatalf("%s not counted %d times within %v", what, n, within)
		return nil
	}
}

func (c *countingBucket) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

func (c *countingBucket) Get(ctx context.Context, key string) (ownership.Object, error) {
	c.count("GET", key)
	return c.Bucket.Get(ctx, key)
}

func (c *countingBucket) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	c.count("PUT", key)
	return c.Bucket.Put(ctx, key, body, cond)
}

func (c *countingBucket) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	c.count("DELETE", key)
	return c.Bucket.Delete(ctx, key, cond)
}

func (c *countingBucket) List(ctx context.Context, prefix, after string, limit int) (ownership.ListPage, error) {
	c.count("LIST", prefix)
	return c.Bucket.List(ctx, prefix, after, limit)
}

// TestBucketRequestsPerOperation counts what a parked room's wake and a
// lease period cost in bucket requests, from a bucket that counts them:
// the wake seals the room's state (a read and a write) and writes its
// record over the version the parked hold knows, without reading it (3 in
// all); the room's state load takes the seal's copy, and the event commits
// once. A lease period costs one lease write and one membership listing
// per node, and a parked room costs nothing per period.
func TestBucketRequestsPerOperation(t *testing.T) {
	var b *countingBucket
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"chat": chat.Room{}}, IdleTimeout: 100 * time.Millisecond,
		Configure: func(c *node.Config) {
			b = &countingBucket{Bucket: c.Bucket, counts: map[string]int{}}
			c.Bucket = b
		}})
	ada := n.Join(t, "chat", "lobby", "ada")
	ada.AwaitPresence("ada")
	n.AwaitIdle(t, "chat/lobby")
	require.Eventually(t, func() bool { return n.Status().Parked == 1 }, nodetest.Wait, 5*time.Millisecond, "the room parks")

	// Two lease writes with the room parked (parking writes nothing): the
	// lease and the listing only, counted from one lease write to the
	// second after it.
	period := ownership.DefaultConfig("n1", "i1").LeasePeriod
	b.take()
	b.takeAt(t, "PUT nodes", 1, 2*period)
	idle := b.takeAt(t, "PUT nodes", 2, 3*period)
	assert.Zero(t, idle["GET owners"]+idle["PUT owners"]+idle["GET actors"]+idle["PUT actors"],
		"a parked room costs no request per period: %v", idle)
	// One membership listing a period; the window, two periods from a
	// lease write, is not in phase with the listings, so it holds three
	// when one falls just after its start and another just before its end.
	assert.LessOrEqual(t, idle["LIST nodes"], 3, "at most one membership listing per period: %v", idle)

	// The wake: a message to the parked room.
	ada.Say("wake up")
	ada.AwaitSaid("ada", "wake up")
	wake := b.take()
	t.Logf("a wake of a parked room: %v", wake)
	assert.Zero(t, wake["GET owners"], "no read of the record: %v", wake)
	assert.Equal(t, 1, wake["PUT owners"], "the record's write: %v", wake)
	assert.Equal(t, 1, wake["GET actors"], "the seal's read, which the state load shares: %v", wake)
	assert.Equal(t, 2, wake["PUT actors"], "the seal and the event's commit: %v", wake)
	assert.Equal(t, 3, wake["GET owners"]+wake["PUT owners"]+wake["GET actors"]+wake["PUT actors"]-1,
		"a wake costs 3 requests besides the event's commit: %v", wake)
}
