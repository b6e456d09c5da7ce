package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wasmkeep/wasmkeep/ownership/bucketcheck"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
)

// defaultBucketURL is where a node keeps its bucket when none is named: a
// directory store next to where it runs, so that a first try needs no setup.
const defaultBucketURL = "./wasmkeep-data"

const bucketURLHelp = "the bucket: a directory path, file:///DIR, sqlite:///DIR or sqlite:DIR (an SQLite store in DIR), " +
	"s3://BUCKET/PREFIX?endpoint=URL&region=R&path_style=true&timeout=5s&max_attempts=N, or mem://. " +
	"S3 credentials come from the AWS SDK's chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...), never from the URL"

func bucketCommands() *command {
	return &command{
		name:    "bucket",
		summary: "inspect the bucket a cluster shares",
		subs: []*command{
			{
				name:    "check",
				summary: "verify that a bucket honours the conditional writes wasmkeep depends on",
				detail: "Writes a few probe objects under --prefix, checks create-only puts (If-None-Match: *),\n" +
					"replace-only puts (If-Match), fresh ETags and conditional deletes, then deletes the probes.\n" +
					"Exits 0 when the bucket is sound, 1 when it is not (the output names what is missing)\n" +
					"or could not be checked.",
				setup: setupBucketCheck,
			},
		},
	}
}

// bucketCheckConfig is what `wasmkeep bucket check` runs with.
type bucketCheckConfig struct {
	BucketURL string
	Prefix    string
	Timeout   time.Duration
}

func (c bucketCheckConfig) Validate() error {
	var errs []error
	if _, err := bucketurl.Parse(c.BucketURL); err != nil {
		errs = append(errs, err)
	}
	if !utf8.ValidString(c.Prefix) {
		errs = append(errs, errors.New("--prefix is not UTF-8"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %v: must be positive", c.Timeout))
	}
	return errors.Join(errs...)
}

func setupBucketCheck(fs *flag.FlagSet) action {
	cfg := bucketCheckConfig{BucketURL: defaultBucketURL, Prefix: "wasmkeep-check/", Timeout: time.Minute}
	fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix,
		"key prefix for the probe objects; each run adds a unique nonce below it and removes its probes afterwards")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the whole check")
	return func(ctx context.Context, e env, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runBucketCheck(ctx, cfg, e)
	}
}

func runBucketCheck(ctx context.Context, cfg bucketCheckConfig, e env) (err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	nonce, err := newNonce(time.Now())
	if err != nil {
		return err
	}
	target := describeBucket(cfg.BucketURL)
	// Opening a directory store makes its directory: a check of a
	// mistyped path would make one and pass.
	b, closeBucket, err := e.openBucket(bucketurl.Existing(ctx), cfg.BucketURL)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(e.err, "wasmkeep bucket check: %s: no such directory (a node makes its bucket's directory when it starts; a check only checks one that exists)\n", target)
		return exitError{exitProblem}
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeBucket(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", target, cerr)
		}
	}()

	fmt.Fprintf(e.out, "bucket: %s\n", target)
	report := bucketcheck.Run(ctx, b, cfg.Prefix, nonce)
	fmt.Fprint(e.out, report)
	switch {
	case report.Unanswered():
		fmt.Fprintf(e.err, "wasmkeep bucket check: %s could not be checked: %v (its name, existence, endpoint or credentials)\n", target, report.Err)
		return exitError{exitProblem}
	case !report.Sound():
		fmt.Fprintf(e.err, "wasmkeep bucket check: %s is not sound: missing %s\n", target, strings.Join(report.Missing(), "; "))
		return exitError{exitProblem}
	}
	return nil
}

// describeBucket names the bucket a URL opens, for people.
func describeBucket(raw string) string {
	if t, err := bucketurl.Parse(raw); err == nil {
		return t.String()
	}
	return raw
}

// newNonce names one check run: a timestamp, so that leftovers of an
// interrupted run are easy to date, and random bits, so that two runs never
// share probe keys.
func newNonce(now time.Time) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:]), nil
}
