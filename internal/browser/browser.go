package browser

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Options configures Launch. The zero value is ready to use.
type Options struct {
	// Path is the Chromium executable. Empty means look up chromium, then
	// chromium-browser, on PATH (see Find).
	Path string

	// Logf, if set, receives Chromium's stderr lines and the driver's own
	// notes. It has the signature of testing.T.Logf. It is not called after
	// Close returns.
	Logf func(format string, args ...any)
}

// flags are the command-line flags Launch passes to Chromium, besides
// --user-data-dir and --remote-debugging-port. They run it headless as root
// in a sandboxed machine with no network but loopback: without the
// background-networking flags Chromium keeps dialing Google's hosts.
var flags = []string{
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--no-default-browser-check",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--disable-extensions",
	"--disable-dev-shm-usage",
	"--mute-audio",
}

// Browser is a running headless Chromium and its DevTools connection.
// Its methods may be called from any goroutine.
type Browser struct {
	cmd     *exec.Cmd
	dataDir string
	conn    *conn
	logf    func(format string, args ...any)

	stderr     *os.File      // read end of Chromium's stderr pipe
	stderrDone chan struct{} // closed when the stderr reader returns

	closeOnce sync.Once
	closeErr  error
}

// Find returns the path of chromium or chromium-browser on PATH.
func Find() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browser: neither chromium nor chromium-browser is on PATH")
}

// launchTimeout bounds Launch when ctx allows longer: Chromium prints its
// DevTools URL within a second or two, or never.
const launchTimeout = 30 * time.Second

// Launch starts Chromium headless with a fresh temporary profile and connects
// to its DevTools endpoint. ctx, and at most 30 seconds, bound the start
// only; the browser runs until Close, which the caller must call.
func Launch(ctx context.Context, opts Options) (*Browser, error) {
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	path := opts.Path
	if path == "" {
		p, err := Find()
		if err != nil {
			return nil, err
		}
		path = p
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}

	dataDir, err := os.MkdirTemp("", "wasmkeep-chromium-")
	if err != nil {
		return nil, fmt.Errorf("browser: create profile dir: %w", err)
	}
	args := append(append([]string{}, flags...),
		"--user-data-dir="+dataDir,
		"--remote-debugging-port=0",
		"about:blank",
	)
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = sysProcAttr()
	// An *os.File as Stderr is handed to Chromium as is, so no copying
	// goroutine belongs to cmd and Wait does not wait for the pipe to close.
	r, w, err := os.Pipe()
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("browser: stderr pipe: %w", err)
	}
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("browser: start %s: %w", path, err)
	}
	w.Close()

	b := &Browser{
		cmd:        cmd,
		dataDir:    dataDir,
		logf:       logf,
		stderr:     r,
		stderrDone: make(chan struct{}),
	}
	urlc := make(chan string, 1)
	tail := &lineTail{max: 20}
	go b.readStderr(urlc, tail)

	var url string
	select {
	case u, ok := <-urlc:
		if !ok {
			b.Close()
			return nil, fmt.Errorf("browser: %s exited before printing its DevTools URL; stderr:\n%s", path, tail)
		}
		url = u
	case <-ctx.Done():
		b.Close()
		return nil, fmt.Errorf("browser: wait for %s DevTools URL: %w; stderr:\n%s", path, ctx.Err(), tail)
	}

	c, err := dial(ctx, url)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.conn = c
	logf("browser: chromium pid %d, devtools %s", cmd.Process.Pid, url)
	return b, nil
}

const devToolsPrefix = "DevTools listening on "

// readStderr logs Chromium's stderr, sends the DevTools URL on urlc once,
// and closes urlc if stderr ends before it.
func (b *Browser) readStderr(urlc chan<- string, tail *lineTail) {
	defer close(b.stderrDone)
	sent := false
	defer func() {
		if !sent {
			close(urlc)
		}
	}()
	sc := bufio.NewScanner(b.stderr)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		tail.add(line)
		b.logf("chromium: %s", line)
		if !sent {
			if u, ok := strings.CutPrefix(strings.TrimSpace(line), devToolsPrefix); ok {
				urlc <- u
				sent = true
			}
		}
	}
}

// PID returns the process id of Chromium's main process, which leads its
// own process group.
func (b *Browser) PID() int { return b.cmd.Process.Pid }

// closeTimeout bounds each of Close's waits after the kill: for Chromium's
// stderr to close, and for its process group to stop running.
const closeTimeout = 2 * time.Second

// Close closes the DevTools connection, kills Chromium's process group,
// waits for the main process, and removes the temporary profile. Pages of
// this browser stop working. Close may be called more than once.
func (b *Browser) Close() error {
	b.closeOnce.Do(func() {
		var errs []error
		if b.conn != nil {
			b.conn.close() // an error here changes nothing: the process is killed next
		}
		if err := killProcessGroup(b.cmd.Process); err != nil {
			errs = append(errs, fmt.Errorf("browser: kill chromium pid %d: %w", b.cmd.Process.Pid, err))
		}
		// Wait reports the kill as an error; that is the expected outcome.
		b.cmd.Wait()
		// Every process in the group is dead, so stderr reaches EOF; closing
		// our end as well covers a helper that left the group.
		select {
		case <-b.stderrDone:
		case <-time.After(closeTimeout):
		}
		b.stderr.Close()
		<-b.stderrDone
		// SIGKILL is delivered asynchronously; wait until no process of the
		// group runs, so that "Close returned" means "nothing of this
		// browser is left running".
		if err := b.waitGroupGone(); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(b.dataDir); err != nil {
			errs = append(errs, fmt.Errorf("browser: remove profile dir: %w", err))
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// groupPoll is how often Close checks whether Chromium's helpers are gone.
const groupPoll = 10 * time.Millisecond

func (b *Browser) waitGroupGone() error {
	pgid := b.cmd.Process.Pid
	start := time.Now()
	for {
		live := groupLive(pgid)
		if len(live) == 0 {
			return nil
		}
		if time.Since(start) > closeTimeout {
			return fmt.Errorf("browser: chromium process group %d: processes %v still run %v after SIGKILL", pgid, live, closeTimeout)
		}
		time.Sleep(groupPoll)
	}
}

// lineTail keeps the last max lines written to it, for error messages.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
