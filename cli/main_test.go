package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// ignoringURL is a valid bucket URL that testEnv opens as a store that
// ignores conditions, which no real URL can name.
const ignoringURL = "file:///wasmkeep-test/ignoring-conditions"

// testEnv opens buckets as the real command does, except ignoringURL.
func testEnv(stdout, stderr *bytes.Buffer) env {
	return env{out: stdout, err: stderr, openBucket: func(ctx context.Context, raw string) (ownership.Bucket, func() error, error) {
		if raw == ignoringURL {
			return memstore.New(memstore.Faults{IgnoreConditions: true}), func() error { return nil }, nil
		}
		return bucketurl.Open(ctx, raw)
	}}
}

func runTest(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runEnv(t.Context(), args, testEnv(&out, &errOut))
	return code, out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	srv := s3test.Start(t)
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		code    int
		stdout  []string // fragments stdout must contain
		stderr  []string // fragments stderr must contain
		workdir bool     // run in a fresh directory, for the default bucket
	}{
		{name: "no command", code: exitUsage, stderr: []string{"missing command", "bucket"}},
		{name: "unknown command", args: []string{"serve-all"}, code: exitUsage, stderr: []string{`unknown command "serve-all"`}},
		{name: "bucket without subcommand", args: []string{"bucket"}, code: exitUsage, stderr: []string{"check"}},
		{name: "unknown flag", args: []string{"bucket", "check", "--bucekt", "x"}, code: exitUsage, stderr: []string{"bucekt"}},
		{name: "stray argument", args: []string{"bucket", "check", "extra"}, code: exitUsage, stderr: []string{`"extra"`}},
		{name: "bad url", args: []string{"bucket", "check", "--bucket", "gs://b"}, code: exitUsage, stderr: []string{`unknown scheme "gs"`}},
		{name: "bad timeout", args: []string{"bucket", "check", "--timeout", "0s"}, code: exitUsage, stderr: []string{"--timeout"}},
		{name: "sound memory", args: []string{"bucket", "check", "--bucket", "mem://"}, code: exitOK,
			stdout: []string{"verdict: sound"}},
		{name: "sound directory", args: []string{"bucket", "check", "--bucket", filepath.Join(dir, "b")}, code: exitOK,
			stdout: []string{"verdict: sound", "directory"}},
		{name: "sound versitygw", args: []string{"bucket", "check", "--bucket", srv.URL("cli"), "--prefix", "probes/"}, code: exitOK,
			stdout: []string{"verdict: sound", "s3://" + srv.Bucket + "/cli/"}},
		{name: "ignores conditions", args: []string{"bucket", "check", "--bucket", ignoringURL}, code: exitProblem,
			stdout: []string{"NOT SOUND", "If-None-Match"},
			stderr: []string{"not sound", "create-only put (If-None-Match: *)", "replace-only put (If-Match)"}},
		{name: "unreachable", args: []string{"bucket", "check", "--bucket", "s3://b?endpoint=http://127.0.0.1:1&timeout=2s&max_attempts=1"},
			code: exitProblem, stdout: []string{"NOT CHECKED"}, stderr: []string{"could not be checked", "connection refused"}},
		{name: "missing directory", args: []string{"bucket", "check", "--bucket", filepath.Join(dir, "typo")}, code: exitProblem,
			stderr: []string{filepath.Join(dir, "typo") + ": no such directory"}},
		{name: "default bucket, missing", args: []string{"bucket", "check"}, code: exitProblem, workdir: true,
			stderr: []string{"wasmkeep-data: no such directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.workdir {
				t.Chdir(t.TempDir())
			}
			code, stdout, stderr := runTest(t, tt.args...)
			if tt.name == "missing directory" {
				if _, err := os.Stat(filepath.Join(dir, "typo")); err == nil {
					t.Error("the check made the directory it was asked to check")
				}
			}
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestHelp checks that --help documents every command and flag, wherever it
// is asked for.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
	} {
		code, stdout, _ := runTest(t, args...)
		if code != exitOK {
			t.Errorf("%q: exit code %d", args, code)
		}
		forEachLeaf(commands(), []string{"wasmkeep"}, func(leaf *command, path []string) {
			if !strings.Contains(stdout, strings.Join(path, " ")) {
				t.Errorf("%q: help lacks command %q", args, strings.Join(path, " "))
			}
		})
		for _, flag := range []string{"-bucket", "-prefix", "-timeout", "AWS_ACCESS_KEY_ID", "exit codes"} {
			if !strings.Contains(stdout, flag) {
				t.Errorf("%q: help lacks %q:\n%s", args, flag, stdout)
			}
		}
	}
	for _, args := range [][]string{
		{"bucket", "check", "--help"}, {"help", "bucket", "check"}, {"bucket", "--help"},
	} {
		code, stdout, _ := runTest(t, args...)
		if code != exitOK || !strings.Contains(stdout, "-bucket") || !strings.Contains(stdout, "./wasmkeep-data") {
			t.Errorf("%q: exit code %d, output:\n%s", args, code, stdout)
		}
	}
	if code, _, _ := runTest(t, "help", "nope"); code != exitUsage {
		t.Errorf("help for an unknown command: exit code %d, want %d", code, exitUsage)
	}
}

// TestVersion: `wasmkeep version` names the program and the Go it was
// built with.
func TestVersion(t *testing.T) {
	code, stdout, _ := runTest(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "wasmkeep ") || !strings.Contains(stdout, runtime.Version()) {
		t.Fatalf("version: exit %d, %q", code, stdout)
	}
}
