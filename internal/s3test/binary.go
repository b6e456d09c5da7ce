package s3test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

const (
	// VersitygwModule and VersitygwVersion pin the server the tests run.
	VersitygwModule  = "github.com/versity/versitygw"
	VersitygwVersion = "v1.8.0"
	// EnvBinary names an explicit server binary, used as is.
	EnvBinary = "WASMKEEP_VERSITYGW"

	// buildTimeout bounds one build; a cold build on a busy two-core
	// machine takes several minutes.
	buildTimeout = 30 * time.Minute
)

// CacheDir is where the server binary is cached:
// $XDG_CACHE_HOME/wasmkeep/bin, else $HOME/.cache/wasmkeep/bin. It is spelled
// out rather than taken from os.UserCacheDir so that scripts/versitygw.sh can
// compute the same path on every platform.
func CacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "wasmkeep", "bin"), nil
	}
	home := os.Getenv("HOME")
	if home == "" {
		return "", errors.New("s3test: neither XDG_CACHE_HOME nor HOME is set")
	}
	return filepath.Join(home, ".cache", "wasmkeep", "bin"), nil
}

// Binary returns the path of a versitygw binary, building it into CacheDir
// when the cache holds none of VersitygwVersion.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		// An explicit binary is the caller's choice, any version.
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("s3test: $%s: %w", EnvBinary, err)
		}
		return p, nil
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "versitygw")
	if pinned(bin) {
		return bin, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, "versitygw.lock"))
	if err != nil {
		return "", fmt.Errorf("s3test: lock the versitygw cache: %w", err)
	}
	defer unlock()
	// Another process may have built it while we waited for the lock.
	if pinned(bin) {
		return bin, nil
	}
	if err := build(dir, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// pinned reports whether path is a versitygw binary of the pinned version.
func pinned(path string) bool {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return false
	}
	return info.Main.Path == VersitygwModule && info.Main.Version == VersitygwVersion
}

// build installs the pinned versitygw into a private directory inside dir and
// renames it to bin, so that the cache only ever holds a complete binary.
// The caller holds the cache lock.
func build(dir, bin string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("s3test: versitygw is not in %s and there is no go command to build it: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	defer os.RemoveAll(tmp)

	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	pkg := VersitygwModule + "/cmd/versitygw@" + VersitygwVersion
	cmd := exec.CommandContext(ctx, goTool, "install", "-trimpath", "-ldflags=-s -w", pkg)
	// Run outside any module or workspace so that only the pinned
	// version's own go.mod decides the build.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("s3test: go install %s: %w\n%s", pkg, err, tail(out.Bytes(), 4096))
	}
	if err := os.Rename(filepath.Join(tmp, "versitygw"), bin); err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	if !pinned(bin) {
		return fmt.Errorf("s3test: built %s but it does not report %s %s", bin, VersitygwModule, VersitygwVersion)
	}
	return nil
}

// tail returns the last n bytes of b, which hold the interesting part of a
// failed build's output.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
