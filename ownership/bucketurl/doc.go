// Package bucketurl opens the ownership.Bucket a URL names, so that every
// command and test chooses its store the same way:
//
//	./wasmkeep-data, /var/lib/wasmkeep   a directory store (ownership/dirstore)
//	file:///var/lib/wasmkeep             the same, as a URL
//	sqlite:///var/lib/wasmkeep           an SQLite store in that directory (ownership/sqlitestore)
//	sqlite:wasmkeep-data                 the same, a path relative to the working directory
//	s3://BUCKET/PREFIX?PARAMS            an S3-compatible bucket (ownership/s3store)
//	mem://                               a fresh in-memory store (ownership/memstore), faults off
//
// The s3 parameters are endpoint (the server's base URL; default: AWS),
// region, path_style (true or false), timeout (per attempt, a Go duration
// such as 5s) and max_attempts (for repeatable operations). The prefix is the
// URL's path; a "/" is appended when it lacks one, so s3://b/cluster-a keeps
// its keys under "cluster-a/". Credentials never go in the URL: they come
// from the AWS SDK's usual chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
// AWS_PROFILE and the shared files, SSO, instance roles). A URL with a user
// or password in it is refused rather than ignored.
//
// Any parameter Open does not know is an error, as is a file or sqlite URL
// with a host: a typo must not silently select a default. The directory
// store is the default; the SQLite store is chosen only by its scheme.
//
// Open may be called from any goroutine; what it returns is as safe for
// concurrent use as the store it opened (all of them are).
package bucketurl
