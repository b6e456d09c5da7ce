package actorhost

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/internal/actorstore"
)

// Test hooks for the external tests of the storage layout and of SQL.

// EncodeFormat1, Head and HeadOf: see package actorstore.
var (
	EncodeFormat1 = actorstore.EncodeFormat1
	HeadOf        = actorstore.HeadOf
)

// Head is what a state object's head lists.
type Head = actorstore.HeadInfo

// sqlCounter reads one of the counts of SQL connections.
type sqlCounter func() int64

// Load reads the count.
func (c sqlCounter) Load() int64 { return c() }

// The SQL connections opened so far, and those open now.
var SQLOpens, SQLLive = sqlCounter(actorstore.SQLOpened), sqlCounter(actorstore.SQLOpen)

// HoldRoomOutput makes every room actor call f before it sends the output
// of the events it was handed, and answers them. Call it before any event.
func (h *Host) HoldRoomOutput(f func()) { h.roomHold = f }

// System is the actor system h runs in.
func (h *Host) System() *actor.ActorSystem { return h.cfg.System }
