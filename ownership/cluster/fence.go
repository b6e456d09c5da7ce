package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Reasons Fence refuses, for callers to branch on.
var (
	// ErrUnknownNode: the node has no lease record.
	ErrUnknownNode = errors.New("unknown node")
	// ErrAlreadyFenced: the node's lease is fenced already.
	ErrAlreadyFenced = errors.New("already fenced")
	// ErrReleased: the node stopped cleanly; its records are free already.
	ErrReleased = errors.New("lease released")
	// ErrChanged: the lease record changed between the read and the write
	// (the node renewed it, or someone else fenced it); nothing was written.
	ErrChanged = errors.New("lease changed while fencing")
)

// Fenced is what Fence wrote.
type Fenced struct {
	// Before is the lease as read, After as written.
	Before, After ownership.Lease
	// Prior is the version the write replaced; ETag the version it made
	// (empty when the outcome is unknown).
	Prior, ETag ownership.ETag
}

// Fence writes node's lease record as fenced: same node and instance, the
// next sequence number, the given nonce, and If-Match on the version read.
// Every record naming a fenced node is free to acquire; a node still alive
// finds the fence at its next renewal and exits.
//
// Errors: ErrUnknownNode, ErrAlreadyFenced, ErrReleased, ErrChanged, an
// ownership.ErrUnreadable lease, or the bucket's error. When the write's
// outcome is unknown the error wraps ownership.ErrUnknownOutcome and Fenced
// says what was sent: the fence may have landed, or may still land.
func Fence(ctx context.Context, b ownership.Bucket, node ownership.NodeID, nonce string) (Fenced, error) {
	if err := ownership.ValidateNodeID(node); err != nil {
		return Fenced{}, err
	}
	if nonce == "" {
		return Fenced{}, errors.New("fence: empty nonce")
	}
	key := ownership.NodeKey(node)
	obj, err := b.Get(ctx, key)
	switch {
	case errors.Is(err, ownership.ErrNotFound):
		return Fenced{}, fmt.Errorf("node %s: %w: no lease record at %s", node, ErrUnknownNode, key)
	case err != nil:
		return Fenced{}, fmt.Errorf("node %s: read %s: %w", node, key, err)
	}
	l, err := ownership.DecodeLease(obj.Body)
	if err != nil {
		return Fenced{}, fmt.Errorf("node %s: %s: %w", node, key, err)
	}
	if l.Node != node {
		return Fenced{}, fmt.Errorf("node %s: %w: %s holds the lease of node %q", node, ownership.ErrUnreadable, key, l.Node)
	}
	switch l.State {
	case ownership.LeaseFenced:
		return Fenced{}, fmt.Errorf("node %s (instance %s): %w", node, l.Instance, ErrAlreadyFenced)
	case ownership.LeaseReleased:
		return Fenced{}, fmt.Errorf("node %s (instance %s): %w: it stopped cleanly and holds nothing", node, l.Instance, ErrReleased)
	}
	after := l
	after.State, after.Seq, after.Nonce = ownership.LeaseFenced, l.Seq+1, nonce
	f := Fenced{Before: l, After: after, Prior: obj.ETag}
	f.ETag, err = b.Put(ctx, key, ownership.EncodeLease(after), ownership.IfMatch(obj.ETag))
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
		return f, nil
	case ownership.Refused:
		return Fenced{}, fmt.Errorf("node %s: %w (%v)", node, ErrChanged, err)
	case ownership.Unknown:
		return f, fmt.Errorf("node %s: write the fence: %w", node, err)
	}
	return Fenced{}, fmt.Errorf("node %s: write the fence: %w", node, err)
}
