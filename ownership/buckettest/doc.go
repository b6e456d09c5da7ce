// Package buckettest is the contract suite every ownership.Bucket store must
// pass: the directory store, the in-memory store with its faults off, and the
// S3 store against a real S3-compatible server. Running one suite against all
// of them is what makes the fakes trustworthy: a behaviour the protocol
// relies on is written down here once, as a test, and every store is held to
// it.
//
// Run knows nothing of the store under test beyond the Bucket interface.
// Each subtest asks open for a fresh, empty bucket, so stores that share a
// backend (an S3 bucket with a fresh key prefix per call, say) work
// unchanged. A store that can hold writes in flight on demand may implement
// Holder; Run then also checks deadlines that expire mid-call. Range reads
// go through ownership.ReadRange, so a store that is an
// ownership.RangeReader has its GetRange checked, and one that is not is
// checked through ReadRange's fallback.
//
// What the suite checks, in short: conditional writes have exactly one
// winner under contention and refuse (never "unknown") the losers; a stale
// ETag is refused once the object holds other bytes, and distinct bytes get
// distinct ETags; reads see the last landed write; listings are complete, in
// byte order, paged exactly as S3 pages (1,000 keys at most), and a prefix
// is a byte prefix, not a directory; range reads give the bytes of the
// range up to the object's end, an empty body (not an error) at or past it,
// and the ETag of the one version they read, and a store's GetRange gives
// what a Get cut to the range gives; awkward keys round-trip and never
// collide; invalid keys are refused before anything is written; a write
// whose context is done reports an unknown outcome, never a refusal.
//
// Stores differ in a few ways wasmkeep copes with, and the caller of Run
// declares them in Traits: ETags derived from content (S3), an if-match
// delete of a missing key that lands (versitygw), keys kept as file paths
// (versitygw's posix backend). Traits never skip a subtest. Every subtest
// runs on every store and asserts the behaviour the traits declare, in full:
// a store declaring no traits must give identical bytes a new ETag each
// write, one declaring ContentETags must give them the same ETag. Keys that
// a path store cannot hold ("a" beside "a/b", ".", "a//b", "a/") are written
// only to stores that do not declare PathKeys, in addition to the keys every
// store gets.
//
// Timing: the suite asserts no durations. Against a local store it runs in a
// few seconds; most of the time goes to the ~1,150 writes of the listing
// test, issued by a small worker pool.
//
// Goroutines: Run must be called from the test's goroutine; it starts its
// own goroutines for the races and waits for them before returning. open is
// called from subtest goroutines, one call at a time.
package buckettest
