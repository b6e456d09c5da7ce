package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// drainSuffix ends a drain request's key (ownership.DrainRequestKey).
var drainSuffix = strings.TrimPrefix(ownership.DrainRequestKey("x"), ownership.NodeKey("x"))

// ErrNoDrainRequest: the node has no drain request to take back.
var ErrNoDrainRequest = errors.New("no drain request")

// DrainRequest is what a drain request holds, for people reading the
// bucket: the node acts on the object being there, not on its content.
type DrainRequest struct {
	Node        ownership.NodeID `json:"node"`
	RequestedAt time.Time        `json:"requested_at"`
	By          string           `json:"by,omitempty"`
}

// RequestDrain asks node to drain: it writes the node's drain request,
// which the node sees in its next membership listing (within a lease
// period) and which every peer sees as well. It returns the node's lease
// as read. Errors: ErrUnknownNode (no lease record: no such node has ever
// run on this bucket), an ownership.ErrUnreadable lease, or the bucket's.
// A request already there is written again (it stays one request).
func RequestDrain(ctx context.Context, b ownership.Bucket, node ownership.NodeID, by string, now time.Time) (ownership.Lease, error) {
	l, err := readLease(ctx, b, node)
	if err != nil {
		return ownership.Lease{}, err
	}
	body, err := json.Marshal(DrainRequest{Node: node, RequestedAt: now.UTC(), By: by})
	if err != nil {
		return l, err
	}
	if _, err := b.Put(ctx, ownership.DrainRequestKey(node), body, ownership.Always()); err != nil {
		return l, fmt.Errorf("write the drain request of node %s: %w", node, err)
	}
	return l, nil
}

// TakeBackDrain deletes node's drain request: the node serves again
// within a lease period (what it handed over meanwhile is acquired again
// by the next events, on it or on a peer). Errors: ErrNoDrainRequest, or
// the bucket's.
func TakeBackDrain(ctx context.Context, b ownership.Bucket, node ownership.NodeID) error {
	if err := ownership.ValidateNodeID(node); err != nil {
		return err
	}
	key := ownership.DrainRequestKey(node)
	if _, err := b.Get(ctx, key); errors.Is(err, ownership.ErrNotFound) {
		return fmt.Errorf("node %s: %w", node, ErrNoDrainRequest)
	} else if err != nil {
		return fmt.Errorf("read the drain request of node %s: %w", node, err)
	}
	if err := b.Delete(ctx, key, ownership.Always()); err != nil {
		return fmt.Errorf("delete the drain request of node %s: %w", node, err)
	}
	return nil
}

// readLease reads and decodes node's lease record.
func readLease(ctx context.Context, b ownership.Bucket, node ownership.NodeID) (ownership.Lease, error) {
	if err := ownership.ValidateNodeID(node); err != nil {
		return ownership.Lease{}, err
	}
	obj, err := b.Get(ctx, ownership.NodeKey(node))
	if errors.Is(err, ownership.ErrNotFound) {
		return ownership.Lease{}, fmt.Errorf("node %s: %w", node, ErrUnknownNode)
	}
	if err != nil {
		return ownership.Lease{}, fmt.Errorf("read the lease of node %s: %w", node, err)
	}
	l, err := ownership.DecodeLease(obj.Body)
	if err != nil {
		return ownership.Lease{}, fmt.Errorf("lease of node %s: %w", node, err)
	}
	return l, nil
}

// MoveRequest is what a move request holds (ownership.MoveRequestPrefix):
// the actor and the node it is to go to.
type MoveRequest struct {
	Class       string           `json:"class"`
	Name        string           `json:"name"`
	Target      ownership.NodeID `json:"target"`
	RequestedAt time.Time        `json:"requested_at"`
	By          string           `json:"by,omitempty"`
}

// Actor is the actor the request moves.
func (m MoveRequest) Actor() ownership.Actor { return ownership.Actor{Class: m.Class, Name: m.Name} }

// Errors of RequestMove, for callers to branch on.
var (
	// ErrTargetNotLive: the target's lease is not live (released, fenced,
	// or unrenewed for longer than its ttl).
	ErrTargetNotLive = errors.New("target not live")
	// ErrTargetDraining: the target drains, or is asked to.
	ErrTargetDraining = errors.New("target draining")
	// ErrAlreadyThere: the target holds the actor already.
	ErrAlreadyThere = errors.New("already on the target")
	// ErrClassNotServed: the target does not serve the actor's class (as
	// it published when it started: ownership.ClassesKey).
	ErrClassNotServed = errors.New("class not served by the target")
)

// Move is what RequestMove wrote: to which node (the holder, or the
// target when nobody held the actor) and under which key.
type Move struct {
	To  ownership.NodeID
	Key string
	// Held: a live node held the actor (To), which moves it; otherwise
	// the target takes it.
	Held bool
	// Last is the node the actor's record named when nobody held it
	// live (its last holder), "" when it had no record.
	Last ownership.NodeID
}

// RequestMove asks for actor a to move to node target: it checks that the
// target is live (its lease live and written within its ttl, by the
// writer's clock against now) and not draining, reads the actor's record,
// and writes a move request for the node that acts on it: the live holder,
// which releases the actor and sends the target its take call, or the
// target itself when no live node holds it, which takes it. Errors:
// ErrUnknownNode, ErrTargetNotLive, ErrTargetDraining, ErrClassNotServed,
// ErrAlreadyThere, an unreadable lease or record, or the bucket's.
func RequestMove(ctx context.Context, b ownership.Bucket, a ownership.Actor, target ownership.NodeID, by string, nonce string, now time.Time) (Move, error) {
	if err := ownership.ValidateKey(ownership.OwnerKey(a)); err != nil || a.Class == "" || a.Name == "" {
		return Move{}, fmt.Errorf("actor %q: %w", a, errors.Join(err, errors.New("want CLASS/NAME")))
	}
	tl, err := readLease(ctx, b, target)
	if err != nil {
		return Move{}, err
	}
	switch age := now.Sub(time.UnixMilli(tl.WrittenAt)); {
	case tl.State == ownership.LeaseDraining:
		return Move{}, fmt.Errorf("node %s: %w", target, ErrTargetDraining)
	case tl.State != ownership.LeaseLive:
		return Move{}, fmt.Errorf("node %s: %w: its lease is %s", target, ErrTargetNotLive, tl.State)
	case tl.WrittenAt > 0 && age > time.Duration(tl.TTLMilli)*time.Millisecond:
		return Move{}, fmt.Errorf("node %s: %w: its lease was last written %s ago, over its ttl", target, ErrTargetNotLive, age.Round(time.Second))
	}
	if _, err := b.Get(ctx, ownership.DrainRequestKey(target)); err == nil {
		return Move{}, fmt.Errorf("node %s: %w (a drain is requested)", target, ErrTargetDraining)
	}
	if obj, err := b.Get(ctx, ownership.ClassesKey(target)); err == nil {
		// A node of an earlier version publishes nothing: it is asked as
		// before, and refuses an actor of a class it does not serve.
		c, err := ownership.DecodeNodeClasses(obj.Body)
		if err == nil && c.Instance == tl.Instance && !slices.Contains(c.Classes, a.Class) {
			return Move{}, fmt.Errorf("node %s: %w: %q (it serves %s)", target, ErrClassNotServed, a.Class, strings.Join(c.Classes, ", "))
		}
	}
	m := Move{To: target}
	obj, err := b.Get(ctx, ownership.OwnerKey(a))
	switch {
	case errors.Is(err, ownership.ErrNotFound):
	case err != nil:
		return Move{}, fmt.Errorf("read the record of %s/%s: %w", a.Class, a.Name, err)
	default:
		rec, err := ownership.DecodeRecord(obj.Body)
		if err != nil {
			return Move{}, fmt.Errorf("record of %s/%s: %w", a.Class, a.Name, err)
		}
		m.Last = rec.Node
		if rec.Held {
			hl, err := readLease(ctx, b, rec.Node)
			if err == nil && hl.Instance == rec.Instance && (hl.State == ownership.LeaseLive || hl.State == ownership.LeaseDraining) {
				if rec.Node == target {
					return Move{}, fmt.Errorf("%s/%s: %w (%s holds it)", a.Class, a.Name, ErrAlreadyThere, target)
				}
				m.To, m.Held = rec.Node, true
			}
		}
	}
	body, err := json.Marshal(MoveRequest{Class: a.Class, Name: a.Name, Target: target, RequestedAt: now.UTC(), By: by})
	if err != nil {
		return Move{}, err
	}
	m.Key = ownership.MoveRequestPrefix(m.To) + nonce
	if _, err := b.Put(ctx, m.Key, body, ownership.IfAbsent()); err != nil {
		return Move{}, fmt.Errorf("write the move request of %s/%s: %w", a.Class, a.Name, err)
	}
	return m, nil
}
