package bucketurl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
	"github.com/wasmkeep/wasmkeep/ownership/sqlitestore"
)

// Kind is the kind of store a URL names.
type Kind string

const (
	Dir    Kind = "dir"
	SQLite Kind = "sqlite"
	S3     Kind = "s3"
	Memory Kind = "mem"
)

// Target is a parsed bucket URL: what Open will open.
type Target struct {
	Kind Kind
	// Dir is the directory of a Dir or SQLite target.
	Dir string
	// S3 configures an S3 target; its credentials are left empty so that
	// the SDK's chain supplies them.
	S3 s3store.Config
}

// s3Params are the query parameters of an s3 URL, in the order errors list
// them.
var s3Params = []string{"endpoint", "region", "path_style", "timeout", "max_attempts"}

// Parse reads a bucket URL without opening anything.
func Parse(raw string) (Target, error) {
	if raw == "" {
		return Target{}, errors.New("bucketurl: empty bucket URL")
	}
	scheme, _, hasScheme := strings.Cut(raw, "://")
	if !hasScheme {
		s, rest, ok := strings.Cut(raw, ":")
		if ok && strings.EqualFold(s, "sqlite") {
			// sqlite:DIR, a path relative to the working directory
			// (or absolute), taken as it is written.
			if rest == "" {
				return Target{}, fmt.Errorf("bucketurl: %q: no directory; write sqlite:DIR or sqlite:///ABSOLUTE/DIR", raw)
			}
			return Target{Kind: SQLite, Dir: rest}, nil
		}
		// A plain path. "mem:" and "s3:" without slashes are almost
		// certainly typos, not directory names.
		if ok && (s == "s3" || s == "mem" || s == "file") {
			return Target{}, fmt.Errorf("bucketurl: %q: write %s://", raw, s)
		}
		return Target{Kind: Dir, Dir: raw}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("bucketurl: %w", err)
	}
	if u.User != nil {
		return Target{}, fmt.Errorf("bucketurl: %s: credentials do not belong in a bucket URL; "+
			"use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE", redact(u))
	}
	switch strings.ToLower(scheme) {
	case "file":
		return parseFile(u, Dir)
	case "sqlite":
		return parseFile(u, SQLite)
	case "s3":
		return parseS3(u)
	case "mem":
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return Target{}, fmt.Errorf("bucketurl: %q: mem:// takes no bucket, path or parameters", raw)
		}
		return Target{Kind: Memory}, nil
	}
	return Target{}, fmt.Errorf("bucketurl: %q: unknown scheme %q; want a directory path, file://, sqlite://, s3:// or mem://",
		raw, scheme)
}

// parseFile reads a file:// or sqlite:// URL, which names a local
// directory: the store of kind k in it.
func parseFile(u *url.URL, k Kind) (Target, error) {
	scheme, relative := "file", "a plain path"
	if k == SQLite {
		scheme, relative = "sqlite", "sqlite:relative/path"
	}
	if u.Host != "" && u.Host != "localhost" {
		return Target{}, fmt.Errorf("bucketurl: %q: a %s URL names a local directory, not host %q; "+
			"write %s:///absolute/path or %s", u, scheme, u.Host, scheme, relative)
	}
	if u.RawQuery != "" {
		return Target{}, fmt.Errorf("bucketurl: %q: a %s URL takes no parameters", u, scheme)
	}
	if u.Path == "" {
		return Target{}, fmt.Errorf("bucketurl: %q: no directory", u)
	}
	return Target{Kind: k, Dir: u.Path}, nil
}

// Local reports whether t names a store kept in a local directory
// (t.Dir): a directory store or an SQLite store.
func (t Target) Local() bool { return t.Kind == Dir || t.Kind == SQLite }

func parseS3(u *url.URL) (Target, error) {
	cfg := s3store.Config{Bucket: u.Host}
	if cfg.Bucket == "" {
		return Target{}, fmt.Errorf("bucketurl: %q: no bucket; write s3://BUCKET/PREFIX", u)
	}
	if u.Port() != "" {
		return Target{}, fmt.Errorf("bucketurl: %q: the host of an s3 URL is the bucket; "+
			"give the server as ?endpoint=http://HOST:PORT", u)
	}
	cfg.Prefix = strings.TrimPrefix(u.Path, "/")
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Target{}, fmt.Errorf("bucketurl: %q: parameters: %w", u, err)
	}
	var errs []error
	for name, values := range q {
		if !slices.Contains(s3Params, name) {
			errs = append(errs, fmt.Errorf("unknown parameter %q (known: %s)", name, strings.Join(s3Params, ", ")))
			continue
		}
		if len(values) != 1 {
			errs = append(errs, fmt.Errorf("parameter %q given %d times", name, len(values)))
			continue
		}
		v := values[0]
		switch name {
		case "endpoint":
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("path_style=%q: want true or false", v))
			}
			cfg.PathStyle = b
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("timeout=%q: want a positive duration such as 5s", v))
			}
			cfg.AttemptTimeout = d
		case "max_attempts":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("max_attempts=%q: want a positive integer", v))
			}
			cfg.MaxAttempts = n
		}
	}
	if len(errs) == 0 {
		if err := cfg.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// Sorted so the message does not depend on map order.
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return Target{}, fmt.Errorf("bucketurl: %q: %w", u, errors.Join(errs...))
	}
	return Target{Kind: S3, S3: cfg}, nil
}

// loggerKey is the context key of WithLogger's logger.
type loggerKey struct{}

// WithLogger returns a context under which Open gives the store it opens
// log, for what it finds that a person should know (the directory store:
// a torn tail cut off at open, damage found while it runs; the SQLite
// store: a database SQLite finds damaged). The context
// carries it because Open's callers pass it through a function of Open's
// shape; nothing else reads it. Without it, the store logs nothing.
func WithLogger(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

// existingKey is the context key of Existing.
type existingKey struct{}

// Existing returns a context under which Open refuses a directory or
// SQLite store whose directory does not exist (an error wrapping
// os.ErrNotExist) instead of making it: what checks a bucket must not
// make the bucket it was asked to check.
func Existing(ctx context.Context) context.Context {
	return context.WithValue(ctx, existingKey{}, true)
}

// Open parses raw and opens the store it names. The function it returns
// releases what the store holds (the directory store's lock and session);
// call it once, when done with the bucket.
func Open(ctx context.Context, raw string) (ownership.Bucket, func() error, error) {
	t, err := Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	return t.Open(ctx)
}

// Open opens the store t names, with the logger ctx carries (WithLogger).
func (t Target) Open(ctx context.Context) (ownership.Bucket, func() error, error) {
	if only, _ := ctx.Value(existingKey{}).(bool); only && t.Local() {
		if _, err := os.Stat(t.Dir); err != nil {
			return nil, nil, fmt.Errorf("bucketurl: %w", err)
		}
	}
	switch t.Kind {
	case Dir:
		log, _ := ctx.Value(loggerKey{}).(*slog.Logger)
		s, err := dirstore.OpenWith(t.Dir, dirstore.Options{Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("bucketurl: %w", err)
		}
		return s, closer(s), nil
	case SQLite:
		log, _ := ctx.Value(loggerKey{}).(*slog.Logger)
		s, err := sqlitestore.Open(t.Dir, sqlitestore.Options{Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("bucketurl: %w", err)
		}
		return s, closer(s), nil
	case S3:
		s, err := s3store.New(ctx, t.S3)
		if err != nil {
			return nil, nil, fmt.Errorf("bucketurl: %w", err)
		}
		return s, closer(s), nil
	case Memory:
		s := memstore.New(memstore.Faults{})
		return s, closer(s), nil
	}
	return nil, nil, fmt.Errorf("bucketurl: unknown kind %q", t.Kind)
}

// closer returns the store's Close, for stores that hold resources, or a
// no-op.
func closer(s any) func() error {
	if c, ok := s.(io.Closer); ok {
		return c.Close
	}
	return func() error { return nil }
}

// String renders the target for logs and reports.
func (t Target) String() string {
	switch t.Kind {
	case Dir:
		return "directory " + t.Dir
	case SQLite:
		return "sqlite store in " + t.Dir
	case S3:
		s := "s3://" + t.S3.Bucket + "/" + t.S3.Prefix
		if t.S3.Endpoint != "" {
			s += " at " + t.S3.Endpoint
		}
		return s
	case Memory:
		return "in-memory bucket"
	}
	return string(t.Kind)
}

// redact drops the user information from a URL for an error message.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}
