package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version of this build: the module, its commit, the Go it was built with",
		setup: func(*flag.FlagSet) action {
			return func(_ context.Context, e env, _ []string) error {
				fmt.Fprintln(e.out, version())
				return nil
			}
		},
	}
}

// version describes this build from what Go recorded in the binary: the
// main module's version (a tag, or "(devel)" for a build of a working
// tree), the commit and its time, whether the tree held changes, and the
// Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "wasmkeep (no build information)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "wasmkeep %s", info.Main.Version)
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		fmt.Fprintf(&b, " commit %s", rev[:min(12, len(rev))])
		if at != "" {
			fmt.Fprintf(&b, " (%s)", at)
		}
		if modified == "true" {
			b.WriteString(" with changes")
		}
	}
	fmt.Fprintf(&b, ", %s", info.GoVersion)
	return b.String()
}
