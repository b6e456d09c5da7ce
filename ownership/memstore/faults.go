package memstore

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Faults configures what a Store does wrong. The zero value is a faithful
// store. Probabilities are per request, in [0, 1], and at most one fault
// strikes a request, so their sum must not exceed 1. A range read
// (GetRange) is a read like a Get: the same faults strike it, so a test
// makes one fail (LoseRequest, UnavailableNotApplied, …) or hang until its
// context ends (MaxDelay) just as it does a Get.
type Faults struct {
	// Seed selects the sequence of faults; see the package doc for what
	// determinism it buys.
	Seed uint64

	// LoseRequest: the request never reaches the bucket. The caller gets
	// ErrUnknownOutcome at once (a real client would first wait for its
	// timeout; MaxDelay adds waiting where a test needs it); nothing is
	// applied.
	LoseRequest float64
	// LoseReply: the request is applied, its reply is lost. The caller gets
	// ErrUnknownOutcome although a write landed (or was refused).
	LoseReply float64
	// LandLate: a write is held back and lands after 1 to MaxLateRequests
	// later requests have been applied (or at Settle), long after its caller
	// got ErrUnknownOutcome. Its condition is evaluated when it lands. Reads
	// cannot land late and are answered normally when this fault is drawn.
	LandLate float64
	// UnavailableApplied: the server applies the request and then answers
	// 503. The caller gets ErrUnknownOutcome.
	UnavailableApplied float64
	// UnavailableNotApplied: the server answers 503 without applying the
	// request. The caller gets ErrUnknownOutcome.
	UnavailableNotApplied float64

	// MaxDelay delays every request by a duration drawn uniformly from
	// [0, MaxDelay) before it reaches the bucket. A context that ends during
	// the delay ends the call with ErrUnknownOutcome, the request unapplied.
	MaxDelay time.Duration
	// MaxLateRequests bounds how many later requests a late write waits
	// for; 0 means 4.
	MaxLateRequests int

	// IgnoreConditions imitates a broken server that ignores If-Match and
	// If-None-Match (see State.IgnoreConditions).
	IgnoreConditions bool
}

const defaultMaxLateRequests = 4

// Validate reports a configuration no Store can honour.
func (f Faults) Validate() error {
	sum := 0.0
	for _, p := range []struct {
		name string
		v    float64
	}{
		{"LoseRequest", f.LoseRequest},
		{"LoseReply", f.LoseReply},
		{"LandLate", f.LandLate},
		{"UnavailableApplied", f.UnavailableApplied},
		{"UnavailableNotApplied", f.UnavailableNotApplied},
	} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return fmt.Errorf("memstore: faults: %s is %v, outside [0, 1]", p.name, p.v)
		}
		sum += p.v
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("memstore: faults: probabilities sum to %v, over 1", sum)
	}
	if f.MaxDelay < 0 {
		return fmt.Errorf("memstore: faults: MaxDelay is negative (%v)", f.MaxDelay)
	}
	if f.MaxLateRequests < 0 {
		return fmt.Errorf("memstore: faults: MaxLateRequests is negative (%d)", f.MaxLateRequests)
	}
	return nil
}

// Fault names what went wrong with one request.
type Fault uint8

const (
	NoFault Fault = iota
	FaultLoseRequest
	FaultLoseReply
	FaultLandLate
	FaultUnavailableApplied
	FaultUnavailableNotApplied
	// FaultContextDone: the caller's context ended before the request
	// reached the bucket (already done at the call, or during a delay).
	FaultContextDone
)

func (f Fault) String() string {
	switch f {
	case NoFault:
		return "none"
	case FaultLoseRequest:
		return "request lost"
	case FaultLoseReply:
		return "reply lost"
	case FaultLandLate:
		return "will land late"
	case FaultUnavailableApplied:
		return "503 after applying"
	case FaultUnavailableNotApplied:
		return "503 without applying"
	case FaultContextDone:
		return "context done"
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Applied reports whether the request took effect by the time the caller got
// its answer. A late write takes effect later; FaultContextDone never does.
func (f Fault) Applied() bool {
	return f == NoFault || f == FaultLoseReply || f == FaultUnavailableApplied
}

// FaultError is the error of a request a fault struck. It wraps
// ownership.ErrUnknownOutcome, which is all a caller may branch on; tests use
// errors.As to see which fault it was.
type FaultError struct {
	Fault   Fault
	Request Request
	// Cause is the context's error for FaultContextDone.
	Cause error
}

func (e *FaultError) Error() string {
	s := "memstore: " + e.Request.String() + ": " + e.Fault.String()
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s + ": " + ownership.ErrUnknownOutcome.Error()
}

// Unwrap exposes ErrUnknownOutcome and, for FaultContextDone, the context's
// error.
func (e *FaultError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ownership.ErrUnknownOutcome, e.Cause}
	}
	return []error{ownership.ErrUnknownOutcome}
}
