package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Status is what the bucket says of a cluster.
type Status struct {
	// ReadAt is the reader's clock when the read began.
	ReadAt time.Time `json:"read_at"`
	// Nodes are every node with a lease record or named by an ownership
	// record, in order of node id.
	Nodes []Node `json:"nodes"`
	// Held and Free count the readable ownership records.
	Held int `json:"records_held"`
	Free int `json:"records_free"`
	// Unreadable names the records that could not be read or decoded, in
	// key order; lease records among them too.
	Unreadable []Unreadable `json:"unreadable"`
}

// Node is one node as its lease record and the ownership records show it.
type Node struct {
	Node ownership.NodeID `json:"node"`
	// Lease is the node's lease record; nil when it has none (ownership
	// records still name it) or it is unreadable (see Status.Unreadable).
	Lease *Lease `json:"lease,omitempty"`
	// RecordsHeld and RecordsFree count the ownership records naming the
	// node, held or free (a free record keeps its last holder).
	RecordsHeld int `json:"records_held"`
	RecordsFree int `json:"records_free"`
	// RecordsHeldEnded counts those of RecordsHeld whose holder has ended:
	// they name another instance than the node's lease, or the lease is
	// fenced or released. Any node may acquire them (unless the record
	// names a newer instance whose lease write this read missed).
	RecordsHeldEnded int `json:"records_held_ended"`
	// DrainRequested: an operator's drain request for the node is in the
	// bucket (`cluster drain`); the node drains within a lease period.
	DrainRequested bool `json:"drain_requested"`
	// DrainBy is who asked for it, and why, as the request says.
	DrainBy string `json:"drain_by,omitempty"`
	// Classes are the classes the node serves, as it published them when
	// it started (ownership.ClassesKey); ClassesInstance is the instance
	// that published them, which is the lease's unless the node has not
	// published since it started (or it is of a version that does not).
	Classes         []string             `json:"classes"`
	ClassesInstance ownership.InstanceID `json:"classes_instance,omitempty"`

	heldBy map[ownership.InstanceID]int
}

// Lease is a node's lease record as read.
type Lease struct {
	Instance ownership.InstanceID `json:"instance"`
	State    ownership.LeaseState `json:"state"`
	Addr     string               `json:"address"`
	TTL      Millis               `json:"ttl_ms"`
	Seq      uint64               `json:"seq"`
	ETag     ownership.ETag       `json:"etag"`
	// WrittenAt is the writer's clock at its last write of the record (zero
	// when the record does not say); Age is ReadAt minus it, a comparison
	// of two machines' clocks, negative when the writer's runs ahead.
	WrittenAt time.Time `json:"written_at,omitzero"`
	Age       Millis    `json:"age_ms"`
	// Held and Parked are the counts the node published at that write.
	Held   uint64 `json:"held"`
	Parked uint64 `json:"parked"`
}

// Unreadable is one record that could not be read or decoded.
type Unreadable struct {
	Key string `json:"key"`
	Err string `json:"error"`
}

// Millis is a duration that JSON shows in milliseconds.
type Millis time.Duration

// MarshalJSON writes whole milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprint(time.Duration(m).Milliseconds())), nil
}

// readers bounds the concurrent record reads of ReadStatus: enough to hide
// a remote store's latency, few enough not to look like a flood.
const readers = 8

// ReadStatus lists the node lease records and the ownership records of the
// bucket and reads every one. now is the reader's clock, for lease ages.
func ReadStatus(ctx context.Context, b ownership.Bucket, now time.Time) (Status, error) {
	st := Status{ReadAt: now, Nodes: []Node{}, Unreadable: []Unreadable{}}
	listed, err := listAll(ctx, b, ownership.NodesPrefix)
	if err != nil {
		return Status{}, err
	}
	// Drain requests lie beside the leases (ownership.DrainRequestKey).
	var nodeKeys, drainKeys []string
	for _, k := range listed {
		if strings.HasSuffix(k, drainSuffix) {
			drainKeys = append(drainKeys, k)
		} else {
			nodeKeys = append(nodeKeys, k)
		}
	}
	ownerKeys, err := listAll(ctx, b, ownership.OwnersPrefix)
	if err != nil {
		return Status{}, err
	}
	classKeys, err := listAll(ctx, b, ownership.ClassesPrefix)
	if err != nil {
		return Status{}, err
	}
	nodeReads := readAll(ctx, b, nodeKeys)
	ownerReads := readAll(ctx, b, ownerKeys)
	classReads := readAll(ctx, b, classKeys)
	drainReads := readAll(ctx, b, drainKeys)
	if err := ctx.Err(); err != nil {
		// Reads cut short say nothing of the records: no status.
		return Status{}, fmt.Errorf("read the bucket: %w", err)
	}

	nodes := map[ownership.NodeID]*Node{}
	node := func(id ownership.NodeID) *Node {
		n := nodes[id]
		if n == nil {
			n = &Node{Node: id}
			nodes[id] = n
		}
		return n
	}
	bad := func(key string, err error) {
		st.Unreadable = append(st.Unreadable, Unreadable{Key: key, Err: err.Error()})
	}

	// body is what a read of key found, false when there is nothing to
	// count: deleted since the listing, or unreadable (noted).
	body := func(key string, r read) ([]byte, bool) {
		switch {
		case errors.Is(r.err, ownership.ErrNotFound):
			return nil, false
		case r.err != nil:
			bad(key, r.err)
			return nil, false
		}
		return r.obj.Body, true
	}

	for i, key := range nodeKeys {
		b, ok := body(key, nodeReads[i])
		if !ok {
			continue
		}
		l, err := ownership.DecodeLease(b)
		if err != nil {
			bad(key, err)
			continue
		}
		if ownership.NodeKey(l.Node) != key {
			bad(key, fmt.Errorf("%w: the lease of node %q is stored under another key", ownership.ErrUnreadable, l.Node))
			continue
		}
		lease := &Lease{
			Instance: l.Instance, State: l.State, Addr: l.Addr, TTL: Millis(time.Duration(l.TTLMilli) * time.Millisecond),
			Seq: l.Seq, ETag: nodeReads[i].obj.ETag, Held: l.Held, Parked: l.Parked,
		}
		if l.WrittenAt > 0 {
			lease.WrittenAt = time.UnixMilli(l.WrittenAt).UTC()
			lease.Age = Millis(now.Sub(lease.WrittenAt))
		}
		node(l.Node).Lease = lease
	}

	for i, key := range classKeys {
		b, ok := body(key, classReads[i])
		if !ok {
			continue
		}
		c, err := ownership.DecodeNodeClasses(b)
		if err != nil {
			bad(key, err)
			continue
		}
		if ownership.ClassesKey(c.Node) != key {
			bad(key, fmt.Errorf("%w: the classes of node %q are stored under another key", ownership.ErrUnreadable, c.Node))
			continue
		}
		n := node(c.Node)
		n.Classes, n.ClassesInstance = append([]string{}, c.Classes...), c.Instance
	}

	for i, key := range drainKeys {
		lease := strings.TrimSuffix(key, drainSuffix)
		seg, err := ownership.UnescapeSegment(lease[len(ownership.NodesPrefix):])
		if err != nil {
			bad(key, fmt.Errorf("%w: a drain request for no node id: %w", ownership.ErrUnreadable, err))
			continue
		}
		n := node(ownership.NodeID(seg))
		n.DrainRequested = true
		var req DrainRequest
		if b, ok := body(key, drainReads[i]); ok && json.Unmarshal(b, &req) == nil {
			n.DrainBy = req.By
		}
	}

	for i, key := range ownerKeys {
		b, ok := body(key, ownerReads[i])
		if !ok {
			continue
		}
		rec, err := ownership.DecodeRecord(b)
		if err != nil {
			bad(key, err)
			continue
		}
		if ownership.OwnerKey(ownership.Actor{Class: rec.Class, Name: rec.Name}) != key {
			bad(key, fmt.Errorf("%w: the record of actor %s/%s is stored under another key", ownership.ErrUnreadable, rec.Class, rec.Name))
			continue
		}
		n := node(rec.Node)
		if rec.Held {
			n.RecordsHeld++
			st.Held++
			if n.heldBy == nil {
				n.heldBy = map[ownership.InstanceID]int{}
			}
			n.heldBy[rec.Instance]++
		} else {
			n.RecordsFree++
			st.Free++
		}
	}

	for _, n := range nodes {
		if l := n.Lease; l != nil {
			for inst, count := range n.heldBy {
				if inst != l.Instance || l.State == ownership.LeaseFenced || l.State == ownership.LeaseReleased {
					n.RecordsHeldEnded += count
				}
			}
		}
		n.heldBy = nil
		st.Nodes = append(st.Nodes, *n)
	}
	slices.SortFunc(st.Nodes, func(a, b Node) int { return strings.Compare(string(a.Node), string(b.Node)) })
	slices.SortFunc(st.Unreadable, func(a, b Unreadable) int { return strings.Compare(a.Key, b.Key) })
	return st, nil
}

// listAll lists every key under prefix, page after page.
func listAll(ctx context.Context, b ownership.Bucket, prefix string) ([]string, error) {
	var keys []string
	after := ""
	for {
		page, err := b.List(ctx, prefix, after, 0)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, e := range page.Entries {
			keys = append(keys, e.Key)
		}
		if !page.Truncated {
			return keys, nil
		}
		if len(page.Entries) == 0 {
			return nil, fmt.Errorf("list %s: the store said more keys follow %q but gave none", prefix, after)
		}
		after = page.Entries[len(page.Entries)-1].Key
	}
}

type read struct {
	obj ownership.Object
	err error
}

// readAll reads keys with a few readers; result i is the read of keys[i].
func readAll(ctx context.Context, b ownership.Bucket, keys []string) []read {
	out := make([]read, len(keys))
	inParallel(readers, len(keys), func(i int) {
		obj, err := b.Get(ctx, keys[i])
		out[i] = read{obj: obj, err: err}
	})
	return out
}

// inParallel calls fn(i) for every i in [0, count) on at most n
// goroutines, and returns once every call has.
func inParallel(n, count int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, count) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
}
