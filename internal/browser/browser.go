// Package browser finds Chromium for end-to-end tests and starts it headless
// through chromedp. Tests get its path from Require, which fails a test when
// Chromium is missing (scripts/chromium.sh installs Debian's chromium).
package browser

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// NoBrowserEnv names the environment variable that, set to 1, lets browser
// tests skip instead of fail on a machine without Chromium. CI never sets it.
const NoBrowserEnv = "WASMKEEP_NO_BROWSER"

// Find returns the path of chromium or chromium-browser on PATH.
func Find() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browser: neither chromium nor chromium-browser is on PATH")
}

// Require returns the path of Chromium for a test that needs it. When
// Chromium is not on PATH the test fails, saying to run scripts/chromium.sh,
// unless WASMKEEP_NO_BROWSER=1, when it is skipped instead.
func Require(t testing.TB) string {
	t.Helper()
	path, err := Find()
	if err == nil {
		return path
	}
	if os.Getenv(NoBrowserEnv) == "1" {
		t.Skipf("%s=1 and no chromium: skipping browser test (%v)", NoBrowserEnv, err)
	}
	t.Fatalf("%v: browser tests need Chromium; install it with scripts/chromium.sh "+
		"(or set %s=1 to skip these tests on a machine without it)", err, NoBrowserEnv)
	return ""
}

// flags run Chromium headless as root in a sandboxed machine with no network
// but loopback: without the background-networking flags Chromium keeps
// dialing Google's hosts. chromedp adds a fresh temporary profile and the
// DevTools pipe.
var flags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"no-default-browser-check", "disable-background-networking",
	"disable-component-update", "disable-sync", "disable-extensions",
	"disable-dev-shm-usage", "mute-audio",
}

// launchTimeout bounds the start of Chromium.
const launchTimeout = 30 * time.Second

// Launch starts the Chromium at path and returns its chromedp context: each
// chromedp.NewContext of it is a new tab. Chromium's output goes to logf.
// stop kills the browser, waits for it and removes its profile; the caller
// must call it, and logf is not called after it returns.
func Launch(ctx context.Context, path string, logf func(format string, args ...any)) (bctx context.Context, stop func(), err error) {
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.CombinedOutput(logWriter(logf))}
	for _, f := range flags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	stop = func() { bcancel(); acancel() }
	// The first Run starts the browser, which lives as long as bctx: a
	// timer bounds the start instead of a deadline on bctx.
	timer := time.AfterFunc(launchTimeout, bcancel)
	err = chromedp.Do(bctx)
	if !timer.Stop() {
		err = errors.Join(err, errors.New("browser: chromium did not start within "+launchTimeout.String()))
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return bctx, stop, nil
}

// logWriter logs each line written to it.
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	for line := range strings.Lines(string(p)) {
		f("chromium: %s", strings.TrimSuffix(line, "\n"))
	}
	return len(p), nil
}
