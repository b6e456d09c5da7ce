package keeper

import "github.com/wasmkeep/wasmkeep/ownership"

// Hooks receives the Core's effects meant for the rest of the node.
//
// Every method is called on the keeper actor's goroutine, one call at a
// time, in the order the Core emitted the effects; none may block (no I/O,
// no waiting for another actor): send a message and return. A panicking hook
// ends the keeper like a panicking Core.
//
// Embed NopHooks to implement only some of them.
type Hooks interface {
	// StopActing: the hold at the given generation is no longer live. Drop
	// the resident actor and release nothing it produces from now on.
	StopActing(ownership.StopActing)
	// CloseSockets: close sockets with the given code, every socket of the
	// node when All is set, else those of the actor.
	CloseSockets(ownership.CloseSockets)
	// Take: a move's release landed; ask the target node to take the actor.
	Take(ownership.Take)
	// Drained: a drain has nothing left here.
	Drained()
	// DrainChanged: the node began draining, or a drain was taken back.
	DrainChanged(ownership.DrainChanged)
	// MoveRequests: the membership listing found move requests for this
	// node (cluster move).
	MoveRequests(ownership.MoveRequests)
	// LeaseChanged: the node's lease became valid, or stopped being valid.
	LeaseChanged(ownership.LeaseChanged)
	// Abandoned: an acquisition was granted after its caller stopped
	// waiting (Acquire's context ended). The hold is live at gen and
	// nobody runs an event under it: unless the actor is resident here
	// at that generation, end it with Idle, or it stays live
	// until the node stops.
	Abandoned(actor ownership.Actor, gen ownership.Generation)
	// Exit: the keeper has ended. A clean exit follows Stop, with every
	// record released. Otherwise (a lost lease, a twin, a broken keeper)
	// every hold is gone without release and every socket must close:
	// StopActing and CloseSockets may not have been called for each of
	// them, so stop everything, and exit the process non-zero.
	Exit(ownership.Exit)
}

// NopHooks ignores every effect. It is the default Hooks.
type NopHooks struct{}

func (NopHooks) StopActing(ownership.StopActing)                 {}
func (NopHooks) CloseSockets(ownership.CloseSockets)             {}
func (NopHooks) Take(ownership.Take)                             {}
func (NopHooks) Drained()                                        {}
func (NopHooks) DrainChanged(ownership.DrainChanged)             {}
func (NopHooks) MoveRequests(ownership.MoveRequests)             {}
func (NopHooks) LeaseChanged(ownership.LeaseChanged)             {}
func (NopHooks) Abandoned(ownership.Actor, ownership.Generation) {}
func (NopHooks) Exit(ownership.Exit)                             {}

var _ Hooks = NopHooks{}
