package ownership

import (
	"errors"
	"fmt"
	"time"
)

// Config is one node's ownership configuration. It is immutable once a Core
// holds it; Validate says whether it can keep the protocol's promises.
type Config struct {
	Node     NodeID
	Instance InstanceID
	// Addr is where peers reach this node (written into its lease record).
	Addr string

	// LeasePeriod is how often the lease is renewed.
	LeasePeriod time.Duration
	// LeaseTTL is how long a lease record may stay unchanged before peers may
	// judge the node dead (together with Grace).
	LeaseTTL time.Duration
	// Safety is taken off the TTL on this node's side: the lease is valid until
	// the send time of the last acknowledged renewal plus TTL minus Safety.
	Safety time.Duration
	// Grace is added to the TTL on the watcher's side before it fences.
	Grace time.Duration

	// AttemptTimeout bounds one bucket call; a write with no answer by then
	// is unknown.
	AttemptTimeout time.Duration
	// ResolverWatch is how long an unresolved acquire whose record is still
	// unchanged stays under watch: past it, no late landing of the write is
	// expected. Must exceed AttemptTimeout by a good margin.
	ResolverWatch time.Duration
	// ReleaseBackoff and ReleaseBackoffMax pace the retries of pending
	// releases (doubling, capped).
	ReleaseBackoff    time.Duration
	ReleaseBackoffMax time.Duration
	// FailoverWait bounds how long an event waits for an actor whose owner is
	// dead (until a fence frees it) before it is refused.
	FailoverWait time.Duration
	// SweepPeriod is the sweep's period: the sweeper sends the core a
	// Sweep input this often. Every RereadEvery-th pass re-reads parked
	// records, at most SweepBatch a pass.
	SweepPeriod time.Duration
	SweepBatch  int
	RereadEvery int
	// EndWait bounds how long a hold that stopped acting (drain, stop, move,
	// lapse) waits for the shell to confirm its instance ended before it is
	// released anyway. It should exceed the per-event time limit.
	EndWait time.Duration
	// MoveLook is how long the holder's side of a move keeps reading the record
	// of a moved room whose sockets are still here.
	MoveLook time.Duration
	// TakeOver lets this instance replace a lease still live under another
	// instance of the same node. It then waits a TTL before acting.
	TakeOver bool
	// PredecessorGone says the shell has proved that every earlier instance
	// of this node has ended and can write nothing more to the bucket (the
	// directory store's claim on the node, held by a running process and
	// released only with it). A lease naming another instance is then
	// replaced at once, and this instance acts at once: nothing of the one
	// before can still land.
	PredecessorGone bool
}

// DefaultConfig holds the defaults of docs/PROTOCOL.md §2.
func DefaultConfig(node NodeID, instance InstanceID) Config {
	return Config{
		Node:              node,
		Instance:          instance,
		LeasePeriod:       2500 * time.Millisecond,
		LeaseTTL:          10 * time.Second,
		Safety:            2 * time.Second,
		Grace:             5 * time.Second,
		AttemptTimeout:    2 * time.Second,
		ResolverWatch:     30 * time.Second,
		ReleaseBackoff:    250 * time.Millisecond,
		ReleaseBackoffMax: 4 * time.Second,
		FailoverWait:      30 * time.Second,
		SweepPeriod:       time.Minute,
		SweepBatch:        5000,
		RereadEvery:       10,
		MoveLook:          2 * time.Minute,
		EndWait:           10 * time.Second,
	}
}

// Validate refuses a configuration under which the lease cannot protect
// holds, naming the reason.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := ValidateNodeID(c.Node); err != nil {
		errs = append(errs, err)
	}
	if c.Instance == "" {
		bad("instance id is empty")
	}
	if c.LeasePeriod <= 0 || c.LeaseTTL <= 0 || c.Safety <= 0 || c.Grace < 0 {
		bad("lease period, ttl and safety must be positive, grace not negative (period %v, ttl %v, safety %v, grace %v)",
			c.LeasePeriod, c.LeaseTTL, c.Safety, c.Grace)
	} else {
		// A renewal must be able to land, after a period and an attempt, before
		// the lease it extends lapses; otherwise the node lapses in steady state.
		if c.LeasePeriod+c.AttemptTimeout >= c.LeaseTTL-c.Safety {
			bad("lease period %v plus attempt timeout %v must be shorter than ttl %v minus safety %v, or the lease lapses between renewals",
				c.LeasePeriod, c.AttemptTimeout, c.LeaseTTL, c.Safety)
		}
		if c.Safety >= c.LeaseTTL {
			bad("safety %v must be shorter than ttl %v", c.Safety, c.LeaseTTL)
		}
	}
	if c.AttemptTimeout <= 0 {
		bad("attempt timeout must be positive, got %v", c.AttemptTimeout)
	}
	if c.ResolverWatch < 2*c.AttemptTimeout {
		bad("resolver watch %v must be at least twice the attempt timeout %v, or a late-landing acquire can leak", c.ResolverWatch, c.AttemptTimeout)
	}
	if c.ReleaseBackoff <= 0 || c.ReleaseBackoffMax < c.ReleaseBackoff {
		bad("release backoff %v must be positive and not above its cap %v", c.ReleaseBackoff, c.ReleaseBackoffMax)
	}
	if c.FailoverWait < 0 {
		bad("failover wait must not be negative")
	}
	if c.SweepPeriod <= 0 || c.SweepBatch <= 0 || c.RereadEvery <= 0 {
		bad("sweep period, batch and re-read interval must be positive")
	}
	if c.MoveLook <= 0 {
		bad("move look must be positive")
	}
	if c.EndWait <= 0 {
		bad("end wait must be positive")
	}
	return errors.Join(errs...)
}

// validFor is how long an acknowledged renewal keeps the lease valid, counted
// from the renewal's send time.
func (c Config) validFor() time.Duration { return c.LeaseTTL - c.Safety }

// deadAfter is how long a watcher waits, on its own clock, for a peer's lease
// record to change before it judges the peer dead.
func (c Config) deadAfter() time.Duration { return c.LeaseTTL + c.Grace }

// ValidateNodeID accepts 1 to 64 bytes of letters, digits, '.', '_' and '-':
// a node id names its lease record and appears in logs and metrics.
func ValidateNodeID(n NodeID) error {
	if n == "" || len(n) > 64 {
		return fmt.Errorf("node id %q must be 1 to 64 bytes long", n)
	}
	for _, r := range n {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("node id %q may hold only letters, digits, '.', '_' and '-'", n)
		}
	}
	return nil
}
