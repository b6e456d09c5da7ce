// Package memstore is an in-memory bucket for tests and for the deterministic
// simulation. It comes in two layers.
//
// State is the bucket itself as a pure, single-threaded value: a map of
// objects, a counter for ETags, and methods that apply one request and return
// its result exactly as the ownership.Bucket contract says. It has no
// goroutines, no clock and no randomness, so a simulator can drive it
// directly, holding requests in flight as Request values and deciding itself
// when (and whether) each one lands. Two States fed the same requests in the
// same order end in the same objects and hand out the same ETags.
//
// Store is a concurrency-safe ownership.Bucket over a State, with optional
// fault injection drawn from a seed: lost requests, lost replies, writes that
// land late (after the caller has given up and after later requests, their
// condition evaluated when they land), 503 answers that did or did not apply
// the write, context-aware delays, and a server that ignores If-Match and
// If-None-Match. HoldWrites stops writes on demand, for tests of what
// callers do when the bucket hangs. Faults are off unless configured; with
// faults off Store passes the same contract suite (ownership/buckettest) as
// every other store.
//
// Both layers read ranges too (ownership.RangeReader; State through
// State.GetRange and its Bucket view): a range read is a Get that returns
// part of the body, and to the faults it is a Get.
//
// Guarantees:
//   - Every landed write gets an ETag no earlier write in the same State got,
//     even when the bytes are the same.
//   - Bodies are copied in and out: a caller never aliases stored bytes.
//   - List pages are in ascending byte order of keys and hold at most
//     ownership.DefaultListLimit entries, as S3 pages do, whatever limit the
//     caller asks for, so tests cannot come to depend on larger pages.
//   - With a given Faults value, the same sequence of requests meets the same
//     faults, delays and late landings. Each request sent consumes the same
//     amount of randomness whatever befalls it; requests a client would not
//     send (an invalid key, a context already done) consume none.
//     Concurrent callers reach the Store in an order the Go scheduler
//     picks, so only a single caller (or callers that serialise their
//     requests) get a replayable run; the simulation drives State directly
//     for that reason.
//
// Goroutines: a State must be confined to one goroutine at a time (the
// simulator's event loop, or Store under its mutex). A Store may be used from
// any number of goroutines; its methods honour their contexts.
package memstore
