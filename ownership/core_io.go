package ownership

import (
	"fmt"
	"time"
)

// RequestID names one bucket request the core asked for; the reply carries it
// back. IDs are never reused by a core.
type RequestID uint64

// Op is a bucket operation.
type Op uint8

const (
	OpGet Op = iota + 1
	OpPut
	OpDelete
	OpList
)

func (o Op) String() string {
	switch o {
	case OpGet:
		return "get"
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpList:
		return "list"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Input is what a shell feeds a Core: events, bucket replies, timer firings.
type Input interface{ isInput() }

// Start begins the node: read and take the node lease, then serve.
type Start struct{}

// Tick tells the core that time has passed (a timer it asked for fired, or
// any other wake-up). The core does whatever is due at the step's time.
type Tick struct{}

// Reply is the answer to a Request. Outcome is what the bucket call gave
// (OutcomeOf its error); ETag, Body and Page are set as the call returns them.
type Reply struct {
	ID      RequestID
	Outcome Outcome
	ETag    ETag
	Body    []byte
	Page    ListPage
	Err     error // the store's error, for reports; never branched on
}

// Acquire asks for a live hold on an actor for one event. The core answers
// with exactly one Grant, Route or Refuse carrying the same Ref.
type Acquire struct {
	Actor Actor
	Ref   uint64
}

// Idle says the resident actor left memory (the idle timeout or
// an eviction) while its hold at Gen was live: the core parks the hold when
// the rules allow, and releases it otherwise.
type Idle struct {
	Actor Actor
	Gen   Generation
}

// HoldEnded says a live hold ended any other way (a failed restore, a
// supervisor giving up): the core releases it.
type HoldEnded struct {
	Actor  Actor
	Gen    Generation
	Reason string
}

// SocketOpened and SocketGone count the actor's sockets on this node that
// are open and not closing. SocketGone is sent once a socket starts closing
// or its slot is freed, whichever comes first, exactly once per socket.
type SocketOpened struct{ Actor Actor }
type SocketGone struct{ Actor Actor }

// Drain hands the node's actors over: every parked record and live hold is
// released, every pass, until nothing is left; the lease says draining.
type Drain struct{}

// Undrain takes a drain back: the node serves again. What it released
// meanwhile is acquired again by the next events, here or on a peer.
type Undrain struct{}

// Stop is a clean stop: release everything, then write the lease released.
type Stop struct{}

// StopNow ends a clean stop that waits too long: the lease is written
// released (which frees whatever release did not land) without further waiting.
type StopNow struct{}

// Move moves an actor held or parked here to another node.
type Move struct {
	Actor  Actor
	Target NodeID
}

// Sweep runs one pass of the sweep (docs/PROTOCOL.md §5). The sweeper
// sends it every Config.SweepPeriod; the core decides what the pass reads,
// releases and closes. A core that is not serving ignores it.
type Sweep struct{}

// Moved says a move's target took the actor (its take call was
// answered): events for it are no longer sent to the target blindly, but
// routed by its record like any other's.
type Moved struct{ Actor Actor }

// PeerUnreachable says a connection to a peer could not be made (a
// forward to it was refused): the core reads the peer's lease again now,
// rather than at its next listing, so that a fence an operator wrote (or
// a release) is seen at once. At most one read a quarter lease period.
type PeerUnreachable struct{ Node NodeID }

// SecretsLost says the app's secrets cannot be opened here: the node drains.
type SecretsLost struct{}

// DamageFound says a reader outside the core (a resident actor loading its
// state) found the object at Key damaged (ErrDamaged; Err says how). The
// core counts it and reports it, once per key, as it does the damage its
// own reads find; nothing else changes.
type DamageFound struct {
	Key string
	Err error
}

func (Start) isInput()           {}
func (Tick) isInput()            {}
func (Reply) isInput()           {}
func (Acquire) isInput()         {}
func (Idle) isInput()            {}
func (HoldEnded) isInput()       {}
func (SocketOpened) isInput()    {}
func (SocketGone) isInput()      {}
func (Drain) isInput()           {}
func (Undrain) isInput()         {}
func (Stop) isInput()            {}
func (StopNow) isInput()         {}
func (Move) isInput()            {}
func (Moved) isInput()           {}
func (PeerUnreachable) isInput() {}
func (Sweep) isInput()           {}
func (SecretsLost) isInput()     {}
func (DamageFound) isInput()     {}

// Effect is what a Core asks its shell to do. Effects are data; the order in
// which a step returns them is the order to carry them out.
type Effect interface{ isEffect() }

// Request asks for one bucket call. The shell answers with a Reply of the
// same ID, whatever happens (an unknown outcome included).
type Request struct {
	ID         RequestID
	Op         Op
	Key        string
	Body       []byte
	Cond       Condition
	StartAfter string // OpList: the prefix is Key
	Limit      int
}

// Grant: the event of Ref may run, as owner at generation Gen. State, when
// set, is the actor's state object as this acquisition's seal left it (see
// Sealed): the hold's first load may take it instead of reading it again.
type Grant struct {
	Actor Actor
	Ref   uint64
	Gen   Generation
	State *Sealed
}

// Route: another live process holds the actor; send the event there.
type Route struct {
	Actor Actor
	Ref   uint64
	Node  NodeID
	Addr  string
	// Instance is the holder's instance, as its lease last read here
	// names it: a request sent to it is signed for that instance, so that
	// no later start of the node takes it.
	Instance InstanceID
}

// Refuse: the event cannot be served here now (HTTP 503 with Retry-After).
// Draining says the node no longer takes actors: a peer should be asked.
// Damaged, when set, is the key of the actor's object (its ownership record
// or its state) that is damaged in the bucket: no node can serve the actor
// until a person restores it, so it is an error (HTTP 500), not a refusal
// to retry, and RetryAfter is zero.
type Refuse struct {
	Actor      Actor
	Ref        uint64
	Reason     string
	RetryAfter time.Duration
	Draining   bool
	Damaged    string
	// Peer and PeerAddr name the live peer to send the event on to, when
	// Draining and there is one (see PeerFor).
	Peer         NodeID
	PeerAddr     string
	PeerInstance InstanceID
}

// StopActing: the hold at Gen is no longer live; drop the resident actor
// and release nothing it produces.
type StopActing struct {
	Actor  Actor
	Gen    Generation
	Reason string
}

// CloseSockets: close sockets with Code. All means every socket of the node;
// otherwise those of Actor.
type CloseSockets struct {
	All    bool
	Actor  Actor
	Code   int
	Reason string
}

// SetTimer: deliver a Tick at At (replacing any earlier request).
type SetTimer struct{ At time.Time }

// Count adds to a counter; SetGauge sets a gauge.
type Count struct {
	Name  string
	Label string
	Add   float64
}
type SetGauge struct {
	Name  string
	Value float64
}

// Observe records one observation of a histogram (seconds).
type Observe struct {
	Name  string
	Value float64
}

// LeaseChanged reports the node's lease becoming valid or not.
type LeaseChanged struct {
	Valid bool
	State string
}

// Report carries something the shell should log: a damaged object (once
// per key), a refused fence, a lapse. Level is "info", "warn", or "error"
// for damage in the bucket, which a person must repair.
type Report struct {
	Level string
	Msg   string
	Key   string
	Err   error
}

// Take asks the target of a move to take the actor. Addr is the target's
// address as its lease gives it ("" when its lease is not known here).
type Take struct {
	Actor    Actor
	Target   NodeID
	Addr     string
	Instance InstanceID // the target's, as its lease last read here names it
}

// DrainChanged reports that the node began draining (Draining, with why:
// asked by Drain, by a request in the bucket, by SecretsLost) or that a
// drain was taken back.
type DrainChanged struct {
	Draining bool
	Why      string
}

// MoveRequests reports move requests for this node that the membership
// listing found and had not found before (keys under MoveRequestPrefix):
// the mover reads each and asks for the move. A key is reported once while
// it stays listed.
type MoveRequests struct{ Keys []string }

// Drained reports that a drain has nothing left: no live hold, no parked
// record, nothing pending.
type Drained struct{}

// Exit: the core has stopped. Clean is true after a clean stop; otherwise
// Reason says why (a lost lease, a twin) and the process should exit non-zero.
type Exit struct {
	Clean  bool
	Reason string
}

func (Request) isEffect()      {}
func (Grant) isEffect()        {}
func (Route) isEffect()        {}
func (Refuse) isEffect()       {}
func (StopActing) isEffect()   {}
func (CloseSockets) isEffect() {}
func (SetTimer) isEffect()     {}
func (Count) isEffect()        {}
func (SetGauge) isEffect()     {}
func (Observe) isEffect()      {}
func (LeaseChanged) isEffect() {}
func (Report) isEffect()       {}
func (Take) isEffect()         {}
func (DrainChanged) isEffect() {}
func (MoveRequests) isEffect() {}
func (Drained) isEffect()      {}
func (Exit) isEffect()         {}

// CloseServiceRestart is the WebSocket close code for drains, moves, lapses
// and stops (1012, service restart).
const CloseServiceRestart = 1012

// Metric names the core counts under (the shell exports them).
const (
	MetricParkedRecords     = "wasmkeep_parked_records"
	MetricParkedWakes       = "wasmkeep_parked_wakes_total"
	MetricParkedReleases    = "wasmkeep_parked_releases_total"
	MetricAcquisitions      = "wasmkeep_acquisitions_total"
	MetricReleases          = "wasmkeep_releases_total"
	MetricPendingReleases   = "wasmkeep_pending_releases"
	MetricPendingRetries    = "wasmkeep_pending_release_retries_total"
	MetricResolver          = "wasmkeep_resolver_outcomes_total"
	MetricLeaseRenewSeconds = "wasmkeep_lease_renew_seconds"
	MetricLeaseLapses       = "wasmkeep_lease_lapses_total"
	MetricFences            = "wasmkeep_fences_total"
	MetricUnreadable        = "wasmkeep_unreadable_records_total"
	MetricDamaged           = "wasmkeep_bucket_damaged_total"
	MetricSweepUnreadable   = "wasmkeep_websocket_sweep_unreadable_total"
	MetricOwnerCloses       = "wasmkeep_websocket_owner_closes_total"
	MetricRoutes            = "wasmkeep_routes_total"
	MetricLiveHolds         = "wasmkeep_live_holds"
)
