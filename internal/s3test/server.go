package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

// Fixed identity of every test server. They guard nothing: the server
// listens on 127.0.0.1 only and lives as long as one test binary.
const (
	AccessKey = "wasmkeep-test"
	SecretKey = "wasmkeep-test-secret"
	Region    = "us-east-1"
	Bucket    = "wasmkeep-test"
)

const (
	// readyTimeout bounds the wait for a started server to answer; it is
	// ready in well under a second on an idle machine.
	readyTimeout = 30 * time.Second
	// startTries covers the unlikely case that another process takes the
	// free port between our probe and the server's bind.
	startTries = 3
)

// Server is one running versitygw serving Bucket.
type Server struct {
	// Endpoint is the base URL, "http://127.0.0.1:PORT".
	Endpoint  string
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
	// DataDir is the directory the server stores objects in; the bucket
	// is DataDir/Bucket.
	DataDir string

	proc *process
}

// Config returns a store configuration for this server whose keys live under
// prefix, with explicit credentials.
func (s *Server) Config(prefix string) s3store.Config {
	return s3store.Config{
		Endpoint:  s.Endpoint,
		Region:    s.Region,
		Bucket:    s.Bucket,
		Prefix:    prefix,
		PathStyle: true,
		AccessKey: s.AccessKey,
		SecretKey: s.SecretKey,
	}
}

// URL returns the bucket URL of this server under prefix, in the form
// ownership/bucketurl opens. Credentials are not part of it: see Env.
func (s *Server) URL(prefix string) string {
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", s.Region)
	q.Set("path_style", "true")
	return (&url.URL{Scheme: "s3", Host: s.Bucket, Path: "/" + prefix, RawQuery: q.Encode()}).String()
}

// Env returns the environment variables through which the SDK's default
// credential chain finds this server's credentials.
func (s *Server) Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     s.AccessKey,
		"AWS_SECRET_ACCESS_KEY": s.SecretKey,
		"AWS_REGION":            s.Region,
		// Keep the SDK from probing the EC2 metadata service, which is
		// not on 127.0.0.1.
		"AWS_EC2_METADATA_DISABLED": "true",
	}
}

// Start runs a server for one test and stops it when the test ends. It fails
// the test, with the reason, when the server cannot be built or started.
func Start(tb testing.TB) *Server {
	tb.Helper()
	root := tb.TempDir()
	s, err := start(root)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.stop)
	return s
}

// StartMain runs a server for a whole test binary, from TestMain:
//
//	func TestMain(m *testing.M) {
//		srv, stop, err := s3test.StartMain()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		stop()
//		os.Exit(code)
//	}
//
// stop kills the server and removes its data; on Linux the server also dies
// with the process if stop is never reached.
func StartMain() (*Server, func(), error) {
	root, err := os.MkdirTemp("", "wasmkeep-s3test-")
	if err != nil {
		return nil, nil, fmt.Errorf("s3test: %w", err)
	}
	s, err := start(root)
	if err != nil {
		os.RemoveAll(root)
		return nil, nil, err
	}
	return s, func() {
		s.stop()
		os.RemoveAll(root)
	}, nil
}

// start builds (if needed) and starts a server whose files live under root.
func start(root string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(root, "data")
	// A directory directly inside the data directory is a bucket.
	if err := os.MkdirAll(filepath.Join(data, Bucket), 0o755); err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	var errs []error
	for try := 1; try <= startTries; try++ {
		s, err := startOnce(bin, root, data)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("s3test: start versitygw: %w", errors.Join(errs...))
}

func startOnce(bin, root, data string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(root, "versitygw.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(bin,
		"--port", addr,
		"--access", AccessKey,
		"--secret", SecretKey,
		"--region", Region,
		"--quiet",
		// Without keep-alive every request opens a new connection, which
		// distorts benchmarks and fills the port range with TIME_WAIT.
		"--keep-alive",
		"posix", data)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The server's environment must not pick up the developer's S3 or
	// versitygw settings.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	bindToParent(cmd)

	p, err := spawn(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	endpoint := "http://" + addr
	if err := waitReady(endpoint, p.exited); err != nil {
		p.kill()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("versitygw on %s: %w\n%s", addr, err, tail(log, 4096))
	}
	return &Server{
		Endpoint:  endpoint,
		Region:    Region,
		Bucket:    Bucket,
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		DataDir:   data,
		proc:      p,
	}, nil
}

func (s *Server) stop() { s.proc.kill() }

// freeAddr returns a 127.0.0.1 address with a port nobody listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// waitReady waits, bounded, until the server answers HTTP or exits.
func waitReady(endpoint string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			// Any answer, even "access denied", means it serves.
			resp.Body.Close()
			return nil
		}
		retry := time.NewTimer(20 * time.Millisecond)
		select {
		case <-exited:
			retry.Stop()
			return errors.New("exited before answering")
		case <-ctx.Done():
			retry.Stop()
			return fmt.Errorf("no answer within %v: %w", readyTimeout, err)
		case <-retry.C:
		}
	}
}

// process is a started server and the goroutine that waits for it.
type process struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	killOnce sync.Once
}

// spawn starts cmd from a goroutine that stays locked to its OS thread until
// the process exits. Pdeathsig fires when the starting thread dies, not the
// process, and Go ends a thread whenever a goroutine locked to it returns: any
// goroutine could lock the thread we happened to start from. A thread that is
// ours and blocked waiting for the child lives exactly as long as needed.
func spawn(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: if this goroutine ends while locked, its
		// thread ends too, which is fine once the child is gone.
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// kill stops the server and waits until it has exited.
func (p *process) kill() {
	p.killOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}
