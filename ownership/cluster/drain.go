package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
