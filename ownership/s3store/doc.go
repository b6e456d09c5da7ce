// Package s3store is the ownership.Bucket of a wasmkeep cluster that lives in
// an S3-compatible bucket: AWS S3 itself or any server that implements
// conditional writes (If-None-Match: * and If-Match on PutObject, If-Match on
// DeleteObject). Run `wasmkeep bucket check` against a server before trusting
// it: a server that ignores conditions breaks every guarantee wasmkeep makes.
//
// # What it guarantees
//
// Every call returns an error that ownership.OutcomeOf classifies:
//
//   - HTTP 412, 409 ConditionalRequestConflict, and 404 on a conditional put
//     or delete are ownership.ErrPrecondition: the server refused the write.
//   - 404 on a Get is ownership.ErrNotFound.
//   - No answer is ownership.ErrUnknownOutcome: a transport error, a reset
//     connection, a timeout, a cancelled context, a 5xx, 408 or 429, or a
//     response that could not be read. The cause stays wrapped.
//   - Everything else is a plain error, which OutcomeOf reports as Failed:
//     nothing was written. That covers 403, 400, a missing bucket, bad
//     credentials, a request that never left the process, and 501 Not
//     Implemented (the server says it did not do what was asked).
//   - If-Match with the empty ETag is ownership.ErrPrecondition without a
//     request: no version has that ETag.
//
// A conditional write is sent exactly once. If that attempt gets no answer the
// result is ErrUnknownOutcome and the caller must re-read: the first attempt
// may have landed, and a blind retry would come back 412 although it won.
// Operations that are safe to repeat (Get, List, unconditional Put and
// Delete) are retried on an unknown outcome, each attempt under its own
// timeout, with capped exponential backoff. The SDK's own retryer is off so
// that this is the only retry policy in play.
//
// A range read (GetRange, ownership.RangeReader) is a GET with a Range
// header, retried as a Get. S3 answers 416 for a range that starts at or
// past the end of the object, and for every range of a zero-length one;
// the contract makes that an empty body with the object's ETag, which the
// store reads with a HEAD (so such a read costs two requests). 404 is
// ownership.ErrNotFound, as on a Get. A server that ignores Range and
// sends the whole object has it cut to the range; one that answers
// another range than asked is a failure.
//
// ETags are passed through exactly as S3 gives them (quoted), and passed back
// unchanged in If-Match. Keys are stored under Config.Prefix; List strips it.
//
// # Concurrency
//
// A *Store is safe for concurrent use by any number of goroutines; it holds no
// mutable state of its own beyond the SDK client's connection pool.
package s3store
