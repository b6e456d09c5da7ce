package wasmhost

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/meter"
)

// meterFuel is how many loop heads (and tail calls) a guest runs between
// two calls of its meter check. Go guests enter a loop head at every
// function call too, so this is also about the number of calls: a few
// hundred microseconds of guest time at most between checks, for a check
// that costs a few hundred nanoseconds.
const meterFuel = 10_000

// meterCheck is the host function instrumented guests call: it stops
// the guest if its event's context is done (the event timeout, or a
// caller that went away), by a trap that discards the guest.
const meterCheck = "meter_check"

// instrument inserts the meter into a guest module (package meter). It
// is how the event timeout stops a guest: wazero's own way,
// WithCloseOnContextDone, leaves compiled code for Go at every loop
// head, which made guest loops ~14× slower, and starts a goroutine for
// every call. Being back in Go at each check is also where the Go
// runtime can preempt the guest's goroutine (for a garbage collection),
// which it cannot do inside compiled guest code.
func instrument(wasm []byte) ([]byte, error) {
	return meter.Instrument(wasm, meter.Import{Module: abiModule, Name: meterCheck}, meterFuel)
}

// meterFunction is the check the instrumented guests import.
func meterFunction(fn hostFunc) {
	// meter_check(): returns, or traps if the event's context is done.
	fn(meterCheck, func(ctx context.Context, _ api.Module, _ []uint64) {
		if err := ctx.Err(); err != nil {
			panic(err)
		}
	}, nil, nil)
}
