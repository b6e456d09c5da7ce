package keeper

import (
	"context"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Execute makes the bucket call a Request asks for and returns its Reply.
// It is how every shell (this one, the simulation) answers the core's
// requests; it adds no retry and no interpretation beyond
// ownership.OutcomeOf.
func Execute(ctx context.Context, b ownership.Bucket, req ownership.Request) ownership.Reply {
	r := ownership.Reply{ID: req.ID}
	var err error
	switch req.Op {
	case ownership.OpGet:
		var obj ownership.Object
		obj, err = b.Get(ctx, req.Key)
		r.Body, r.ETag = obj.Body, obj.ETag
	case ownership.OpPut:
		r.ETag, err = b.Put(ctx, req.Key, req.Body, req.Cond)
	case ownership.OpDelete:
		err = b.Delete(ctx, req.Key, req.Cond)
	case ownership.OpList:
		r.Page, err = b.List(ctx, req.Key, req.StartAfter, req.Limit)
	default:
		err = fmt.Errorf("unknown bucket operation %v", req.Op)
	}
	r.Outcome, r.Err = ownership.OutcomeOf(err), err
	return r
}
