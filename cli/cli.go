package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
)

// Exit codes.
const (
	exitOK      = 0
	exitProblem = 1
	exitUsage   = 2
)

// env is what a command may use of the outside world. run fills it with the
// real things; tests substitute their own.
type env struct {
	// out receives results, err diagnostics; in is standard input (a
	// secret's value).
	out, err io.Writer
	in       io.Reader
	// openBucket opens the bucket a URL names (bucketurl.Open).
	openBucket func(ctx context.Context, rawURL string) (ownership.Bucket, func() error, error)
	// now is this machine's clock; nil means time.Now.
	now func() time.Time
	// log receives a node's structured logs; nil means text lines on err.
	log *slog.Logger
	// started, when set, is told the address a node serves on once it
	// serves (tests use it to reach a node listening on port 0).
	started func(addr string)
	// fetchStatus reads a node's status page (fetchNodeStatus when nil).
	fetchStatus func(ctx context.Context, addr string, node ownership.NodeID, key []byte) (nodeNow, error)
	// classes are Go-native classes added by an embedding program.
	classes []namedClass
	// front serves the requests outside /actor/ (WithFront); nil: none.
	front actors.Front
}

// goClasses is the registry of Go-native classes: the built-in ones and
// those an embedding program added.
func (e env) goClasses() (*actors.Registry, error) {
	reg := actors.BuiltIn()
	for _, c := range e.classes {
		if err := ingress.ValidClassName(c.name); err != nil {
			return nil, fmt.Errorf("class %q: %w", c.name, err)
		}
		if err := reg.Register(c.name, c.class); err != nil {
			return nil, fmt.Errorf("class %q: %w", c.name, err)
		}
	}
	return reg, nil
}

// logger returns e's logger.
func (e env) logger() *slog.Logger {
	if e.log != nil {
		return e.log
	}
	return slog.New(slog.NewTextHandler(e.err, nil))
}

// clock reads e's clock.
func (e env) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// action runs a command once its flags are parsed; args are the arguments
// left after the flags.
type action func(ctx context.Context, e env, args []string) error

// command is one node of the command tree: a group (subs) or a leaf (setup).
type command struct {
	name    string
	summary string // one line, for listings
	// detail is shown in the command's own help, after the summary.
	detail string
	// args describes the positional arguments a leaf takes; empty means
	// none, and any given are a usage error.
	args string
	subs []*command
	// setup registers a leaf's flags on fs and returns the action that
	// reads them. It is called once per run, and once more for help.
	setup func(fs *flag.FlagSet) action
}

// commands is the whole command tree.
func commands() *command {
	return &command{
		name:    "wasmkeep",
		summary: "a runtime for stateful actors whose nodes share nothing but a bucket",
		subs: []*command{
			serveCommand(),
			bucketCommands(),
			clusterCommands(),
			actorsCommands(),
			secretsCommands(),
			deployCommand(),
			devCommand(),
			versionsCommand(),
			rollbackCommand(),
			versionCommand(),
		},
	}
}

// usageError marks an error in the command line: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError ends a command with a given code after it has already said why
// on its env.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit code %d", e.code) }

// Option adds to the standard node, for programs that embed it.
type Option func(*env)

// WithClass registers a Go-native class under name, next to the built-in
// ones; `serve` refuses to start when two classes share a name.
func WithClass(name string, class actors.Class) Option {
	return func(e *env) { e.classes = append(e.classes, namedClass{name, class}) }
}

// WithFront makes front serve every request outside /actor/ and the
// node's own paths (actors.Front).
func WithFront(front actors.Front) Option {
	return func(e *env) { e.front = front }
}

type namedClass struct {
	name  string
	class actors.Class
}

// Main runs the command line of this process (os.Args) with a context that
// SIGINT and SIGTERM cancel, and exits with its code. It never returns.
func Main(opts ...Option) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr, opts...)
	stop()
	os.Exit(code)
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, opts ...Option) int {
	e := env{out: stdout, err: stderr, in: os.Stdin, openBucket: bucketurl.Open}
	for _, o := range opts {
		o(&e)
	}
	return runEnv(ctx, args, e)
}

// run is Run without options.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, args, stdout, stderr)
}

// runEnv is run with the outside world given.
func runEnv(ctx context.Context, args []string, e env) int {
	return dispatch(ctx, commands(), nil, args, e)
}

func dispatch(ctx context.Context, cmd *command, parents []string, args []string, e env) int {
	path := append(parents[:len(parents):len(parents)], cmd.name)
	name := strings.Join(path, " ")
	if cmd.setup == nil {
		if len(args) == 0 {
			fmt.Fprintf(e.err, "%s: missing command\n\n", name)
			printUsage(e.err, cmd, path)
			return exitUsage
		}
		switch args[0] {
		case "-h", "-help", "--help":
			printHelp(e.out, cmd, path)
			return exitOK
		case "help":
			return helpFor(cmd, path, args[1:], e)
		}
		for _, sub := range cmd.subs {
			if sub.name == args[0] {
				return dispatch(ctx, sub, path, args[1:], e)
			}
		}
		fmt.Fprintf(e.err, "%s: unknown command %q\n\n", name, args[0])
		printUsage(e.err, cmd, path)
		return exitUsage
	}

	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Errors are reported below, once, in our own words.
	fs.SetOutput(io.Discard)
	act := cmd.setup(fs)
	positional, err := parseFlags(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(e.out, cmd, path)
			return exitOK
		}
		fmt.Fprintf(e.err, "%s: %v\nrun '%s --help' for usage\n", name, err, name)
		return exitUsage
	}
	if cmd.args == "" && len(positional) > 0 {
		fmt.Fprintf(e.err, "%s: unexpected argument %q\nrun '%s --help' for usage\n", name, positional[0], name)
		return exitUsage
	}
	err = act(ctx, e, positional)
	var usage usageError
	var exit exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &exit):
		return exit.code
	case errors.As(err, &usage):
		fmt.Fprintf(e.err, "%s: %v\nrun '%s --help' for usage\n", name, err, name)
		return exitUsage
	}
	fmt.Fprintf(e.err, "%s: %v\n", name, err)
	return exitProblem
}

// parseFlags parses the flags wherever they stand among the arguments, so
// that "fence NODE --bucket URL" reads like "fence --bucket URL NODE" (the
// flag package alone stops at the first argument). "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string) (positional []string, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// helpFor serves "help [COMMAND...]".
func helpFor(cmd *command, path []string, args []string, e env) int {
	for _, a := range args {
		var next *command
		for _, sub := range cmd.subs {
			if sub.name == a {
				next = sub
			}
		}
		if next == nil {
			fmt.Fprintf(e.err, "%s: unknown command %q\n", strings.Join(path, " "), a)
			return exitUsage
		}
		cmd, path = next, append(path[:len(path):len(path)], a)
	}
	printHelp(e.out, cmd, path)
	return exitOK
}

// printUsage is the short form: what commands a group has.
func printUsage(w io.Writer, cmd *command, path []string) {
	fmt.Fprintf(w, "usage: %s COMMAND [FLAGS]\n\ncommands:\n", strings.Join(path, " "))
	for _, sub := range cmd.subs {
		fmt.Fprintf(w, "  %-14s %s\n", sub.name, sub.summary)
	}
	fmt.Fprintf(w, "\nrun '%s --help' for every command and flag\n", strings.Join(path, " "))
}

// printHelp documents cmd and, for a group, every command below it with all
// its flags, so that one --help shows everything there is.
func printHelp(w io.Writer, cmd *command, path []string) {
	name := strings.Join(path, " ")
	if cmd.setup != nil {
		printLeaf(w, cmd, name)
		return
	}
	fmt.Fprintf(w, "%s: %s\n\nusage: %s COMMAND [FLAGS]\n", name, cmd.summary, name)
	if cmd.detail != "" {
		fmt.Fprintf(w, "\n%s\n", cmd.detail)
	}
	fmt.Fprintf(w, "\ncommands:\n")
	width := 0
	forEachLeaf(cmd, path, func(_ *command, leafPath []string) { width = max(width, len(strings.Join(leafPath, " "))) })
	forEachLeaf(cmd, path, func(leaf *command, leafPath []string) {
		fmt.Fprintf(w, "  %-*s %s\n", width, strings.Join(leafPath, " "), leaf.summary)
	})
	fmt.Fprintf(w, "\n'%s help COMMAND...' or '%s COMMAND... --help' shows one command.\n", name, name)
	fmt.Fprintf(w, "flags may be written -flag or --flag, with -flag=value or -flag value, before or after arguments.\n")
	fmt.Fprintf(w, "exit codes: 0 success; 1 the command failed or found a problem; 2 bad command line.\n")
	forEachLeaf(cmd, path, func(leaf *command, leafPath []string) {
		fmt.Fprintln(w)
		printLeaf(w, leaf, strings.Join(leafPath, " "))
	})
}

func forEachLeaf(cmd *command, path []string, fn func(*command, []string)) {
	if cmd.setup != nil {
		fn(cmd, path)
		return
	}
	for _, sub := range cmd.subs {
		forEachLeaf(sub, append(path[:len(path):len(path)], sub.name), fn)
	}
}

func printLeaf(w io.Writer, cmd *command, name string) {
	synopsis := name + " [FLAGS]"
	if cmd.args != "" {
		synopsis += " " + cmd.args
	}
	fmt.Fprintf(w, "%s\n    %s\n", synopsis, cmd.summary)
	if cmd.detail != "" {
		for _, line := range strings.Split(cmd.detail, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cmd.setup(fs)
	fs.SetOutput(w)
	fmt.Fprintln(w, "  flags:")
	fs.PrintDefaults()
}
