package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
)

func clusterCommands() *command {
	return &command{
		name:    "cluster",
		summary: "inspect a cluster through its bucket, drain nodes, and fence dead nodes",
		subs: []*command{
			{
				name:    "status",
				summary: "list every node and count the ownership records in the bucket",
				detail: "Reads every node lease record (nodes/) and every ownership record (owners/) and prints, per node:\n" +
					"its instance, lease state, address, lease age, what it holds, parks and has pending and its\n" +
					"open sockets, and how many ownership records name it: held (and of those, held by an ended\n" +
					"instance, which any node may acquire) and free. The counts are read now from each serving\n" +
					"node's status page, with the cluster key (--cluster-key-file); a node whose page is not read\n" +
					"shows those its lease published at its last write, marked *. The lease age is this\n" +
					"machine's clock minus the writer's clock at its last write: machines' clocks may disagree.\n" +
					"Records that cannot be read are counted and named. Only reads; exits 1 when the bucket\n" +
					"cannot be listed.",
				setup: setupClusterStatus,
			},
			{
				name:    "fence",
				args:    "NODE",
				summary: "write a node's lease as fenced, so that its actors are free to acquire",
				detail: "Reads nodes/NODE and writes it back fenced (same node and instance, the next sequence\n" +
					"number, a fresh nonce) with If-Match on the version read. Refuses an unknown node, an\n" +
					"unreadable lease, and a lease already fenced or released. Meant for a node known to be\n" +
					"dead: a node that is still running finds the fence at its next renewal, drops every actor,\n" +
					"closes its sockets and exits non-zero. Live peers fence a dead node by themselves once its\n" +
					"lease has stood still for ttl + grace; this saves the wait, or fences a node no live peer\n" +
					"watches.",
				setup: setupClusterFence,
			},
			{
				name:    "drain",
				args:    "NODE",
				summary: "ask a node to drain: hand its actors to its peers",
				detail: "Writes the node's drain request into the bucket (nodes/NODE~drain, beside its lease). The node\n" +
					"sees it in the membership listing it runs every lease period (no admin port, no request more)\n" +
					"and drains: it releases every parked record and live hold so that the next events acquire\n" +
					"the actors on a peer, sends on the events that reach it, closes its sockets with 1012 so\n" +
					"their clients reconnect to a peer, and says not ready on /readyz. With no live peer the\n" +
					"drain is stuck: the node keeps serving until one is live. Follow it with 'cluster status'\n" +
					"(the node's state turns draining and its held and parked counts fall to 0). Refuses a\n" +
					"node with no lease record. The request stays until 'cluster undrain': a node restarted\n" +
					"meanwhile drains again.",
				setup: setupClusterDrain(false),
			},
			{
				name:    "move",
				args:    "CLASS/NAME",
				summary: "move an actor to a node",
				detail: "Checks that the --to node is live (its lease live and written within its ttl) and not\n" +
					"draining, reads the actor's record, and writes a move request (nodes/NODE~move~ID) for\n" +
					"the node that acts on it, which sees it in its next membership listing. When a live node\n" +
					"holds the actor, that node moves it (docs/PROTOCOL.md §5): it releases the record (a parked\n" +
					"room's too), closes the room's sockets with 1012 once the release has landed, and sends the\n" +
					"target its take call; the target holds the actor and keeps it resident until it is idle.\n" +
					"When nobody holds it, the target takes it. The request is deleted once acted on. Refuses an\n" +
					"unknown, dead or draining target, and an actor the target holds already.",
				setup: setupClusterMove,
			},
			{
				name:    "undrain",
				args:    "NODE",
				summary: "take a node's drain back: it serves again",
				detail: "Deletes the node's drain request from the bucket; the node serves again within a lease\n" +
					"period (its /readyz says ready). What it handed over meanwhile stays where the next events\n" +
					"took it. Refuses a node with no drain request.",
				setup: setupClusterDrain(true),
			},
		},
	}
}

// clusterDrainConfig is what `wasmkeep cluster drain` and `undrain` run
// with.
type clusterDrainConfig struct {
	Node      ownership.NodeID
	BucketURL string
	Timeout   time.Duration
}

func setupClusterDrain(undrain bool) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		cfg := clusterDrainConfig{BucketURL: defaultBucketURL, Timeout: time.Minute}
		fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
		fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the reads and the write")
		return func(ctx context.Context, e env, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("want one NODE, got %d arguments", len(args))}
			}
			cfg.Node = ownership.NodeID(args[0])
			if err := errors.Join(ownership.ValidateNodeID(cfg.Node), validateClusterFlags(cfg.BucketURL, cfg.Timeout)); err != nil {
				return usageError{err}
			}
			return runClusterDrain(ctx, cfg, undrain, e)
		}
	}
}

func runClusterDrain(ctx context.Context, cfg clusterDrainConfig, undrain bool, e env) (err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		if undrain {
			if err := cluster.TakeBackDrain(ctx, b, cfg.Node); err != nil {
				if errors.Is(err, cluster.ErrNoDrainRequest) {
					return fmt.Errorf("refusing to undrain: %w (a drain begun by the node's own stop is not taken back)", err)
				}
				return err
			}
			fmt.Fprintf(e.out, "drain of node %s taken back in %s: it serves again within a lease period.\n", cfg.Node, describeBucket(cfg.BucketURL))
			return nil
		}
		host, _ := os.Hostname()
		l, err := cluster.RequestDrain(ctx, b, cfg.Node, "wasmkeep cluster drain on "+host, e.clock())
		switch {
		case errors.Is(err, cluster.ErrUnknownNode), errors.Is(err, ownership.ErrUnreadable):
			return fmt.Errorf("refusing to drain: %w", err)
		case err != nil:
			return err
		}
		fmt.Fprintf(e.out, "drain of node %s requested in %s: it drains within a lease period.\n", cfg.Node, describeBucket(cfg.BucketURL))
		switch l.State {
		case ownership.LeaseLive, ownership.LeaseDraining:
			fmt.Fprintf(e.out, "follow it with 'wasmkeep cluster status': its state turns draining, its held and parked counts fall to 0.\n")
		default:
			fmt.Fprintf(e.err, "warning: node %s is not running (its lease is %s): it drains when it starts, until 'wasmkeep cluster undrain %s'.\n",
				cfg.Node, l.State, cfg.Node)
		}
		return nil
	})
}

// clusterStatusConfig is what `wasmkeep cluster status` runs with.
type clusterStatusConfig struct {
	BucketURL      string
	JSON           bool
	Timeout        time.Duration
	ClusterKeyFile string
	PeerCA         string
}

func (c clusterStatusConfig) Validate() error { return validateClusterFlags(c.BucketURL, c.Timeout) }

func validateClusterFlags(bucketURL string, timeout time.Duration) error {
	var errs []error
	if _, err := bucketurl.Parse(bucketURL); err != nil {
		errs = append(errs, err)
	}
	if timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %v: must be positive", timeout))
	}
	return errors.Join(errs...)
}

func setupClusterStatus(fs *flag.FlagSet) action {
	cfg := clusterStatusConfig{BucketURL: defaultBucketURL, Timeout: time.Minute}
	fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
	fs.BoolVar(&cfg.JSON, "json", false, "print the status as one JSON object (durations in milliseconds, times in RFC 3339)")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the whole read")
	fs.StringVar(&cfg.ClusterKeyFile, "cluster-key-file", "", "file holding the cluster key the nodes were given, to read each serving node's counts as they are now from its status page (unset: $"+clusterKeyEnv+"; without either, only nodes started with --public-admin answer, and the others' counts are their lease's)")
	fs.StringVar(&cfg.PeerCA, "peer-ca", "", "PEM file of the cluster's CA, for nodes that serve TLS (serve --tls-cert): their status pages are read over HTTPS, checked against it")
	return func(ctx context.Context, e env, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		if cfg.PeerCA != "" && e.fetchStatus == nil {
			fetch, err := tlsStatusFetch(cfg.PeerCA)
			if err != nil {
				return usageError{err}
			}
			e.fetchStatus = fetch
		}
		return runClusterStatus(ctx, cfg, e)
	}
}

func runClusterStatus(ctx context.Context, cfg clusterStatusConfig, e env) (err error) {
	key, err := loadClusterKey(cfg.ClusterKeyFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		st, err := cluster.ReadStatus(ctx, b, e.clock())
		if err != nil {
			return fmt.Errorf("%s: %w", describeBucket(cfg.BucketURL), err)
		}
		now := readNodesNow(ctx, e, st, key)
		if cfg.JSON {
			enc := json.NewEncoder(e.out)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Bucket string `json:"bucket"`
				cluster.Status
				// Now: each serving node's counts from its status page.
				Now map[ownership.NodeID]nodeNow `json:"now"`
			}{describeBucket(cfg.BucketURL), st, now})
		}
		printStatus(e.out, describeBucket(cfg.BucketURL), st, now)
		return nil
	})
}

// openExistingBucket opens the bucket a URL names, refusing a directory
// that does not exist: the directory store creates its directory, and a
// command that inspects a cluster must not create an empty bucket where a
// path was mistyped.
func openExistingBucket(ctx context.Context, e env, raw string) (ownership.Bucket, func() error, error) {
	t, err := bucketurl.Parse(raw)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if t.Local() {
		info, err := os.Stat(t.Dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, nil, fmt.Errorf("no bucket at %s: the directory does not exist", t.Dir)
		case err != nil:
			return nil, nil, err
		case !info.IsDir():
			return nil, nil, fmt.Errorf("no bucket at %s: not a directory", t.Dir)
		}
	}
	return e.openBucket(bucketurl.Existing(ctx), raw)
}

func printStatus(w io.Writer, bucket string, st cluster.Status, now map[ownership.NodeID]nodeNow) {
	fmt.Fprintf(w, "bucket: %s\n", bucket)
	fmt.Fprintf(w, "read at: %s\n\n", st.ReadAt.UTC().Format(time.RFC3339))
	if len(st.Nodes) == 0 {
		fmt.Fprintln(w, "no nodes")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tINSTANCE\tSTATE\tADDRESS\tLEASE AGE\tHELD\tPARKED\tPENDING\tSOCKETS\tRECORDS HELD\tENDED**\tRECORDS FREE")
		var unread, why []string
		for _, n := range st.Nodes {
			l := n.Lease
			if l == nil {
				what := "(no lease record)"
				if n.Node == cluster.ImportHolder {
					what = "(not a node: free records 'actors import' wrote)"
				}
				fmt.Fprintf(tw, "%s\t-\t%s\t-\t-\t-\t-\t-\t-\t%d\t-\t%d\n", n.Node, what, n.RecordsHeld, n.RecordsFree)
				continue
			}
			state := string(l.State)
			if n.DrainRequested && l.State != ownership.LeaseDraining {
				state += " (drain requested)"
			}
			if n.DrainRequested && n.DrainBy != "" {
				why = append(why, fmt.Sprintf("%s: drain requested by %s", n.Node, n.DrainBy))
			}
			counts := fmt.Sprintf("%d*\t%d*\t-\t-", l.Held, l.Parked)
			if c, ok := now[n.Node]; ok && c.Err == "" {
				counts = fmt.Sprintf("%d\t%d\t%d\t%d", c.Held, c.Parked, c.Pending, c.Sockets)
				for _, d := range c.Deploys {
					if d.Failed != "" {
						why = append(why, fmt.Sprintf("%s: deployed class %s does not compile there (%s); it serves version %s", n.Node, d.Class, d.Failed, orDash(d.Version)))
					}
				}
				if c.DrainStuck {
					state += " (stuck: no live peer)"
				}
			} else if ok {
				unread = append(unread, fmt.Sprintf("%s: %s", n.Node, c.Err))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.Node, l.Instance, state, orDash(l.Addr),
				leaseAge(l), counts, n.RecordsHeld, n.RecordsHeldEnded, n.RecordsFree)
		}
		tw.Flush()
		fmt.Fprintln(w, "\nHeld, parked, pending and sockets: as each node's status page says now; marked *, as the")
		fmt.Fprintln(w, "   node published them in its lease at its last write (its page was not read).")
		for _, u := range unread {
			fmt.Fprintf(w, "   not read: %s\n", u)
		}
		fmt.Fprintln(w, "Lease age: this machine's clock minus the writer's clock at the lease's last write; a")
		fmt.Fprintln(w, "   negative age means the writer's clock is ahead.")
		fmt.Fprintln(w, "** of the records held, those whose holder has ended (an earlier instance, or a lease fenced")
		fmt.Fprintln(w, "   or released): any node may acquire them.")
		if len(why) > 0 {
			fmt.Fprintln(w, "\nWhat the nodes say:")
			for _, l := range why {
				fmt.Fprintf(w, "   %s\n", l)
			}
		}
		printClasses(w, st)
	}
	fmt.Fprintf(w, "\nownership records: %d held, %d free, %d unreadable\n", st.Held, st.Free, len(st.Unreadable))
	if len(st.Unreadable) > 0 {
		fmt.Fprintln(w, "unreadable:")
		for _, u := range st.Unreadable {
			fmt.Fprintf(w, "  %s: %s\n", u.Key, u.Err)
		}
	}
}

// printClasses lists the classes each node serves, as it published them
// when its current instance started; an event of a class reaches a node
// that serves it through any node.
func printClasses(w io.Writer, st cluster.Status) {
	fmt.Fprintln(w, "\nclasses served:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range st.Nodes {
		var line string
		switch {
		case n.ClassesInstance == "":
			line = "(not published: a node of an earlier version, or not started)"
		case n.Lease != nil && n.Lease.Instance != n.ClassesInstance:
			line = fmt.Sprintf("(published by instance %s, not the lease's %s) %s", n.ClassesInstance, n.Lease.Instance, strings.Join(n.Classes, " "))
		case len(n.Classes) == 0:
			line = "(none)"
		default:
			line = strings.Join(n.Classes, " ")
		}
		fmt.Fprintf(tw, "  %s\t%s\n", n.Node, line)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func leaseAge(l *cluster.Lease) string {
	if l.WrittenAt.IsZero() {
		return "?"
	}
	return time.Duration(l.Age).Round(100 * time.Millisecond).String()
}

// clusterFenceConfig is what `wasmkeep cluster fence` runs with.
type clusterFenceConfig struct {
	Node      ownership.NodeID
	BucketURL string
	Timeout   time.Duration
}

func (c clusterFenceConfig) Validate() error {
	return errors.Join(ownership.ValidateNodeID(c.Node), validateClusterFlags(c.BucketURL, c.Timeout))
}

func setupClusterFence(fs *flag.FlagSet) action {
	cfg := clusterFenceConfig{BucketURL: defaultBucketURL, Timeout: time.Minute}
	fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the read and the write")
	return func(ctx context.Context, e env, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("want one NODE, got %d arguments", len(args))}
		}
		cfg.Node = ownership.NodeID(args[0])
		if err := cfg.Validate(); err != nil {
			return usageError{err}
		}
		return runClusterFence(ctx, cfg, e)
	}
}

func runClusterFence(ctx context.Context, cfg clusterFenceConfig, e env) (err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	now := e.clock()
	nonce, err := newNonce(now)
	if err != nil {
		return err
	}
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {

		f, err := cluster.Fence(ctx, b, cfg.Node, "fence-"+nonce)
		switch {
		case errors.Is(err, ownership.ErrUnknownOutcome):
			fmt.Fprintf(e.out, "sent a fence for node %s (instance %s) but got no answer: it may have landed, or may still land.\n",
				cfg.Node, f.Before.Instance)
			fmt.Fprintf(e.out, "run 'wasmkeep cluster status' to see the lease's state.\n")
			return err
		case errors.Is(err, cluster.ErrChanged):
			return fmt.Errorf("%w; nothing written: if the node renewed its lease it is alive; "+
				"run 'wasmkeep cluster status' and fence again only if it is dead", err)
		case errors.Is(err, cluster.ErrUnknownNode), errors.Is(err, cluster.ErrAlreadyFenced),
			errors.Is(err, cluster.ErrReleased), errors.Is(err, ownership.ErrUnreadable):
			return fmt.Errorf("refusing to fence: %w", err)
		case err != nil:
			return err
		}

		fmt.Fprintf(e.out, "fenced node %s (instance %s) in %s: lease %s -> %s, seq %d -> %d\n",
			cfg.Node, f.Before.Instance, describeBucket(cfg.BucketURL), f.Before.State, f.After.State, f.Before.Seq, f.After.Seq)
		if f.Before.WrittenAt > 0 {
			age := now.Sub(time.UnixMilli(f.Before.WrittenAt)).Round(100 * time.Millisecond)
			fmt.Fprintf(e.out, "its lease was last written %v ago (by its own clock, read against this machine's)\n", age)
			if age < time.Duration(f.Before.TTLMilli)*time.Millisecond {
				fmt.Fprintf(e.err, "warning: node %s wrote its lease less than a ttl (%v) ago: it may well be alive.\n",
					cfg.Node, time.Duration(f.Before.TTLMilli)*time.Millisecond)
			}
		}
		fmt.Fprintf(e.out, "ownership records naming node %s are free to acquire now.\n", cfg.Node)
		fmt.Fprintf(e.err, "warning: if node %s is still running, it finds the fence at its next renewal, "+
			"drops every actor, closes its sockets and exits non-zero.\n", cfg.Node)
		return nil
	})
}

// clusterMoveConfig is what `wasmkeep cluster move` runs with.
type clusterMoveConfig struct {
	Actor     ownership.Actor
	To        ownership.NodeID
	BucketURL string
	Timeout   time.Duration
}

func setupClusterMove(fs *flag.FlagSet) action {
	cfg := clusterMoveConfig{BucketURL: defaultBucketURL, Timeout: time.Minute}
	var to string
	fs.StringVar(&to, "to", "", "the node to move the actor to (required)")
	fs.StringVar(&cfg.BucketURL, "bucket", cfg.BucketURL, bucketURLHelp)
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the reads and the write")
	return func(ctx context.Context, e env, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("want one CLASS/NAME, got %d arguments", len(args))}
		}
		class, name, ok := strings.Cut(args[0], "/")
		if !ok || class == "" || name == "" {
			return usageError{fmt.Errorf("want CLASS/NAME, got %q", args[0])}
		}
		cfg.Actor, cfg.To = ownership.Actor{Class: class, Name: name}, ownership.NodeID(to)
		if to == "" {
			return usageError{errors.New("--to NODE is required")}
		}
		if err := errors.Join(ownership.ValidateNodeID(cfg.To), validateClusterFlags(cfg.BucketURL, cfg.Timeout)); err != nil {
			return usageError{err}
		}
		return runClusterMove(ctx, cfg, e)
	}
}

func runClusterMove(ctx context.Context, cfg clusterMoveConfig, e env) (err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	now := e.clock()
	nonce, err := newNonce(now)
	if err != nil {
		return err
	}
	return withBucket(ctx, e, cfg.BucketURL, func(b ownership.Bucket) error {
		host, _ := os.Hostname()
		m, err := cluster.RequestMove(ctx, b, cfg.Actor, cfg.To, "wasmkeep cluster move on "+host, nonce, now)
		switch {
		case errors.Is(err, cluster.ErrUnknownNode), errors.Is(err, cluster.ErrTargetNotLive), errors.Is(err, cluster.ErrTargetDraining),
			errors.Is(err, cluster.ErrAlreadyThere), errors.Is(err, cluster.ErrClassNotServed), errors.Is(err, ownership.ErrUnreadable):
			return fmt.Errorf("refusing to move: %w", err)
		case err != nil:
			return err
		}
		a := cfg.Actor
		if m.Held {
			fmt.Fprintf(e.out, "move of %s/%s to node %s requested from its holder, node %s: it moves within a lease period.\n",
				a.Class, a.Name, cfg.To, m.To)
		} else if m.Last == cfg.To {
			fmt.Fprintf(e.out, "nobody holds %s/%s now (node %s held it last, and let it go): node %s is asked to take it again, within a lease period.\n",
				a.Class, a.Name, cfg.To, cfg.To)
		} else {
			fmt.Fprintf(e.out, "nobody holds %s/%s: node %s is asked to take it, within a lease period.\n", a.Class, a.Name, cfg.To)
		}
		fmt.Fprintf(e.out, "request %s (deleted once acted on)\n", m.Key)
		return nil
	})
}

// withBucket opens the existing bucket at raw, runs f with it, and closes
// it, reporting a close that fails when f did not.
func withBucket(ctx context.Context, e env, raw string, f func(ownership.Bucket) error) (err error) {
	b, closeBucket, err := openExistingBucket(ctx, e, raw)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeBucket(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", describeBucket(raw), cerr)
		}
	}()
	return f(b)
}
