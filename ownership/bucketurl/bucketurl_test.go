package bucketurl_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

func TestParse(t *testing.T) {
	tests := []struct {
		raw  string
		want bucketurl.Target
	}{
		{"./wasmkeep-data", bucketurl.Target{Kind: bucketurl.Dir, Dir: "./wasmkeep-data"}},
		{"data", bucketurl.Target{Kind: bucketurl.Dir, Dir: "data"}},
		{"/var/lib/wasmkeep", bucketurl.Target{Kind: bucketurl.Dir, Dir: "/var/lib/wasmkeep"}},
		{"file:///var/lib/wasmkeep", bucketurl.Target{Kind: bucketurl.Dir, Dir: "/var/lib/wasmkeep"}},
		{"file://localhost/srv/b", bucketurl.Target{Kind: bucketurl.Dir, Dir: "/srv/b"}},
		{"file:///with%20space", bucketurl.Target{Kind: bucketurl.Dir, Dir: "/with space"}},
		{"sqlite:///var/lib/wasmkeep", bucketurl.Target{Kind: bucketurl.SQLite, Dir: "/var/lib/wasmkeep"}},
		{"sqlite://localhost/srv/b", bucketurl.Target{Kind: bucketurl.SQLite, Dir: "/srv/b"}},
		{"sqlite:wasmkeep-data", bucketurl.Target{Kind: bucketurl.SQLite, Dir: "wasmkeep-data"}},
		{"sqlite:./a/b", bucketurl.Target{Kind: bucketurl.SQLite, Dir: "./a/b"}},
		{"sqlite:/srv/b", bucketurl.Target{Kind: bucketurl.SQLite, Dir: "/srv/b"}},
		{"mem://", bucketurl.Target{Kind: bucketurl.Memory}},
		{"s3://b", bucketurl.Target{Kind: bucketurl.S3, S3: s3store.Config{Bucket: "b"}}},
		{"s3://b/", bucketurl.Target{Kind: bucketurl.S3, S3: s3store.Config{Bucket: "b"}}},
		{"s3://b/cluster-a", bucketurl.Target{Kind: bucketurl.S3, S3: s3store.Config{Bucket: "b", Prefix: "cluster-a/"}}},
		{"s3://b/x/y/", bucketurl.Target{Kind: bucketurl.S3, S3: s3store.Config{Bucket: "b", Prefix: "x/y/"}}},
		{"s3://b/p?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true&timeout=5s",
			bucketurl.Target{Kind: bucketurl.S3, S3: s3store.Config{
				Bucket: "b", Prefix: "p/", Endpoint: "http://127.0.0.1:9000", Region: "us-east-1",
				PathStyle: true, AttemptTimeout: 5 * time.Second,
			}}},
		{"s3://b?path_style=0&max_attempts=5&region=eu-west-1",
			bucketurl.Target{Kind: bucketurl.S3, S3: s3store.Config{Bucket: "b", Region: "eu-west-1", MaxAttempts: 5}}},
	}
	for _, tt := range tests {
		got, err := bucketurl.Parse(tt.raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.raw, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.raw, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		raw  string
		want string // a fragment the error must contain
	}{
		{"", "empty"},
		{"gs://bucket", `unknown scheme "gs"`},
		{"http://127.0.0.1:9000/b", `unknown scheme "http"`},
		{"s3:bucket", "s3://"},
		{"mem:", "mem://"},
		{"mem://name", "takes no"},
		{"mem://?x=1", "takes no"},
		{"file://relative/dir", `not host "relative"`},
		{"file:///d?sync=1", "no parameters"},
		{"sqlite:", "no directory"},
		{"sqlite://relative/dir", `not host "relative"`},
		{"sqlite:///d?sync=1", "no parameters"},
		{"s3://", "no bucket"},
		{"s3:///prefix", "no bucket"},
		{"s3://b:9000/p", "?endpoint="},
		{"s3://key:secret@b/p", "credentials do not belong"},
		{"s3://b?endpont=http://x", `unknown parameter "endpont"`},
		{"s3://b?path_style=yes", "path_style"},
		{"s3://b?timeout=5", "timeout"},
		{"s3://b?timeout=-1s", "timeout"},
		{"s3://b?max_attempts=0", "max_attempts"},
		{"s3://b?region=a&region=b", "given 2 times"},
		{"s3://b?endpoint=ftp://x", "scheme must be http or https"},
		{"s3://b?endpoint=%zz", "parameters"},
	}
	for _, tt := range tests {
		_, err := bucketurl.Parse(tt.raw)
		if err == nil {
			t.Errorf("Parse(%q) = nil error, want one containing %q", tt.raw, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tt.raw, err, tt.want)
		}
		if strings.Contains(err.Error(), "secret") && !strings.Contains(tt.want, "credentials") {
			t.Errorf("Parse(%q): error leaks a secret: %v", tt.raw, err)
		}
	}
	// A refused URL with credentials must not echo them.
	if _, err := bucketurl.Parse("s3://key:secret@b/p"); err == nil || strings.Contains(err.Error(), "secret@") {
		t.Errorf("credentials echoed: %v", err)
	}
}

// TestOpen opens one store of each kind and checks that it works.
func TestOpen(t *testing.T) {
	srv := s3test.Start(t)
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	for _, raw := range []string{
		"mem://",
		filepath.Join(dir, "plain"),
		"file://" + filepath.Join(dir, "url"),
		"sqlite://" + filepath.Join(dir, "sqlite"),
		srv.URL("bucketurl-test") + "&timeout=5s",
	} {
		t.Run(raw, func(t *testing.T) {
			b, closeBucket, err := bucketurl.Open(t.Context(), raw)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := closeBucket(); err != nil {
					t.Error(err)
				}
			}()
			roundTrip(t.Context(), t, b)
		})
	}
}

// TestOpenClaims: the local stores a URL opens can claim a name beside
// themselves (the node's claim of its id), the others cannot.
func TestOpenClaims(t *testing.T) {
	dir := t.TempDir()
	for raw, want := range map[string]bool{
		filepath.Join(dir, "plain"):           true,
		"sqlite://" + filepath.Join(dir, "q"): true,
		"mem://":                              false,
	} {
		b, closeBucket, err := bucketurl.Open(t.Context(), raw)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := b.(interface {
			Claim(name string) (release func() error, free bool, err error)
		})
		if ok != want {
			t.Errorf("%s: a claimer %v, want %v", raw, ok, want)
		}
		if ok {
			release, free, err := c.Claim("node/n1")
			if err != nil || !free {
				t.Errorf("%s: claim: free %v, %v", raw, free, err)
			} else {
				release()
			}
		}
		if err := closeBucket(); err != nil {
			t.Error(err)
		}
	}
}

func roundTrip(ctx context.Context, t *testing.T, b ownership.Bucket) {
	t.Helper()
	etag, err := b.Put(ctx, "k", []byte("v"), ownership.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	obj, err := b.Get(ctx, "k")
	if err != nil || string(obj.Body) != "v" || obj.ETag != etag {
		t.Fatalf("get: %q %s %v; want \"v\" %s", obj.Body, obj.ETag, err, etag)
	}
	if _, err := b.Put(ctx, "k", []byte("w"), ownership.IfAbsent()); ownership.OutcomeOf(err) != ownership.Refused {
		t.Fatalf("second create: %v, want refused", err)
	}
}

// TestOpenLogs: the logger WithLogger puts in the context reaches the
// directory store, which logs the torn tail it cuts off at open.
func TestOpenLogs(t *testing.T) {
	dir := t.TempDir()
	b, closeBucket, err := bucketurl.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t.Context(), t, b)
	if err := closeBucket(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "seg-*"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %q, %v", segs, err)
	}
	f, err := os.OpenFile(segs[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(make([]byte, 10)) // a write cut short by a crash
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	_, closeBucket, err = bucketurl.Open(bucketurl.WithLogger(t.Context(), log), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeBucket()
	if got := logs.String(); !strings.Contains(got, "torn tail") || !strings.Contains(got, "bytes=10") {
		t.Fatalf("log of the open: %q, want the torn tail of 10 bytes", got)
	}
}

// TestOpenExisting: under Existing, a directory or SQLite store whose
// directory is missing is refused (os.ErrNotExist) and not made; one that
// exists opens.
func TestOpenExisting(t *testing.T) {
	ctx := bucketurl.Existing(t.Context())
	for _, scheme := range []string{"", "sqlite:"} {
		missing := filepath.Join(t.TempDir(), "typo")
		if _, _, err := bucketurl.Open(ctx, scheme+missing); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s%s: Open = %v, want ErrNotExist", scheme, missing, err)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("%s%s: the directory was made", scheme, missing)
		}
		b, closeBucket, err := bucketurl.Open(ctx, scheme+t.TempDir())
		if err != nil {
			t.Fatalf("%s of an existing directory: %v", scheme, err)
		}
		if _, err := b.List(ctx, "", "", 1); err != nil {
			t.Error(err)
		}
		closeBucket()
	}
}
