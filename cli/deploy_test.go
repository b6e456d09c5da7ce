package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeployCommands: a module that does not compile is refused before
// anything reaches the bucket; a real one is deployed, listed with its
// time, deployed again as a second version and rolled back.
func TestDeployCommands(t *testing.T) {
	dir := t.TempDir()
	bucket := "file://" + filepath.Join(dir, "bucket")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bucket"), 0o755))
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := runEnv(t.Context(), append(args, "--bucket", bucket), testEnv(&out, &errOut))
		return code, out.String(), errOut.String()
	}
	bad := filepath.Join(dir, "bad.wasm")
	require.NoError(t, os.WriteFile(bad, []byte("\x00asm but not really"), 0o644))
	code, _, stderr := run("deploy", "counter2", bad)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "refusing to deploy")
	code, _, stderr = run("versions", "counter2")
	require.Equal(t, 1, code, "nothing reached the bucket")
	require.Contains(t, stderr, "never deployed")

	build := func(name string, ldflags string) string {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", ldflags, "-o", out, "../examples/room-wasm")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		msg, err := cmd.CombinedOutput()
		require.NoError(t, err, string(msg))
		return out
	}
	v1, v2 := build("v1.wasm", "-X main.version=1"), build("v2.wasm", "-X main.version=2")
	code, out, stderr := run("deploy", "room", v1)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "class room version ")
	code, _, stderr = run("deploy", "room", v2, "--now")
	require.Equal(t, 0, code, stderr)
	code, out, _ = run("versions", "room")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Contains(t, lines[2], "deploy --now (current)")
	first := strings.Fields(lines[1])[0]
	code, out, stderr = run("rollback", "room")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "rolled back to version "+first)
	code, out, _ = run("versions", "room")
	require.Equal(t, 0, code)
	require.Contains(t, out, "rollback (current)")
}
