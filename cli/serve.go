package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/budget"
	"github.com/wasmkeep/wasmkeep/internal/certfile"
	"github.com/wasmkeep/wasmkeep/internal/secrets"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketcheck"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
	"github.com/wasmkeep/wasmkeep/peer"
	"github.com/wasmkeep/wasmkeep/sockets"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

func serveCommand() *command {
	return &command{
		name:    "serve",
		summary: "run a node: serve /actor/<class>/<name> over HTTP",
		detail: "Opens the bucket, refuses it unless it honours conditional writes (as 'bucket check'),\n" +
			"takes the node's lease and serves /actor/<class>/<name>[/rest], /healthz, /readyz and\n" +
			"/metrics, and every other path through the front, if any. Built-in class: counter (GET\n" +
			"increments, GET ?read reads); the wasmkeep binary adds chat (a chat room: open / or /room/ROOM\n" +
			"in a browser, through its front), reminders and relay, a program of your own the classes it\n" +
			"registers (cli.WithClass) and its front (cli.WithFront). Every NAME.wasm file\n" +
			"in --classes is served as the wasm class NAME: a module built with GOOS=wasip1 GOARCH=wasm\n" +
			"-buildmode=c-shared on wasmhost/guest ('make examples' builds examples/*-wasm there). A NAME\n" +
			"that is a built-in class, or a file that cannot be read or compiled, stops the start.\n" +
			"Requests for an actor another node holds are forwarded to it. SIGINT or SIGTERM stops\n" +
			"cleanly: in-flight requests finish, resident actors hibernate, every hold is released and\n" +
			"the lease written released; exit 0. A lost lease (fenced, or a twin took it) exits 1.\n\n" +
			"Answers. Each means one thing. A success: the event ran and its writes are durable. 503\n" +
			"with Retry-After (and a socket closed with 1012): a refusal, the event took no effect\n" +
			"anywhere, so a retry, here or on another node, is always safe. 504 with Wasmkeep-Outcome:\n" +
			"unknown: the event may have taken effect and this node cannot tell (its commit had no\n" +
			"answer and a read of the actor's state could not tell, or the node holding the actor\n" +
			"stopped answering after it had the request); retry\n" +
			"it only with the same Idempotency-Key. A request with an Idempotency-Key header (1 to 255\n" +
			"visible ASCII characters) runs at most once: the actor remembers the key with its answer,\n" +
			"in the same commit as the event's writes, for --idempotency-window (at most\n" +
			"--idempotency-keys per actor); the same request with the key again, on any node, gets the\n" +
			"first answer (marked Idempotent-Replayed: true) without running, 409 while the first still\n" +
			"runs, and 422 if the key came with another request.\n\n" +
			"Budgets. What a client can make the node hold is bounded, so that no client can take it\n" +
			"down. The file limit (ulimit -n) is divided at start and the division logged: a sixteenth\n" +
			"(at least 64) is kept for the bucket, the lease and peers, which clients never get; a\n" +
			"sixty-fourth (at least 16) admits connections past --max-conns only for /healthz, /readyz\n" +
			"and peer requests (anything else there waits up to 1 s for a place, then gets 503); of the\n" +
			"rest, three quarters bound\n" +
			"--max-sockets and a quarter --max-conns unless they are set (set beyond what the limit holds,\n" +
			"the start is refused with the numbers). At --max-conns the oldest idle keep-alive connection\n" +
			"is closed to make room; past every band a new connection is closed at once. Idle keep-alive\n" +
			"connections close after --http-idle-timeout; a request's header must arrive within 10 s and\n" +
			"fit 64 KiB. A body over --max-body gets 413 before it is read (no 100 Continue); bodies held\n" +
			"at once are bounded by --max-body-inflight (503 with Retry-After past it); a body must arrive\n" +
			"within --body-timeout plus its size at --body-min-rate, else 408.",
		setup: setupServe,
	}
}

// serveConfig is what `wasmkeep serve` runs with.
type serveConfig struct {
	Listen    string
	Advertise string
	// TLSCert and TLSKey, when set, serve the public and admin listeners
	// over TLS, the pair read again when the files change; PeerCA is the
	// cluster's CA the peers' certificates are checked against (unset:
	// the system's roots).
	TLSCert, TLSKey, PeerCA string
	// SecretsIdentity is the age identity file that opens the application's
	// secrets (or WASMKEEP_SECRETS_IDENTITY); SecretsPoll how often they
	// are read again.
	SecretsIdentity string
	SecretsPoll     time.Duration
	// DeployPoll is how often the node looks for deploys.
	DeployPoll time.Duration
	// Front is a wasm module to serve the paths outside /actor/ with
	// (wasmhost.Front); it replaces a front the program registered.
	Front string
	// AdminListen, when set, serves the admin pages there: the status
	// page, the tree, the metrics and Go's profiles (net/http/pprof).
	// PublicAdmin serves the status page and the tree on the public
	// listener too.
	AdminListen string
	PublicAdmin bool
	// Dev: a failed event's 500 carries its error (--dev).
	Dev bool
	// ClusterKeyFile names the file holding the cluster key ("" reads
	// $WASMKEEP_CLUSTER_KEY, and none is none).
	ClusterKeyFile string
	BucketURL      string
	Node           string
	TakeOver       bool
	IdleTimeout    time.Duration
	MaxResident    int
	MaxState       byteSize
	BlockCache     byteSize
	MaxBody        byteSize
	MaxSockets     int // 0: derived from the file limit
	MaxConns       int // 0: derived from the file limit
	HTTPIdle       time.Duration
	// MaxBodyInflight bounds the request bodies held at once (0: derived
	// from memory); BodyTimeout and BodyMinRate how fast one must arrive.
	MaxBodyInflight byteSize
	BodyTimeout     time.Duration
	BodyMinRate     byteSize
	MaxMessage      byteSize
	WSQueueTotal    byteSize // 0: the sockets package's default
	LogLevel        slog.Level
	// LogJSON: the log is JSON, a record a line; otherwise text.
	LogJSON      bool
	WSPing       time.Duration
	WSPong       time.Duration
	WSIOUring    bool
	Lease        ownership.Config // only the lease durations are read from flags
	StopTimeout  time.Duration
	DrainOnStop  bool
	FailoverWait time.Duration
	// ClassesSet: --classes was given, so its directory must exist (the
	// default may be missing: no wasm classes).
	ClassesSet bool
	// Classes is the directory of the wasm classes; CacheDir keeps their
	// compiled code across starts ("" keeps none on disk).
	Classes          string
	CacheDir         string
	WasmMemory       byteSize
	WasmEventTimeout time.Duration
	WasmTrim         time.Duration
	CallTimeout      time.Duration
	// EgressAllow is where actors' outbound HTTP requests may go
	// (egress.Allow's rules); FetchTimeout and FetchMaxBody bound each.
	EgressAllow  ruleList
	FetchTimeout time.Duration
	FetchMaxBody byteSize
	// KeyWindow and MaxKeys: how long, and how many, event keys an actor
	// remembers (internal/actorhost/keys.go).
	KeyWindow time.Duration
	MaxKeys   int
	// WasmIsolation overrides the isolation wasm modules declare, by class
	// name ("" for every class); WasmShared sizes each class's shared
	// guests (0: GOMAXPROCS).
	WasmIsolation isolationFlag
	WasmShared    int
}

// nodeID is --node, or "n" and the listen port.
func (c serveConfig) nodeID() ownership.NodeID {
	if c.Node != "" {
		return ownership.NodeID(c.Node)
	}
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return ""
	}
	return ownership.NodeID("n" + port)
}

func (c serveConfig) Validate() error {
	var errs []error
	listenOK := true
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		listenOK = false
		if _, perr := strconv.ParseUint(c.Listen, 10, 16); perr == nil {
			errs = append(errs, fmt.Errorf("--listen %q: want host:port, such as 127.0.0.1:%s (or :%s for every interface)", c.Listen, c.Listen, c.Listen))
		} else {
			errs = append(errs, fmt.Errorf("--listen %q: want host:port, such as 127.0.0.1:8080: %w", c.Listen, err))
		}
	}
	if target, err := bucketurl.Parse(c.BucketURL); err != nil {
		errs = append(errs, err)
	} else if target.Local() && c.CacheDir != "" && within(c.CacheDir, target.Dir) {
		errs = append(errs, fmt.Errorf("--cache-dir %s lies in the bucket directory %s: put it elsewhere", c.CacheDir, target.Dir))
	}
	if err := ownership.ValidateNodeID(c.nodeID()); err != nil && (listenOK || c.Node != "") {
		// Without --node the id comes from --listen's port: a bad
		// --listen is said once, above.
		errs = append(errs, fmt.Errorf("--node: %w", err))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--idle-timeout %v: must be positive", c.IdleTimeout))
	}
	if c.MaxResident <= 0 {
		errs = append(errs, fmt.Errorf("--max-resident %d: must be positive", c.MaxResident))
	}
	if c.MaxState < actors.MaxKeyLen+actors.MaxValueLen {
		errs = append(errs, fmt.Errorf("--max-state %v: must hold at least one key and value of the largest sizes (%d bytes)", &c.MaxState, actors.MaxKeyLen+actors.MaxValueLen))
	}
	if c.BlockCache < 1<<20 {
		errs = append(errs, fmt.Errorf("--block-cache %v: must be at least 1MiB", &c.BlockCache))
	}
	if c.MaxBody <= 0 {
		errs = append(errs, fmt.Errorf("--max-body %v: must be positive", c.MaxBody))
	}
	if c.MaxSockets < 0 {
		errs = append(errs, fmt.Errorf("--max-sockets %d: must be positive, or 0 to derive it from the file limit", c.MaxSockets))
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("--max-conns %d: must be positive, or 0 to derive it from the file limit", c.MaxConns))
	}
	if c.HTTPIdle <= 0 {
		errs = append(errs, fmt.Errorf("--http-idle-timeout %v: must be positive", c.HTTPIdle))
	}
	if c.MaxBodyInflight < 0 || (c.MaxBodyInflight > 0 && c.MaxBodyInflight < c.MaxBody) {
		errs = append(errs, fmt.Errorf("--max-body-inflight %v: must be at least --max-body (%v), or 0 to derive it from memory", &c.MaxBodyInflight, &c.MaxBody))
	}
	if c.WSQueueTotal < 0 || (c.WSQueueTotal > 0 && c.WSQueueTotal < max(4<<20, c.MaxMessage)) {
		errs = append(errs, fmt.Errorf("--ws-send-queue-total %v: must be at least one socket's send queue (4 MiB, or --max-message if larger), or 0 for the default", &c.WSQueueTotal))
	}
	if c.BodyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--body-timeout %v: must be positive", c.BodyTimeout))
	}
	if c.BodyMinRate <= 0 {
		errs = append(errs, fmt.Errorf("--body-min-rate %v: must be positive", &c.BodyMinRate))
	}
	if c.WSPing <= 0 || c.WSPong <= 0 || c.WSPong > c.WSPing {
		errs = append(errs, fmt.Errorf("--ws-ping %v, --ws-pong-timeout %v: must be positive, the timeout at most the interval", c.WSPing, c.WSPong))
	}
	if c.MaxMessage <= 0 || c.MaxMessage > 64<<20 {
		errs = append(errs, fmt.Errorf("--max-message %v: must be positive and at most 64 MiB", c.MaxMessage))
	}
	if c.StopTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--stop-timeout %v: must be positive", c.StopTimeout))
	}
	if c.WasmMemory <= 0 {
		errs = append(errs, fmt.Errorf("--wasm-memory %v: must be positive", &c.WasmMemory))
	} else if err := c.wasm(nil).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--wasm-memory: %w", err))
	}
	if c.WasmTrim >= 0 && c.WasmTrim < time.Millisecond {
		errs = append(errs, fmt.Errorf("--wasm-trim-after %v: must be at least 1ms, or negative to keep the memory", c.WasmTrim))
	}
	if c.KeyWindow <= 0 {
		errs = append(errs, fmt.Errorf("--idempotency-window %v: must be positive", c.KeyWindow))
	}
	if c.MaxKeys <= 0 {
		errs = append(errs, fmt.Errorf("--idempotency-keys %d: must be positive", c.MaxKeys))
	}
	if c.FetchTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--fetch-timeout %v: must be positive", c.FetchTimeout))
	}
	if c.FetchMaxBody <= 0 {
		errs = append(errs, fmt.Errorf("--fetch-max-body %v: must be positive", int64(c.FetchMaxBody)))
	}
	if _, err := egress.ParseAllow(c.EgressAllow); err != nil {
		errs = append(errs, fmt.Errorf("--egress-allow: %w", err))
	}
	if c.DeployPoll <= 0 {
		errs = append(errs, fmt.Errorf("--deploy-poll %v: must be positive", c.DeployPoll))
	}
	if c.SecretsPoll <= 0 {
		errs = append(errs, fmt.Errorf("--secrets-poll %v: must be positive", c.SecretsPoll))
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--call-timeout %v: must be positive", c.CallTimeout))
	}
	if c.WasmEventTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--wasm-event-timeout %v: must be positive", c.WasmEventTimeout))
	}
	if c.WasmShared < 0 {
		errs = append(errs, fmt.Errorf("--wasm-shared-guests %d: must not be negative", c.WasmShared))
	}
	core := c.core("instance")
	if core.Node == "" {
		core.Node = "n" // the node id's own error is said above: check the lease settings alone
	}
	if err := core.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("lease settings: %w", err))
	}
	return errors.Join(errs...)
}

// claimer is a bucket on which a process can prove that the processes
// before it have ended (dirstore.Store.Claim, sqlitestore.Store.Claim).
type claimer interface {
	Claim(name string) (release func() error, free bool, err error)
}

// core is the ownership configuration of one start of the node.
func (c serveConfig) core(instance ownership.InstanceID) ownership.Config {
	core := c.Lease
	core.Node, core.Instance, core.Addr, core.TakeOver = c.nodeID(), instance, c.Advertise, c.TakeOver
	core.FailoverWait = c.FailoverWait
	return core
}

// wasm is the configuration of the wasm runtime.
func (c serveConfig) wasm(log *slog.Logger) wasmhost.Config {
	return wasmhost.Config{CacheDir: c.CacheDir, MemoryLimit: int64(c.WasmMemory), EventTimeout: c.WasmEventTimeout,
		TrimInterval: c.WasmTrim, Isolation: c.WasmIsolation, SharedGuests: c.WasmShared, Logger: log}
}

// isolationFlag is --wasm-isolation: "actor" or "class" for every wasm
// class, or NAME=actor and NAME=class for one; repeatable, the last for a
// name standing.
type isolationFlag map[string]wasmhost.Isolation

func (f *isolationFlag) String() string {
	if f == nil || len(*f) == 0 {
		return ""
	}
	var parts []string
	for name, iso := range *f {
		if name == "" {
			parts = append(parts, iso.String())
		} else {
			parts = append(parts, name+"="+iso.String())
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (f *isolationFlag) Set(s string) error {
	name, mode, named := strings.Cut(s, "=")
	if !named {
		name, mode = "", s
	} else if err := ingress.ValidClassName(name); err != nil {
		return fmt.Errorf("%q: not a class name: %w", name, err)
	}
	iso, err := wasmhost.ParseIsolation(mode)
	if err != nil {
		return err
	}
	if *f == nil {
		*f = isolationFlag{}
	}
	(*f)[name] = iso
	return nil
}

// defaultCacheDir is where compiled wasm classes are kept unless
// --cache-dir says otherwise: the user's cache directory (never the
// bucket's directory, which holds only the bucket's objects).
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "wasmkeep", "wasm")
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// byteSize is a flag value in bytes, written as 1048576, 512KiB, 1MiB or 1GiB.
// ruleList is a flag of comma-separated values, repeatable.
type ruleList []string

func (r *ruleList) String() string { return strings.Join(*r, ",") }

func (r *ruleList) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*r = append(*r, v)
		}
	}
	return nil
}

type byteSize int64

func (b *byteSize) String() string {
	switch {
	case *b > 0 && *b%(1<<30) == 0:
		return strconv.FormatInt(int64(*b)>>30, 10) + "GiB"
	case *b > 0 && *b%(1<<20) == 0:
		return strconv.FormatInt(int64(*b)>>20, 10) + "MiB"
	case *b > 0 && *b%(1<<10) == 0:
		return strconv.FormatInt(int64(*b)>>10, 10) + "KiB"
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return fmt.Errorf("want a size such as 1048576, 512KiB, 1MiB or 1GiB")
	}
	*b = byteSize(n * mult)
	return nil
}

func setupServe(fs *flag.FlagSet) action { return setupServeWith(fs, nil) }

// setupServeWith registers serve's flags on fs; its action runs the node
// through around, when set (wasmkeep dev), which calls serve.
func setupServeWith(fs *flag.FlagSet, around func(ctx context.Context, cfg *serveConfig, e env, serve func() error) error) action {
	cfg := serveConfig{
		Listen:       "127.0.0.1:8080",
		BucketURL:    defaultBucketURL,
		IdleTimeout:  10 * time.Second,
		MaxResident:  10000,
		MaxState:     actorhost.DefaultMaxState,
		BlockCache:   actorhost.DefaultBlockCache,
		MaxBody:      ingress.DefaultMaxBody,
		HTTPIdle:     ingress.DefaultHTTPIdleTimeout,
		BodyTimeout:  ingress.DefaultBodyTimeout,
		BodyMinRate:  ingress.DefaultBodyMinRate,
		MaxMessage:   sockets.DefaultMaxMessage,
		WSPing:       sockets.DefaultPingInterval,
		WSIOUring:    true,
		WSPong:       sockets.DefaultPongTimeout,
		Lease:        ownership.DefaultConfig("", ""),
		StopTimeout:  30 * time.Second,
		DrainOnStop:  true,
		FailoverWait: ingress.DefaultFailoverWait,
		Classes:      "classes",
		CacheDir:     defaultCacheDir(),
		WasmMemory:   wasmhost.DefaultMemoryLimit,
		CallTimeout:  actorhost.DefaultCallTimeout,
		FetchTimeout: egress.DefaultTimeout,
		FetchMaxBody: egress.DefaultMaxResponseBody,
		KeyWindow:    actorhost.DefaultKeyWindow,
		MaxKeys:      actorhost.DefaultMaxKeys,
	}
	cfg.WasmEventTimeout = wasmhost.DefaultEventTimeout
	cfg.WasmTrim = wasmhost.DefaultTrimInterval
	fs.TextVar(&cfg.LogLevel, "log-level", slog.LevelInfo, "least level logged: debug (also each actor's wake and hibernation), info, warn or error")
	fs.Func("log-format", "the log's format: text (key=value, the default) or json (a JSON object a line, for a log collector)", func(v string) error {
		switch v {
		case "text":
			cfg.LogJSON = false
		case "json":
			cfg.LogJSON = true
		default:
			return fmt.Errorf("want text or json")
		}
		return nil
	})
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "host:port to serve HTTP on (loopback unless told otherwise)")
	fs.StringVar(&cfg.Advertise, "advertise", "", "host:port peers forward requests to (default: the address --listen bound)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate chain of the node: the public and admin listeners serve HTTPS and WSS (HTTP/1.1) with it, and it is read again when the file changes (with --tls-key), without a restart or a dropped socket; peers are then reached over TLS too")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&cfg.SecretsIdentity, "secrets-identity", "", "age identity file that opens the application's secrets ('wasmkeep secrets'), or its text in "+identityEnv+"; never stored in the bucket. A node that cannot open a secret drains (and 'cluster status' says why)")
	fs.DurationVar(&cfg.SecretsPoll, "secrets-poll", 30*time.Second, "how often the node reads the secrets again (a list of them, and a read of each that changed)")
	fs.StringVar(&cfg.Front, "front", "", "a wasm module (FILE.wasm) that serves every path outside /actor/ on this node, stateless: it calls actors (guest.Call) and hands a request, a WebSocket upgrade too, to an actor with the response header Wasmkeep-Route: CLASS/NAME[/PATH]; it replaces the front of the program (the wasmkeep binary's is the chat's)")
	fs.DurationVar(&cfg.DeployPoll, "deploy-poll", 5*time.Second, "how often the node looks for classes deployed through the bucket ('wasmkeep deploy'): one list of their records, a read of each that changed")
	fs.StringVar(&cfg.PeerCA, "peer-ca", "", "PEM file of the cluster's CA: with --tls-cert, a peer's certificate must be signed by it (unset: by a CA of the system's roots); the peers' HMAC signatures are checked all the same")
	fs.StringVar(&cfg.AdminListen, "admin-listen", "", "host:port of the admin listener, apart from the node's: the status page (/status, JSON with Accept: application/json), the supervision tree (/debug/tree), /metrics and Go's runtime profiles (/debug/pprof/); unset: not served. Keep it off the public network")
	fs.StringVar(&cfg.AdminListen, "debug-listen", "", "the same as --admin-listen (its former name)")
	fs.BoolVar(&cfg.Dev, "dev", false, "for development on your own machine: a failed event's 500 carries its error (a panic's value, a guest's output), not only the id of its log line. Never on a node that untrusted clients reach: an error may tell what a client must not read")
	fs.BoolVar(&cfg.PublicAdmin, "public-admin", false, "serve the status page and the supervision tree on the public listener too (anyone who reaches the port sees the node's peers and counts)")
	fs.StringVar(&cfg.ClusterKeyFile, "cluster-key-file", "", "file holding the cluster key (at least 16 bytes; surrounding white space is dropped) that signs and checks requests between nodes; give every node the same. Unset: $"+clusterKeyEnv+", and without either, requests between nodes are not authenticated")
	fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
	fs.StringVar(&cfg.Node, "node", "", "node id: 1 to 64 letters, digits, '.', '_' or '-' (default \"n\" and the --listen port, so local nodes on different ports differ)")
	fs.BoolVar(&cfg.TakeOver, "takeover", false, "replace a lease still live under another instance of this node (then wait a lease ttl before acting)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "an actor without events this long hibernates (drops out of memory; its state is in the bucket)")
	fs.IntVar(&cfg.MaxResident, "max-resident", cfg.MaxResident, "most actors in memory; past it the least recently used idle one hibernates")
	fs.Var(&cfg.MaxState, "max-state", "largest storage of one actor, its keys and values together (bytes, or with KiB, MiB or GiB); a write past it gets 413")
	fs.Var(&cfg.BlockCache, "block-cache", "memory for the blocks and indexes of actors' stored runs, all actors together (bytes, or with KiB, MiB or GiB)")
	fs.Var(&cfg.MaxBody, "max-body", "largest request body (bytes, or with KiB or MiB); larger gets 413")
	fs.IntVar(&cfg.MaxSockets, "max-sockets", 0, "most WebSockets open on the node; past it an upgrade gets 503 before switching protocols. Unset: three quarters of what the file limit leaves after the reserve (see Budgets above); a value the limit cannot hold stops the start")
	fs.IntVar(&cfg.MaxConns, "max-conns", 0, "most plain HTTP connections served at once (keep-alive included); past it the oldest idle one is closed, or the new one may only ask /healthz, /readyz or be a peer's. Unset: a quarter of what the file limit leaves after the reserve; a value the limit cannot hold stops the start")
	fs.DurationVar(&cfg.HTTPIdle, "http-idle-timeout", cfg.HTTPIdle, "a keep-alive HTTP connection idle this long is closed")
	fs.Var(&cfg.MaxBodyInflight, "max-body-inflight", "most bytes of request bodies held at once, all requests together (bytes, or with KiB or MiB); a body that would pass it gets 503 with Retry-After before it is read. Unset: a sixty-fourth of the memory the process may use, between 16 MiB and 256 MiB")
	fs.DurationVar(&cfg.BodyTimeout, "body-timeout", cfg.BodyTimeout, "a request body must arrive within this plus its size at --body-min-rate; a slower one gets 408 and its connection is closed")
	fs.Var(&cfg.BodyMinRate, "body-min-rate", "slowest a request body may arrive, in bytes per second (or with KiB or MiB), past --body-timeout")
	fs.DurationVar(&cfg.WSPing, "ws-ping", cfg.WSPing, "how often the node pings each WebSocket")
	fs.DurationVar(&cfg.WSPong, "ws-pong-timeout", cfg.WSPong, "a WebSocket silent this long after a ping is closed (1011) as dead; at most --ws-ping")
	fs.BoolVar(&cfg.WSIOUring, "ws-io-uring", cfg.WSIOUring, "send a broadcast's messages to its WebSockets with one io_uring submission (Linux); false: one write(2) per socket. Where io_uring is refused the node writes each socket and logs why once")
	fs.Var(&cfg.WSQueueTotal, "ws-send-queue-total", "most bytes queued for all WebSockets together, not yet read by their clients (bytes, or with KiB or MiB); past it the sockets holding the most are closed with 1013. Unset: 256 MiB, or a quarter of GOMEMLIMIT if less")
	fs.Var(&cfg.MaxMessage, "max-message", "largest WebSocket message, in and out (bytes, or with KiB or MiB); a larger incoming one closes its socket with 1009")
	fs.DurationVar(&cfg.CallTimeout, "call-timeout", cfg.CallTimeout, "longest an actor waits for its call to another actor; past it the call fails (two actors calling each other from separate events wait this long)")
	fs.Var(&cfg.EgressAllow, "egress-allow", "where actors' outbound HTTP requests (actors.Fetch, a guest's fetch) and outbound WebSockets (actors.DialSocket, a guest's dial) may go: host names (api.example.com, or *.example.com for its subdomains), IP addresses or CIDR ranges, each with an optional :port; comma-separated, repeatable. Default: nothing, every request and dial is refused. A name may reach only public addresses: a loopback, private or link-local one needs an address or range of its own")
	fs.DurationVar(&cfg.FetchTimeout, "fetch-timeout", cfg.FetchTimeout, "longest an actor's outbound HTTP request may take, redirects and the whole answer included (connecting: at most 5s)")
	fs.Var(&cfg.FetchMaxBody, "fetch-max-body", "largest answer body of an actor's outbound HTTP request (bytes, or with KiB or MiB); a larger one fails the request (a request's own body: at most --max-body)")
	fs.DurationVar(&cfg.KeyWindow, "idempotency-window", cfg.KeyWindow, "how long an actor remembers a request's Idempotency-Key with its answer: a request with the same key within it gets the first answer without running again")
	fs.IntVar(&cfg.MaxKeys, "idempotency-keys", cfg.MaxKeys, "most Idempotency-Keys (and keys of the node's own forwards and calls) one actor remembers; past it the oldest are forgotten first")
	fs.DurationVar(&cfg.Lease.LeasePeriod, "lease-period", cfg.Lease.LeasePeriod, "how often the node renews its lease")
	fs.DurationVar(&cfg.Lease.LeaseTTL, "lease-ttl", cfg.Lease.LeaseTTL, "how long an unrenewed lease lasts before peers may judge the node dead (with --lease-grace)")
	fs.DurationVar(&cfg.Lease.Safety, "lease-safety", cfg.Lease.Safety, "taken off the ttl on this node's side: the lease is valid until the last acknowledged renewal's send time plus ttl minus safety")
	fs.DurationVar(&cfg.Lease.Grace, "lease-grace", cfg.Lease.Grace, "added to the ttl on a watching peer's side before it fences this node")
	fs.DurationVar(&cfg.StopTimeout, "stop-timeout", cfg.StopTimeout, "bound on a clean stop after SIGINT or SIGTERM, the drain before it included")
	fs.DurationVar(&cfg.FailoverWait, "failover-wait", cfg.FailoverWait, "longest a request waits for an actor whose holder does not answer: for the holder to come back or for its peers to fence it and free the actor (after --lease-ttl plus --lease-grace), a request it had that never reached an event being then served by the actor's next holder (the request's key tells); past it, 503 with a Retry-After that estimates the time left if the request never reached the holder, 504 (outcome unknown) if it may have. Keep it above ttl + grace + period")
	fs.BoolVar(&cfg.DrainOnStop, "drain-on-stop", cfg.DrainOnStop, "on SIGINT or SIGTERM, when a live peer exists, drain first (hand the actors to the peers, close the sockets with 1012 so their clients reconnect to a peer) for at most half of --stop-timeout, then stop; false: stop at once (every record released, sockets closed with 1012)")
	fs.StringVar(&cfg.Classes, "classes", cfg.Classes, "directory whose NAME.wasm files are served as wasm classes NAME, read at start (\"\": no wasm classes; the default missing: none either; another missing: an error)")
	fs.StringVar(&cfg.CacheDir, "cache-dir", cfg.CacheDir, "directory keeping compiled wasm classes across starts so later starts compile fast: wasmkeep/wasm in the user cache directory unless set, \"\" for none on disk; keep it out of a directory bucket")
	fs.Var(&cfg.WasmMemory, "wasm-memory", "largest linear memory of one guest (an instantiated wasm module), whether it serves one resident wasm actor or, shared, many (bytes, or with KiB or MiB); a guest growing past it fails its event")
	fs.DurationVar(&cfg.WasmTrim, "wasm-trim-after", cfg.WasmTrim, "memory the wasm runtime keeps for fast guest starts (freed memories, each class's started guests) goes back to the system once unused this long; a negative value keeps it")
	fs.DurationVar(&cfg.WasmEventTimeout, "wasm-event-timeout", cfg.WasmEventTimeout, "longest a wasm guest may run for one event; past it the guest is stopped and the event fails")
	fs.Var(&cfg.WasmIsolation, "wasm-isolation", "how the resident actors of wasm classes share guests (instantiated wasm modules), over what each module declares: actor (a guest of its own per resident actor, about a megabyte each) or class (a few guests per class, see --wasm-shared-guests, each serving many actors one event at a time; a guest failure discards the guest with the in-memory objects of all its actors, which reload from storage), for every class, or NAME=actor or NAME=class for one; repeatable")
	fs.IntVar(&cfg.WasmShared, "wasm-shared-guests", 0, "how many guests serve the resident actors of each wasm class in isolation class (one more for an event whose every guest is held by an event waiting for it through calls); 0: as many as the cores the Go runtime uses (GOMAXPROCS)")
	return func(ctx context.Context, e env, _ []string) error {
		fs.Visit(func(f *flag.Flag) { cfg.ClassesSet = cfg.ClassesSet || f.Name == "classes" })
		if around != nil {
			return around(ctx, &cfg, e, func() error {
				if err := cfg.Validate(); err != nil {
					return usageError{err}
				}
				return runServe(ctx, cfg, e)
			})
		}
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runServe(ctx, cfg, e)
	}
}

// newInstanceID names one start of the node process.
func newInstanceID() (ownership.InstanceID, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return ownership.InstanceID(hex.EncodeToString(b[:])), nil
}

// loadClasses adds to reg (the Go-native classes) every NAME.wasm file in
// dir (the extension in any case: NAME.WASM too), compiled by rt. An
// empty dir adds nothing, and so does a missing one unless required
// (--classes was given: a typo must not start a node without its classes); a name that is not a valid
// class name or that is a Go class, or a file that cannot be read or
// compiled, is an error naming the file.
func loadClasses(ctx context.Context, log *slog.Logger, reg *actors.Registry, dir string, required bool, rt func() (*wasmhost.Runtime, error)) (_ *actors.Registry, wasm []string, err error) {
	if dir == "" {
		log.Info("no wasm classes: --classes is empty")
		return reg, nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		if required {
			return nil, nil, fmt.Errorf("--classes %s: no such directory", dir)
		}
		log.Info("no wasm classes: no classes directory", slog.String("dir", dir))
		return reg, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--classes: %w", err)
	}
	var files []string
	for _, ent := range entries {
		ext := filepath.Ext(ent.Name())
		if !strings.EqualFold(ext, ".wasm") || ent.IsDir() {
			continue
		}
		name := strings.TrimSuffix(ent.Name(), ext)
		file := filepath.Join(dir, ent.Name())
		if err := ingress.ValidClassName(name); err != nil {
			return nil, nil, fmt.Errorf("%s: not a class name: %w", file, err)
		}
		if _, builtIn := reg.Lookup(name); builtIn {
			return nil, nil, fmt.Errorf("%s: wasm class %q collides with the built-in Go class %q; rename the file", file, name, name)
		}
		files, wasm = append(files, file), append(wasm, name)
	}
	if len(files) == 0 {
		return reg, nil, nil
	}
	r, err := rt()
	if err != nil {
		return nil, nil, err
	}
	// Reading, instrumenting and compiling (or loading from the cache) a
	// module and starting its first guest is most of a node's start. A
	// module that passed all of it on an earlier start with the same
	// checks (wasmhost's known modules) compiles once the node serves, its
	// events waiting for it; the others are compiled before the node
	// serves, side by side, as many at once as the Go runtime has cores,
	// and a start stops on the first that fails.
	classes := make([]actors.Class, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	logReady := func(class string, mod *wasmhost.Module, background bool) {
		st := mod.Stats()
		log.Info("wasm class", slog.String("class", class), slog.String("isolation", st.Isolation.String()),
			slog.String("declared", st.Declared.String()), slog.Bool("compiled_after_start", background))
	}
	var wg sync.WaitGroup
	for i, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", file, err)
			continue
		}
		if r.Known(b) {
			class := wasm[i]
			classes[i] = r.CompileInBackground(class, b, func(mod *wasmhost.Module, err error) {
				switch {
				case errors.Is(err, wasmhost.ErrClosed):
					// The node stopped first.
				case err != nil:
					log.Error("wasm class failed to compile after the node started, though these bytes compiled on an earlier start: its events fail; the next start compiles it before serving",
						slog.String("class", class), slog.String("file", file), slog.Any("err", err))
				default:
					logReady(class, mod, true)
				}
			})
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			mod, err := r.Compile(ctx, wasm[i], b)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", file, err)
				return
			}
			logReady(wasm[i], mod, false)
			classes[i] = mod
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	for i, file := range files {
		if err := reg.Register(wasm[i], classes[i]); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	return reg, wasm, nil
}

func runServe(ctx context.Context, cfg serveConfig, e env) (err error) {
	log := e.logger()
	if e.log == nil {
		opts := &slog.HandlerOptions{Level: cfg.LogLevel}
		if cfg.LogJSON {
			log = slog.New(slog.NewJSONHandler(e.err, opts))
		} else {
			log = slog.New(slog.NewTextHandler(e.err, opts))
		}
	}
	instance, err := newInstanceID()
	if err != nil {
		return err
	}
	// The wasm runtime is made only if there are wasm classes. It is closed
	// once no actor can use it: after a clean stop, or if the node never
	// started; after an abort the process exit releases it.
	var rt *wasmhost.Runtime
	closeRuntime := true
	defer func() {
		if rt == nil || !closeRuntime {
			return
		}
		if cerr := rt.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = fmt.Errorf("close wasm runtime: %w", cerr)
		}
	}()
	goClasses, err := e.goClasses()
	if err != nil {
		return err
	}
	goNames := goClasses.Names()
	// The node's metrics registry, made first: the wasm runtime registers
	// its metrics there before the node starts.
	metrics := prometheus.NewRegistry()
	newRuntime := func() (*wasmhost.Runtime, error) {
		if rt != nil {
			return rt, nil
		}
		var err error
		wcfg := cfg.wasm(log)
		wcfg.Registerer = metrics
		rt, err = wasmhost.NewRuntime(ctx, wcfg)
		return rt, err
	}
	registry, wasmClasses, err := loadClasses(ctx, log, goClasses, cfg.Classes, cfg.ClassesSet, newRuntime)
	if err != nil {
		return err
	}
	clusterKey, err := loadClusterKey(cfg.ClusterKeyFile)
	if err != nil {
		return err
	}
	if clusterKey == nil && !loopback(cfg.Listen) {
		log.Warn("no cluster key: requests between nodes are not authenticated; keep the nodes on loopback or a private network, or give each the same --cluster-key-file")
	}
	for name := range cfg.WasmIsolation {
		if name != "" && !slices.Contains(wasmClasses, name) {
			return usageError{fmt.Errorf("--wasm-isolation %s=%v: no wasm class %q in %s", name, cfg.WasmIsolation[name], name, cfg.Classes)}
		}
	}
	log.Info("classes", slog.Any("go", goNames), slog.Any("wasm", wasmClasses), slog.String("dir", cfg.Classes))
	front := e.front
	if cfg.Front != "" {
		b, err := os.ReadFile(cfg.Front)
		if err != nil {
			return fmt.Errorf("--front: %w", err)
		}
		r, err := newRuntime()
		if err != nil {
			return err
		}
		mod, err := r.Compile(ctx, "front", b)
		if err != nil {
			return fmt.Errorf("--front %s: %w", cfg.Front, err)
		}
		front = wasmhost.Front(mod)
		log.Info("front", slog.String("wasm", cfg.Front))
	}
	target := describeBucket(cfg.BucketURL)
	// The store logs through the node's logger: a torn tail it cuts off, damage it finds.
	b, closeBucket, err := e.openBucket(bucketurl.WithLogger(ctx, log), cfg.BucketURL)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeBucket(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", target, cerr)
		}
	}()
	core := cfg.core(instance)
	// On a local bucket (a directory or SQLite store) the node claims its
	// id beside the store for as long as it runs: the claim free means
	// that every earlier process of this node has ended, so this one takes
	// the lease at once instead of waiting for it to lapse; held, another
	// process serves the node.
	if c, ok := b.(claimer); ok {
		release, free, err := c.Claim("node/" + string(core.Node))
		switch {
		case err != nil:
			return err
		case free:
			defer release()
			core.PredecessorGone = true
		case !cfg.TakeOver:
			return fmt.Errorf("node %s is served by another process from %s (it holds the node's claim there); stop it, or start this one with --takeover",
				core.Node, target)
		}
	}
	report := bucketcheck.Run(ctx, b, "wasmkeep-check/", string(instance))
	switch {
	case report.Unanswered():
		return fmt.Errorf("%s could not be checked: %w (its name, existence, endpoint or credentials)", target, report.Err)
	case !report.Sound():
		return fmt.Errorf("%s is not sound: missing %s", target, strings.Join(report.Missing(), "; "))
	}
	fds, err := descriptorBudget(cfg, log)
	if err != nil {
		return err
	}
	bodies := int64(cfg.MaxBodyInflight)
	if bodies == 0 {
		bodies = max(budget.Bodies(budget.Memory()), int64(cfg.MaxBody))
	}
	serverTLS, peerTLS, err := tlsConfigs(cfg, log)
	if err != nil {
		return err
	}
	ids, err := secrets.ReadIdentities(cfg.SecretsIdentity, os.Getenv(identityEnv))
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	var admin net.Listener
	if cfg.AdminListen != "" {
		if admin, err = net.Listen("tcp", cfg.AdminListen); err != nil {
			lis.Close()
			return fmt.Errorf("--admin-listen: %w", err)
		}
		defer admin.Close()
	}
	if serverTLS != nil {
		lis = tls.NewListener(lis, serverTLS)
		if admin != nil {
			admin = tls.NewListener(admin, serverTLS)
		}
	}
	allow, err := egress.ParseAllow(cfg.EgressAllow)
	if err != nil {
		return err
	}
	log.Info("actors' outbound HTTP requests and WebSockets may go to", slog.String("egress_allow", allow.String()))
	n, err := node.Start(ctx, node.Config{
		Core: core, Bucket: b, Listener: lis, Registry: registry, Logger: log, Metrics: metrics,
		Actors: actorhost.Config{IdleTimeout: cfg.IdleTimeout, MaxResident: cfg.MaxResident, MaxState: int(cfg.MaxState),
			BlockCache: int64(cfg.BlockCache), CallTimeout: cfg.CallTimeout, MaxKeys: cfg.MaxKeys, ErrorsInAnswers: cfg.Dev},
		Sockets: sockets.Config{MaxSockets: fds.Sockets, MaxMessage: int(cfg.MaxMessage), PingInterval: cfg.WSPing, PongTimeout: cfg.WSPong,
			SendQueueTotal: int(cfg.WSQueueTotal), NoIOUring: !cfg.WSIOUring},
		HTTP: ingress.Config{MaxBody: int64(cfg.MaxBody), ClusterKey: clusterKey, FailoverWait: cfg.FailoverWait, KeyWindow: cfg.KeyWindow,
			MaxConns: fds.Conns, OverflowConns: fds.Overflow, HTTPIdleTimeout: cfg.HTTPIdle,
			MaxBodyInflight: bodies, BodyTimeout: cfg.BodyTimeout, BodyMinRate: int64(cfg.BodyMinRate), Front: front},
		Peers:       peer.Config{PeerConns: max(8, fds.Reserve/4), TLS: peerTLS},
		Egress:      egress.Config{Allow: allow, Timeout: cfg.FetchTimeout, MaxResponseBody: int64(cfg.FetchMaxBody), MaxRequestBody: int64(cfg.MaxBody)},
		PublicAdmin: cfg.PublicAdmin,
		Secrets:     secrets.NewVault(b, ids),
		SecretsPoll: cfg.SecretsPoll,
		Deploys:     &lazyCompiler{runtime: newRuntime},
		DeployPoll:  cfg.DeployPoll,
	})
	if err != nil {
		return err
	}
	if admin != nil {
		scheme := "http"
		if serverTLS != nil {
			scheme = "https"
		}
		defer serveAdmin(admin, scheme, n.AdminHandler(), log)()
	}
	if rt != nil {
		rt.Serving() // the known modules compile now (loadClasses)
	}
	fmt.Fprintf(e.out, "wasmkeep node %s serving on http://%s (bucket %s)\n", cfg.nodeID(), lis.Addr(), target)
	if e.started != nil {
		e.started(lis.Addr().String())
	}
	select {
	case <-ctx.Done():
		log.Info("stopping", slog.String("node", string(cfg.nodeID())))
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.StopTimeout)
		defer cancel()
		if cfg.DrainOnStop && n.LivePeer() {
			// Half the bound at most: the clean stop after it has the rest.
			drainCtx, cancelDrain := context.WithTimeout(stopCtx, cfg.StopTimeout/2)
			if err := n.Drain(drainCtx, "stop"); err != nil {
				log.Warn("drain before the stop did not finish; stopping", slog.Any("err", err))
			} else {
				log.Info("drained before the stop: every actor handed over")
			}
			cancelDrain()
		}
		if err := n.Stop(stopCtx); err != nil {
			closeRuntime = false
			return fmt.Errorf("stop: %w", err)
		}
		log.Info("stopped cleanly", slog.String("node", string(cfg.nodeID())))
		return nil
	case <-n.Done():
		closeRuntime = false
		n.Abort()
		err := n.Err()
		if err == nil {
			err = errors.New("ownership keeper ended without a stop")
		}
		log.Error("node stopped acting: its lease is lost or its bucket damaged", slog.Any("err", err))
		return fmt.Errorf("node ended: %w", err)
	case err := <-n.ServeErr():
		n.Abort()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.StopTimeout)
		defer cancel()
		serr := n.Stop(stopCtx)
		closeRuntime = serr == nil
		return errors.Join(fmt.Errorf("http server: %w", err), serr)
	}
}

// descriptorBudget divides the process's file limit between the node's
// reserve, its WebSockets and its HTTP connections (internal/budget). A
// bound the operator set that the limit cannot hold is a usage error
// with the numbers; the division is logged.
func descriptorBudget(cfg serveConfig, log *slog.Logger) (budget.Descriptors, error) {
	limit, err := budget.FileLimit()
	if err != nil {
		return budget.Descriptors{}, err
	}
	d, err := budget.Divide(limit)
	if err == nil {
		d, err = d.Fit(cfg.MaxSockets, cfg.MaxConns)
	}
	if err != nil {
		return d, usageError{err}
	}
	log.Info("descriptor budget", slog.Int("file_limit", d.Limit), slog.Int("reserve", d.Reserve),
		slog.Int("max_sockets", d.Sockets), slog.Int("max_conns", d.Conns), slog.Int("overflow", d.Overflow))
	return d, nil
}

// clusterKeyEnv names the variable a cluster key may come from.
const clusterKeyEnv = "WASMKEEP_CLUSTER_KEY"

// loadClusterKey reads the cluster key from path, or from $WASMKEEP_CLUSTER_KEY
// when path is "". Neither set: nil.
func loadClusterKey(path string) ([]byte, error) {
	var key []byte
	from := "$" + clusterKeyEnv
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--cluster-key-file: %w", err)
		}
		key, from = bytes.TrimSpace(b), path
	} else if v, ok := os.LookupEnv(clusterKeyEnv); ok {
		key = []byte(strings.TrimSpace(v))
	} else {
		return nil, nil
	}
	if len(key) < peer.MinClusterKey {
		return nil, usageError{fmt.Errorf("cluster key from %s: %d bytes, under %d", from, len(key), peer.MinClusterKey)}
	}
	return key, nil
}

// loopback says whether the host of the address hostPort is a loopback one.
func loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveAdmin serves the admin pages and Go's runtime profiles on lis until
// the returned function is called.
func serveAdmin(lis net.Listener, scheme string, pages http.Handler, log *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("/", pages)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	log.Info("serving the admin pages", slog.String("addr", lis.Addr().String()),
		slog.String("status", scheme+"://"+lis.Addr().String()+"/status"))
	return func() { _ = srv.Close() }
}

// tlsConfigs are the listeners' TLS (nil: plain HTTP) and the peer
// client's, from --tls-cert, --tls-key and --peer-ca.
func tlsConfigs(cfg serveConfig, log *slog.Logger) (server, peers *tls.Config, err error) {
	switch {
	case cfg.TLSCert == "" && cfg.TLSKey == "":
		if cfg.PeerCA != "" {
			return nil, nil, errors.New("--peer-ca needs --tls-cert and --tls-key: peers are reached over TLS only when the node serves it")
		}
		return nil, nil, nil
	case cfg.TLSCert == "" || cfg.TLSKey == "":
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	r, err := certfile.New(cfg.TLSCert, cfg.TLSKey, log.With(slog.String("component", "tls")))
	if err != nil {
		return nil, nil, err
	}
	peers = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if cfg.PeerCA != "" {
		if peers.RootCAs, err = certfile.Pool(cfg.PeerCA); err != nil {
			return nil, nil, fmt.Errorf("--peer-ca: %w", err)
		}
	}
	return r.ServerConfig(), peers, nil
}

// lazyCompiler compiles deployed modules on the node's wasm runtime, made
// at the first deploy if no wasm class made it at the start.
type lazyCompiler struct {
	mu      sync.Mutex
	runtime func() (*wasmhost.Runtime, error)
}

func (c *lazyCompiler) Compile(ctx context.Context, class string, wasm []byte) (actors.Class, error) {
	c.mu.Lock()
	rt, err := c.runtime()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return rt.Compile(ctx, class, wasm)
}

func (c *lazyCompiler) Front(ctx context.Context, wasm []byte) (actors.Front, error) {
	mod, err := c.Compile(ctx, "front", wasm)
	if err != nil {
		return nil, err
	}
	return wasmhost.Front(mod.(*wasmhost.Module)), nil
}
