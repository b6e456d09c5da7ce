//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package s3test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeGo puts a go command first on PATH whose install copies an existing
// versitygw binary into $GOBIN instead of compiling one for minutes, and
// logs its arguments; every other subcommand runs the real go. It returns
// the log's path.
func fakeGo(t *testing.T) string {
	t.Helper()
	src, err := Binary() // the real cache, before the environment changes
	if err != nil {
		t.Fatal(err)
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "install.log")
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = install ]; then\n" +
		"  echo \"$* GOBIN=$GOBIN GOWORK=$GOWORK\" >> '" + log + "'\n" +
		"  cp '" + src + "' \"$GOBIN/versitygw\"\n" +
		"  exit 0\n" +
		"fi\n" +
		"exec '" + realGo + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv(EnvBinary, "")
	return log
}

// installs returns the go install command lines the fake go logged.
func installs(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestBuildOnce: with an empty cache, concurrent callers build the binary
// exactly once, with the pinned version, into the cache.
func TestBuildOnce(t *testing.T) {
	log := fakeGo(t)
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = Binary() })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != filepath.Join(cache, "versitygw") {
			t.Errorf("caller %d: %q, %v; want %s", i, paths[i], errs[i], filepath.Join(cache, "versitygw"))
		}
	}
	got := installs(t, log)
	if len(got) != 1 {
		t.Fatalf("go install ran %d times, want once: %q", len(got), got)
	}
	want := "install -trimpath -ldflags=-s -w " + VersitygwModule + "/cmd/versitygw@" + VersitygwVersion
	if !strings.HasPrefix(got[0], want+" GOBIN="+cache+"/.build-") || !strings.HasSuffix(got[0], "GOWORK=off") {
		t.Errorf("go %s\nwant go %s GOBIN=%s/.build-… GOWORK=off", got[0], want, cache)
	}
	// Nothing but the binary and the lock is left in the cache.
	entries, _ := os.ReadDir(cache)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "versitygw versitygw.lock" {
		t.Errorf("cache holds %q", names)
	}
}

// TestScriptAgrees: scripts/versitygw.sh builds into the same place, once,
// and Binary then finds its binary without building.
func TestScriptAgrees(t *testing.T) {
	log := fakeGo(t)
	script, err := filepath.Abs("../../scripts/versitygw.sh")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := exec.Command(script).Output()
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		bin, err := Binary()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != bin {
			t.Errorf("script printed %q, Binary says %q", got, bin)
		}
	}
	if got := installs(t, log); len(got) != 1 {
		t.Errorf("go install ran %d times, want once: %q", len(got), got)
	}
}
