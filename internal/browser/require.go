package browser

import (
	"os"
	"testing"
)

// NoBrowserEnv names the environment variable that, set to 1, lets browser
// tests skip instead of fail on a machine without Chromium. CI never sets it.
const NoBrowserEnv = "WASMKEEP_NO_BROWSER"

// Require returns the path of Chromium for a test that needs it. When
// Chromium is not on PATH the test fails, saying to run scripts/chromium.sh,
// unless WASMKEEP_NO_BROWSER=1, when it is skipped instead. It lives outside
// the _test files so that any package's tests can call it.
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
