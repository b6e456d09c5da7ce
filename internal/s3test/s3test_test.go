package s3test

import (
	"fmt"
	"os"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	os.Exit(m.Run())
}

func TestStart(t *testing.T) {
	srv := Start(t)
	if os.Getenv(EnvBinary) == "" {
		bin, err := Binary()
		if err != nil {
			t.Fatal(err)
		}
		if !pinned(bin) {
			t.Errorf("%s is not versitygw %s", bin, VersitygwVersion)
		}
	}
	s, err := s3store.New(t.Context(), srv.Config("start/"))
	if err != nil {
		t.Fatal(err)
	}
	etag, err := s.Put(t.Context(), "k", []byte("v"), ownership.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "k", []byte("w"), ownership.IfAbsent()); ownership.OutcomeOf(err) != ownership.Refused {
		t.Errorf("second create: %v, want refused", err)
	}
	// The bucket is a directory of the data directory, and the prefix a
	// directory inside it.
	if _, err := os.Stat(srv.DataDir + "/" + srv.Bucket + "/start/k"); err != nil {
		t.Errorf("object not where the server keeps it: %v", err)
	}

	// URL and Env describe the same bucket to bucketurl.
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	b, closeBucket, err := bucketurl.Open(t.Context(), srv.URL("start"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeBucket()
	obj, err := b.Get(t.Context(), "k")
	if err != nil || obj.ETag != etag {
		t.Errorf("get through the URL: %v %v, want ETag %s", obj.ETag, err, etag)
	}
}

// TestStopAtCleanup: a server started for a test is gone when its cleanup
// has run.
func TestStopAtCleanup(t *testing.T) {
	var srv *Server
	t.Run("uses a server", func(t *testing.T) {
		srv = Start(t)
	})
	select {
	case <-srv.proc.exited:
	default:
		t.Fatalf("server %d still running after its test ended", srv.proc.cmd.Process.Pid)
	}
}

// TestTwoServers: servers are independent; each has its own port and data.
func TestTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Endpoint == b.Endpoint || a.DataDir == b.DataDir {
		t.Fatalf("servers share %s or %s", a.Endpoint, a.DataDir)
	}
	for i, srv := range []*Server{a, b} {
		s, err := s3store.New(t.Context(), srv.Config(""))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(t.Context(), "k", []byte(fmt.Sprint(i)), ownership.IfAbsent()); err != nil {
			t.Errorf("server %d: %v", i, err)
		}
	}
}
