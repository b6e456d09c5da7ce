// Package s3test runs a real S3-compatible server, versitygw, for tests, so
// that the S3 store is proven against a server that implements conditional
// writes as S3 does rather than against a fake.
//
// The server binary is looked up at $WASMKEEP_VERSITYGW, else in the cache
// directory ($XDG_CACHE_HOME/wasmkeep/bin or $HOME/.cache/wasmkeep/bin). When
// the cache has no binary of the pinned version (VersitygwVersion), one is
// built there with `go install`, which takes minutes; a file lock makes
// concurrent test binaries (and scripts/versitygw.sh) wait for one build
// rather than run several. The binary appears in the cache by an atomic
// rename, so a reader never sees half of it.
//
// Each server listens on 127.0.0.1 only, serves one bucket from a temporary
// directory, and is stopped when the test (Start) or the test binary
// (StartMain) ends. On Linux the server is also killed by the kernel when the
// test process dies, even by a panic or SIGKILL, so no server outlives its
// test.
//
// Nothing here skips a test: a server that cannot be built or started fails
// it, with the reason, since a skipped S3 test would hide exactly the
// regressions it exists to catch.
//
// Start may be called from any test goroutine; a *Server is immutable once
// returned and safe to share.
package s3test
