package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecretsCommands: keygen, a first recipient, a secret set from
// standard input and listed by name (its value printed nowhere), a second
// recipient added with an identity that opens the secrets and refused
// without one, the first removed, the last refused, a delete.
func TestSecretsCommands(t *testing.T) {
	dir := t.TempDir()
	bucket := "file://" + filepath.Join(dir, "bucket")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bucket"), 0o755))
	run := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		e := testEnv(&out, &errOut)
		e.in = strings.NewReader(stdin)
		code := runEnv(t.Context(), append(args, "--bucket", bucket), e)
		return code, out.String(), errOut.String()
	}
	keygen := func() (recipient, idFile string) {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, runEnv(t.Context(), []string{"secrets", "keygen"}, testEnv(&out, &errOut)), errOut.String())
		first, _, _ := strings.Cut(out.String(), "\n")
		recipient = strings.TrimPrefix(first, "# recipient: ")
		idFile = filepath.Join(dir, recipient[:12]+".key")
		require.NoError(t, os.WriteFile(idFile, out.Bytes(), 0o600))
		return recipient, idFile
	}
	r1, id1 := keygen()
	r2, id2 := keygen()

	code, _, stderr := run("x", "secrets", "set", "api-key")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "recipients add")
	code, out, stderr := run("", "secrets", "recipients", "add", r1)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "recipient "+r1+" added")
	code, out, stderr = run("hunter2", "secrets", "set", "api-key")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "secret api-key sealed (7 bytes) to the cluster's recipients.\n", out)
	code, out, _ = run("", "secrets", "list")
	require.Equal(t, 0, code)
	require.Equal(t, "api-key\n", out)

	code, _, stderr = run("", "secrets", "recipients", "add", r2)
	require.Equal(t, 1, code, "adding needs an identity that opens the secrets")
	require.Contains(t, stderr, "--identity")
	code, _, stderr = run("", "secrets", "recipients", "add", r2, "--identity", id1)
	require.Equal(t, 0, code, stderr)
	code, out, _ = run("", "secrets", "recipients", "list")
	require.Equal(t, 0, code)
	require.Equal(t, r1+"\n"+r2+"\n", out)
	code, _, stderr = run("", "secrets", "recipients", "remove", r1, "--identity", id2)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run("", "secrets", "recipients", "remove", r2, "--identity", id2)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "last recipient")
	code, _, stderr = run("", "secrets", "delete", "api-key")
	require.Equal(t, 0, code, stderr)
	code, out, _ = run("", "secrets", "list")
	require.Equal(t, 0, code)
	require.Empty(t, out)
}
