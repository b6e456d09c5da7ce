package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/internal/deploys"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

// The deploy commands: wasm classes shipped through the bucket, which every
// node serves from its next look (serve --deploy-poll) without a restart.

func deployCommand() *command {
	return &command{
		name:    "deploy",
		args:    "CLASS FILE.wasm | --front FILE.wasm",
		summary: "deploy a wasm class (or the front) through the bucket: every node serves it without a restart",
		detail: "Compiles FILE.wasm here with the nodes' checks (a module that does not compile, or speaks a guest\n" +
			"ABI version this build does not serve, is refused and never reaches a node), uploads it as a\n" +
			"version of CLASS named by its hash (deploys/modules/CLASS/HASH), and makes it current\n" +
			"(deploys/current/CLASS). Every node serves it from its next look for deploys: each actor of\n" +
			"the class takes it at its next wake, and a resident actor at its next hibernation, or at its\n" +
			"next event with --now. A socket belongs to its node, not to the version: a room that wakes in\n" +
			"the new version keeps its sockets, tags and attachments. A deployed class wins over a node's\n" +
			"own class of the same name (--classes), and the node logs so once. With --front, the module is\n" +
			"the nodes' front (as serve --front): it replaces each node's own from its next look.",
		setup: setupDeploy,
	}
}

func versionsCommand() *command {
	return &command{
		name:    "versions",
		args:    "CLASS",
		summary: "list the deploys of a class, the current last",
		setup:   setupDeployLeaf(runVersions),
	}
}

func rollbackCommand() *command {
	return &command{
		name:    "rollback",
		args:    "CLASS [VERSION]",
		summary: "make an earlier version of a class current again (the one before the current if none is named)",
		setup:   setupDeployLeaf(runRollback),
	}
}

// deployConfig is what the deploy commands run with.
type deployConfig struct {
	BucketURL string
	Now       bool
	Front     bool
	Timeout   time.Duration
	CacheDir  string
}

func deployFlags(fs *flag.FlagSet) *deployConfig {
	cfg := &deployConfig{BucketURL: defaultBucketURL, Timeout: 5 * time.Minute}
	fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
	fs.BoolVar(&cfg.Now, "now", false, "resident actors of the class switch at their next event, not at their next hibernation")
	fs.BoolVar(&cfg.Front, "front", false, "the module is the nodes' front (no CLASS argument): it serves the paths outside /actor/ on every node, in place of a node's own")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the check, the upload and the record's write")
	return cfg
}

func setupDeploy(fs *flag.FlagSet) action {
	cfg := deployFlags(fs)
	fs.StringVar(&cfg.CacheDir, "cache-dir", "", "compilation cache of the check (unset: none)")
	return func(ctx context.Context, e env, args []string) error {
		if cfg.Front {
			args = append([]string{deploys.FrontName}, args...)
		}
		if len(args) != 2 {
			return usageError{fmt.Errorf("want CLASS and FILE.wasm (FILE.wasm alone with --front), got %d arguments", len(args))}
		}
		class, file := args[0], args[1]
		if err := ingress.ValidClassName(class); err != nil && !cfg.Front {
			return usageError{err}
		}
		module, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		if err := checkModule(ctx, class, module, cfg.CacheDir); err != nil {
			return fmt.Errorf("refusing to deploy %s as %s: %w", file, class, err)
		}
		return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
			host, _ := os.Hostname()
			d, err := deploys.Upload(ctx, b, class, module, deploys.Deploy{At: e.clock().UTC(), By: "wasmkeep deploy on " + host, Now: cfg.Now})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.out, "class %s version %s (%d bytes) deployed to %s: every node serves it within its deploy poll.\n",
				class, d.Version, d.Size, describeBucket(cfg.BucketURL))
			return nil
		})
	}
}

// checkModule compiles module as the nodes will, on a runtime of its own.
func checkModule(ctx context.Context, class string, module []byte, cacheDir string) error {
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.Config{CacheDir: cacheDir})
	if err != nil {
		return err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	_, err = rt.Compile(ctx, class, module)
	return err
}

func setupDeployLeaf(run func(ctx context.Context, cfg *deployConfig, e env, b ownership.Bucket, args []string) error) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		cfg := deployFlags(fs)
		return func(ctx context.Context, e env, args []string) error {
			if cfg.Front {
				args = append([]string{deploys.FrontName}, args...)
			}
			if len(args) < 1 || len(args) > 2 {
				return usageError{fmt.Errorf("want CLASS (none with --front), got %d arguments", len(args))}
			}
			if err := ingress.ValidClassName(args[0]); err != nil && !cfg.Front {
				return usageError{err}
			}
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error { return run(ctx, cfg, e, b, args) })
		}
	}
}

func runVersions(ctx context.Context, _ *deployConfig, e env, b ownership.Bucket, args []string) error {
	if len(args) != 1 {
		return usageError{errors.New("versions takes one CLASS")}
	}
	r, _, err := deploys.Read(ctx, b, args[0])
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tDEPLOYED\tSIZE\tHOW\t")
	for i, d := range r.History {
		how := "deploy"
		if d.Rollback {
			how = "rollback"
		}
		if d.Now {
			how += " --now"
		}
		if i == len(r.History)-1 {
			how += " (current)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t\n", d.Version, d.At.Format(time.RFC3339), d.Size, how)
	}
	return tw.Flush()
}

func runRollback(ctx context.Context, cfg *deployConfig, e env, b ownership.Bucket, args []string) error {
	version := ""
	if len(args) == 2 {
		version = args[1]
	}
	host, _ := os.Hostname()
	d, err := deploys.Rollback(ctx, b, args[0], version, deploys.Deploy{At: e.clock().UTC(), By: "wasmkeep rollback on " + host, Now: cfg.Now})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "class %s rolled back to version %s: every node serves it within its deploy poll.\n", args[0], d.Version)
	return nil
}
