package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/deploys"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

// The dev loop: a node (serve, with every flag of its) and a watcher that
// builds each Go guest of a folder when its files change and deploys it
// through the bucket as 'wasmkeep deploy --now' does, so that a reload
// keeps every socket open and every alarm set.

func devCommand() *command {
	return &command{
		name:    "dev",
		summary: "run a node and rebuild and deploy the wasm classes of a folder as their files change",
		detail: "Runs a node as 'serve' does (every flag of serve applies; its deploy poll is 200ms unless\n" +
			"given), and watches --watch (default examples): each folder in it whose name ends in -wasm is a\n" +
			"Go guest, built with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared and deployed as the\n" +
			"class of the folder's name through the bucket, as 'wasmkeep deploy --now' does: at the start,\n" +
			"and each time one of its files changes (looked at twice a second). The sockets belong to the\n" +
			"node, so an open page keeps its socket across a reload, and alarms keep firing. A build or a\n" +
			"check that fails is logged and the version before served. Needs the Go toolchain.",
		setup: setupDev,
	}
}

func setupDev(fs *flag.FlagSet) action {
	watch := "examples"
	every := 500 * time.Millisecond
	fs.StringVar(&watch, "watch", watch, "folder of the Go guests to build and deploy (each NAME-wasm folder in it)")
	serve := setupServeWith(fs, func(ctx context.Context, cfg *serveConfig, e env, serve func() error) error {
		deployPollSet := false
		fs.Visit(func(f *flag.Flag) { deployPollSet = deployPollSet || f.Name == "deploy-poll" })
		if !deployPollSet {
			cfg.DeployPoll = 200 * time.Millisecond
		}
		if st, err := os.Stat(watch); err != nil || !st.IsDir() {
			return usageError{fmt.Errorf("--watch %s: not a folder", watch)}
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := &devWatch{dir: watch, log: e.logger().With(slog.String("component", "dev")), stamps: map[string]string{}, cacheDir: cfg.CacheDir}
		bucketURL := cfg.BucketURL
		done := make(chan struct{})
		go func() {
			defer close(done)
			// The node makes the bucket (a directory) if it is new: the
			// watcher opens it once the node has.
			for ctx.Err() == nil {
				b, closeBucket, err := e.openBucket(ctx, bucketURL)
				if err == nil {
					w.bucket = b
					w.run(ctx, every)
					closeBucket()
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(every):
				}
			}
		}()
		err := serve()
		cancel()
		<-done
		return err
	})
	return serve
}

// devWatch builds and deploys the guests of a folder as they change.
type devWatch struct {
	dir      string
	bucket   ownership.Bucket
	log      *slog.Logger
	cacheDir string
	stamps   map[string]string // per class: what its files looked like when last built
}

func (w *devWatch) run(ctx context.Context, every time.Duration) {
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.Config{CacheDir: w.cacheDir})
	if err != nil {
		w.log.Error("dev loop off: no wasm runtime to check builds", slog.Any("err", err))
		return
	}
	defer rt.Close(context.WithoutCancel(ctx))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.pass(ctx, rt)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass builds and deploys each guest whose files changed.
func (w *devWatch) pass(ctx context.Context, rt *wasmhost.Runtime) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		w.log.Warn("watched folder not read", slog.Any("err", err))
		return
	}
	for _, ent := range entries {
		class := ent.Name()
		if !ent.IsDir() || !strings.HasSuffix(class, "-wasm") {
			continue
		}
		pkg := filepath.Join(w.dir, class)
		stamp, err := filesStamp(pkg)
		if err != nil || stamp == w.stamps[class] {
			continue
		}
		w.stamps[class] = stamp
		if err := w.deploy(ctx, rt, class, pkg); err != nil {
			if ctx.Err() == nil {
				w.log.Error("class not reloaded: the version before is served", slog.String("class", class), slog.Any("err", err))
			}
			continue
		}
	}
}

// deploy builds the guest at pkg and deploys it as class.
func (w *devWatch) deploy(ctx context.Context, rt *wasmhost.Runtime, class, pkg string) error {
	start := time.Now()
	out, err := os.CreateTemp("", class+"-*.wasm")
	if err != nil {
		return err
	}
	out.Close()
	defer os.Remove(out.Name())
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-o", out.Name(), "./"+filepath.ToSlash(pkg))
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build: %w\n%s", err, msg)
	}
	module, err := os.ReadFile(out.Name())
	if err != nil {
		return err
	}
	if _, err := rt.Compile(ctx, class, module); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if r, _, err := deploys.Read(ctx, w.bucket, class); err == nil && r.Current().Version == deploys.Version(module) {
		return nil // the same bytes: nothing to deploy
	} else if err != nil && !errors.Is(err, deploys.ErrNoClass) {
		return err
	}
	d, err := deploys.Upload(ctx, w.bucket, class, module, deploys.Deploy{At: time.Now().UTC(), By: "wasmkeep dev", Now: true})
	if err != nil {
		return err
	}
	w.log.Info("class built and deployed", slog.String("class", class), slog.String("version", d.Version),
		slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	return nil
}

// filesStamp sums the names, sizes and modification times of the files
// under dir.
func filesStamp(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %d\n", path, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}
