package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

var clusterT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// coreNode runs a real Core over a bucket synchronously, at a clock the
// test moves: what a node would write, without a node.
type coreNode struct {
	t    *testing.T
	core *ownership.Core
	b    ownership.Bucket
	now  time.Time
	ref  uint64
	gens map[uint64]ownership.Generation
}

func startCoreNode(t *testing.T, b ownership.Bucket, name string) *coreNode {
	t.Helper()
	cfg := ownership.DefaultConfig(ownership.NodeID(name), ownership.InstanceID(name+"-i1"))
	cfg.Addr = name + ".test:7000"
	core, err := ownership.NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &coreNode{t: t, core: core, b: b, now: clusterT0, gens: map[uint64]ownership.Generation{}}
	n.step(ownership.Start{})
	return n
}

func (n *coreNode) step(in ownership.Input) {
	ctx := context.Background()
	queue := []ownership.Input{in}
	for len(queue) > 0 {
		in, queue = queue[0], queue[1:]
		for _, e := range n.core.Step(n.now, in) {
			switch e := e.(type) {
			case ownership.Grant:
				n.gens[e.Ref] = e.Gen
			case ownership.StopActing:
				// As a shell does once the stopped instance has ended.
				queue = append(queue, ownership.Idle{Actor: e.Actor, Gen: e.Gen})
			case ownership.Request:
				queue = append(queue, keeper.Execute(ctx, n.b, e))
			}
		}
	}
}

func (n *coreNode) acquire(a ownership.Actor) ownership.Generation {
	n.t.Helper()
	n.ref++
	n.step(ownership.Acquire{Actor: a, Ref: n.ref})
	gen, ok := n.gens[n.ref]
	if !ok {
		n.t.Fatalf("%s not granted", a)
	}
	return gen
}

// writeTestCluster fills b: n1 live (one live hold, one parked record, one
// free record), n2 stopped cleanly, a held record naming n3 (no lease), and
// an unreadable record.
func writeTestCluster(t *testing.T, b ownership.Bucket) {
	t.Helper()
	n1, n2 := startCoreNode(t, b, "n1"), startCoreNode(t, b, "n2")
	a, p, f := ownership.Actor{Class: "room", Name: "a"}, ownership.Actor{Class: "room", Name: "p"}, ownership.Actor{Class: "room", Name: "f"}
	n1.acquire(a)
	gen := n1.acquire(p)
	n1.step(ownership.SocketOpened{Actor: p})
	n1.step(ownership.Idle{Actor: p, Gen: gen})
	gen = n1.acquire(f)
	n1.step(ownership.Idle{Actor: f, Gen: gen})
	n1.now = n1.now.Add(2500 * time.Millisecond)
	n1.step(ownership.Tick{}) // the renewal publishes the counts
	n2.acquire(ownership.Actor{Class: "room", Name: "b"})
	n2.now = n1.now
	n2.step(ownership.Stop{})

	ctx := context.Background()
	e := ownership.Actor{Class: "chat", Name: "e"}
	if _, err := b.Put(ctx, ownership.OwnerKey(e), ownership.EncodeRecord(ownership.Record{
		Class: e.Class, Name: e.Name, Node: "n3", Instance: "n3-i1", Generation: 2, Held: true, Nonce: "hand"}), ownership.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "owners/room/zz", []byte("garbage"), ownership.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	// A record an import wrote for an actor that had none.
	if _, err := cluster.ClaimRecord(ctx, b, ownership.Actor{Class: "room", Name: "copy"}, "imp1"); err != nil {
		t.Fatal(err)
	}
	// What n1 serves, as a node publishes it when it starts; n2 published
	// for an instance before its lease's.
	for _, c := range []ownership.NodeClasses{
		{Node: "n1", Instance: "n1-i1", Classes: []string{"counter", "room"}},
		{Node: "n2", Instance: "n2-i0", Classes: []string{"room"}},
	} {
		if _, err := b.Put(ctx, ownership.ClassesKey(c.Node), ownership.EncodeNodeClasses(c), ownership.Always()); err != nil {
			t.Fatal(err)
		}
	}
}

// dirCluster writes the test cluster into a directory store and returns
// its path, closed, for the command to open.
func dirCluster(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bucket")
	s, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeTestCluster(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// statusPages stands in for the nodes' status pages in the tests that run
// the command line: node n1 answers; any other is not reached.
var statusPages = func(_ context.Context, addr string, node ownership.NodeID, key []byte) (nodeNow, error) {
	if node == "n1" {
		return nodeNow{Held: 3, Parked: 2, Pending: 1, Sockets: 4}, nil
	}
	return nodeNow{}, fmt.Errorf("dial %s: connection refused", addr)
}

// runAt runs the command line with the clock at now; "mem://" opens mem.
func runAt(t *testing.T, now time.Time, mem ownership.Bucket, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env{out: &out, err: &errOut, now: func() time.Time { return now }, fetchStatus: statusPages,
		openBucket: func(ctx context.Context, raw string) (ownership.Bucket, func() error, error) {
			if raw == "mem://" && mem != nil {
				return mem, func() error { return nil }, nil
			}
			return bucketurl.Open(ctx, raw)
		}}
	code = runEnv(t.Context(), args, e)
	return code, out.String(), errOut.String()
}

func TestClusterStatus(t *testing.T) {
	mem := memstore.New(memstore.Faults{})
	writeTestCluster(t, mem)
	dir := dirCluster(t)
	readAt := clusterT0.Add(4 * time.Second)
	for _, bucket := range []string{dir, "mem://"} {
		code, stdout, stderr := runAt(t, readAt, mem, "cluster", "status", "--bucket", bucket)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s%s", bucket, code, stdout, stderr)
		}
		lines := strings.Split(stdout, "\n")
		for _, row := range []string{
			"NODE INSTANCE STATE ADDRESS LEASE AGE HELD PARKED PENDING SOCKETS RECORDS HELD ENDED** RECORDS FREE",
			"n1 n1-i1 live n1.test:7000 1.5s 3 2 1 4 2 0 1",       // its status page, now
			"n2 n2-i1 released n2.test:7000 1.5s 0* 0* - - 0 0 1", // released: its page is not asked
			"n3 - (no lease record) - - - - - - 1 - 0",
			"ownership records: 3 held, 3 free, 1 unreadable",
			"wasmkeep-import - (not a node: free records 'actors import' wrote) - - - - - - 0 - 1",
			"n1 counter room",
			"n2 (published by instance n2-i0, not the lease's n2-i1) room",
			"n3 (not published: a node of an earlier version, or not started)",
			"owners/room/zz: unreadable record: owner: not a wasmkeep record",
		} {
			if !hasRow(lines, row) {
				t.Errorf("%s: no line %q:\n%s", bucket, row, stdout)
			}
		}
		if !strings.Contains(stdout, "writer's clock") {
			t.Errorf("%s: the output does not say whose clock the lease age reads:\n%s", bucket, stdout)
		}
	}
}

// A serving node whose status page cannot be read shows its lease's counts,
// marked, and why its page was not read.
func TestClusterStatusUnreadPage(t *testing.T) {
	was := statusPages
	t.Cleanup(func() { statusPages = was })
	statusPages = func(_ context.Context, addr string, _ ownership.NodeID, _ []byte) (nodeNow, error) {
		return nodeNow{}, fmt.Errorf("dial %s: connection refused", addr)
	}
	code, stdout, stderr := runAt(t, clusterT0.Add(4*time.Second), nil, "cluster", "status", "--bucket", dirCluster(t))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	for _, row := range []string{
		"n1 n1-i1 live n1.test:7000 1.5s 1* 1* - - 2 0 1",
		"not read: n1: dial n1.test:7000: connection refused",
	} {
		if !hasRow(lines, row) {
			t.Errorf("no line %q:\n%s", row, stdout)
		}
	}
}

// hasRow reports whether a line holds exactly row's words, however spaced.
func hasRow(lines []string, row string) bool {
	for _, l := range lines {
		if strings.Join(strings.Fields(l), " ") == row {
			return true
		}
	}
	return false
}

func TestClusterStatusJSON(t *testing.T) {
	dir := dirCluster(t)
	code, stdout, stderr := runAt(t, clusterT0.Add(4*time.Second), nil, "cluster", "status", "--json", "--bucket", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Bucket string `json:"bucket"`
		Nodes  []struct {
			Node  string `json:"node"`
			Lease *struct {
				Instance  string    `json:"instance"`
				State     string    `json:"state"`
				Addr      string    `json:"address"`
				AgeMS     int64     `json:"age_ms"`
				TTLMS     int64     `json:"ttl_ms"`
				WrittenAt time.Time `json:"written_at"`
				Held      int       `json:"held"`
				Parked    int       `json:"parked"`
			} `json:"lease"`
			Held  int `json:"records_held"`
			Ended int `json:"records_held_ended"`
			Free  int `json:"records_free"`
		} `json:"nodes"`
		Held       int `json:"records_held"`
		Free       int `json:"records_free"`
		Unreadable []struct {
			Key string `json:"key"`
			Err string `json:"error"`
		} `json:"unreadable"`
		Now map[string]nodeNow `json:"now"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if len(got.Nodes) != 4 || got.Nodes[0].Lease == nil || got.Nodes[2].Lease != nil || got.Nodes[3].Node != "wasmkeep-import" {
		t.Fatalf("nodes: %s", stdout)
	}
	n1 := got.Nodes[0]
	if n1.Node != "n1" || n1.Lease.State != "live" || n1.Lease.AgeMS != 1500 || n1.Lease.TTLMS != 10000 ||
		!n1.Lease.WrittenAt.Equal(clusterT0.Add(2500*time.Millisecond)) || n1.Lease.Held != 1 || n1.Lease.Parked != 1 ||
		n1.Held != 2 || n1.Ended != 0 || n1.Free != 1 {
		t.Errorf("n1: %+v %+v", n1, *n1.Lease)
	}
	if got.Held != 3 || got.Free != 3 || len(got.Unreadable) != 1 || !strings.Contains(got.Bucket, dir) {
		t.Errorf("totals: %s", stdout)
	}
	if n := got.Now["n1"]; len(got.Now) != 1 || n.Held != 3 || n.Parked != 2 || n.Pending != 1 || n.Sockets != 4 || n.Err != "" {
		t.Errorf("now: want n1's status page only (n2 released, n3 without a lease): %+v", got.Now)
	}
}

func TestClusterFence(t *testing.T) {
	dir := dirCluster(t)
	now := clusterT0.Add(time.Minute)

	// Flags after the argument, as the help shows them before it.
	code, stdout, stderr := runAt(t, now, nil, "cluster", "fence", "n1", "--bucket", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"fenced node n1 (instance n1-i1)", "lease live -> fenced", "last written 57.5s ago", "free to acquire"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "exits non-zero") || strings.Contains(stderr, "may well be alive") {
		t.Errorf("stderr:\n%s", stderr)
	}
	s, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Get(t.Context(), ownership.NodeKey("n1"))
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := ownership.DecodeLease(obj.Body); err != nil || l.State != ownership.LeaseFenced || l.Instance != "n1-i1" ||
		!strings.HasPrefix(l.Nonce, "fence-") {
		t.Errorf("lease after the fence: %+v %v", l, err)
	}
	_, stdout, _ = runAt(t, now, nil, "cluster", "status", "--bucket", dir)
	if !hasRow(strings.Split(stdout, "\n"), "n1 n1-i1 fenced n1.test:7000 57.5s 1* 1* - - 2 2 1") {
		t.Errorf("status after the fence:\n%s", stdout)
	}

	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"n1"}, exitProblem, "refusing to fence: node n1 (instance n1-i1): already fenced"},
		{[]string{"n2"}, exitProblem, "released"},
		{[]string{"n9"}, exitProblem, "unknown node"},
		{[]string{}, exitUsage, "want one NODE"},
		{[]string{"n1", "n2"}, exitUsage, "want one NODE"},
		{[]string{"no/such"}, exitUsage, "node id"},
	} {
		args := append([]string{"cluster", "fence", "--bucket", dir}, tt.args...)
		code, _, stderr := runAt(t, now, nil, args...)
		if code != tt.code || !strings.Contains(stderr, tt.stderr) {
			t.Errorf("fence %q: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.stderr)
		}
	}
}

// TestClusterFenceLiveNode: fencing a node that wrote its lease moments ago
// says it may be alive.
func TestClusterFenceLiveNode(t *testing.T) {
	mem := memstore.New(memstore.Faults{})
	startCoreNode(t, mem, "n1")
	code, _, stderr := runAt(t, clusterT0.Add(time.Second), mem, "cluster", "fence", "--bucket", "mem://", "n1")
	if code != exitOK || !strings.Contains(stderr, "may well be alive") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestClusterNoBucket(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing-here")
	for _, args := range [][]string{
		{"cluster", "status", "--bucket", missing},
		{"cluster", "fence", "n1", "--bucket", missing},
	} {
		code, _, stderr := runAt(t, clusterT0, nil, args...)
		if code != exitProblem || !strings.Contains(stderr, "no bucket at") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the commands created %s: %v", missing, err)
	}
	if code, _, _ := runAt(t, clusterT0, nil, "cluster", "status", "--timeout", "0s"); code != exitUsage {
		t.Errorf("--timeout 0s: exit %d", code)
	}
}

func TestClusterHelp(t *testing.T) {
	code, stdout, _ := runAt(t, clusterT0, nil, "cluster", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"cluster status", "cluster fence [FLAGS] NODE", "-json", "-bucket", "-timeout", "lease age", "exits non-zero"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, stdout)
		}
	}
}

// TestClusterDrain: cluster drain writes the node's drain request (status
// shows it, and does not count it unreadable), refuses an unknown node, and
// cluster undrain deletes it, refusing when there is none.
func TestClusterDrain(t *testing.T) {
	dir := dirCluster(t)
	now := clusterT0.Add(time.Minute)
	code, stdout, stderr := runAt(t, now, nil, "cluster", "drain", "n1", "--bucket", dir)
	if code != exitOK || !strings.Contains(stdout, "drain of node n1 requested") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	_, stdout, _ = runAt(t, now, nil, "cluster", "status", "--bucket", dir)
	if !strings.Contains(stdout, "live (drain requested)") || strings.Contains(stdout, "~drain") {
		t.Errorf("status after the request:\n%s", stdout)
	}
	code, _, stderr = runAt(t, now, nil, "cluster", "drain", "n9", "--bucket", dir)
	if code != exitProblem || !strings.Contains(stderr, "refusing to drain: node n9: unknown node") {
		t.Errorf("unknown node: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr = runAt(t, now, nil, "cluster", "undrain", "n1", "--bucket", dir)
	if code != exitOK || !strings.Contains(stdout, "taken back") {
		t.Errorf("undrain: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runAt(t, now, nil, "cluster", "undrain", "n1", "--bucket", dir)
	if code != exitProblem || !strings.Contains(stderr, "no drain request") {
		t.Errorf("second undrain: exit %d, stderr %q", code, stderr)
	}
}

// TestClusterMove: cluster move writes a move request for the live holder
// (room/a, held by n1) naming the target, refuses a stopped target (n2),
// an unknown one, a target whose lease is older than its ttl, a target
// that does not serve the actor's class, and a bad address.
func TestClusterMove(t *testing.T) {
	dir := dirCluster(t)
	soon := clusterT0.Add(3 * time.Second)
	code, stdout, stderr := runAt(t, soon, nil, "cluster", "move", "room/a", "--to", "n1", "--bucket", dir)
	if code != exitProblem || !strings.Contains(stderr, "refusing to move") || !strings.Contains(stderr, "already on the target") {
		t.Errorf("move to its holder: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runAt(t, soon, nil, "cluster", "move", "room/new", "--to", "n1", "--bucket", dir)
	if code != exitOK || !strings.Contains(stdout, "nobody holds room/new: node n1 is asked to take it") {
		t.Errorf("move of a free actor: exit %d\n%s%s", code, stdout, stderr)
	}
	// room/f hibernated on n1, which released it: n1 takes it again.
	code, stdout, stderr = runAt(t, soon, nil, "cluster", "move", "room/f", "--to", "n1", "--bucket", dir)
	if code != exitOK || !strings.Contains(stdout, "nobody holds room/f now (node n1 held it last, and let it go): node n1 is asked to take it again") {
		t.Errorf("move of an actor its target let go: exit %d\n%s%s", code, stdout, stderr)
	}
	s, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.List(t.Context(), ownership.MoveRequestPrefix("n1"), "", 0)
	s.Close()
	if err != nil || len(page.Entries) != 2 {
		t.Errorf("move requests for n1: %+v %v", page.Entries, err)
	}
	for _, tt := range []struct {
		args   []string
		at     time.Time
		stderr string
	}{
		{[]string{"room/a", "--to", "n2"}, soon, "target not live: its lease is released"},
		{[]string{"room/a", "--to", "n9"}, soon, "node n9: unknown node"},
		{[]string{"room/a", "--to", "n1"}, clusterT0.Add(time.Minute), "over its ttl"},
		{[]string{"nosuchclass/x", "--to", "n1"}, soon, `node n1: class not served by the target: "nosuchclass" (it serves counter, room)`},
	} {
		code, _, stderr := runAt(t, tt.at, nil, append([]string{"cluster", "move", "--bucket", dir}, tt.args...)...)
		if code != exitProblem || !strings.Contains(stderr, tt.stderr) {
			t.Errorf("%q: exit %d, stderr %q", tt.args, code, stderr)
		}
	}
	if code, _, stderr := runAt(t, soon, nil, "cluster", "move", "room", "--to", "n1", "--bucket", dir); code != exitUsage || !strings.Contains(stderr, "want CLASS/NAME") {
		t.Errorf("bad address: exit %d, stderr %q", code, stderr)
	}
}

// TestClusterStatusReadsNodesNow runs a node with a cluster key: `cluster
// status` with the key shows its counts as its status page says now; without
// it, the page is not served (the node's public listener serves /status to
// signed requests only) and the lease's counts show, marked.
func TestClusterStatusReadsNodesNow(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("a-cluster-key-of-32-bytes-000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--listen", "127.0.0.1:0", "--bucket", dir, "--node", "n1", "--cluster-key-file", keyFile)
	defer s.stop(t)
	for _, name := range []string{"a", "b", "c"} {
		s.get(t, "/actor/counter/"+name, "1")
	}
	row := func(stdout string) []string {
		t.Helper()
		for _, l := range strings.Split(stdout, "\n") {
			if f := strings.Fields(l); len(f) == 12 && f[0] == "n1" {
				return f
			}
		}
		t.Fatalf("no row for n1:\n%s", stdout)
		return nil
	}

	code, stdout, stderr := runTest(t, "cluster", "status", "--bucket", dir, "--cluster-key-file", keyFile)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if f := row(stdout); f[2] != "live" || f[3] != s.addr || f[5] != "3" || f[6] != "0" || f[7] != "0" || f[8] != "0" {
		t.Errorf("with the key: row %v, want live at %s holding 3 now, nothing parked, pending or open:\n%s", f, s.addr, stdout)
	}

	code, stdout, stderr = runTest(t, "cluster", "status", "--bucket", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if f := row(stdout); !strings.HasSuffix(f[5], "*") || f[7] != "-" {
		t.Errorf("without the key: row %v, want the lease's counts, marked", f)
	}
	if !strings.Contains(stdout, "not read: n1: status page answered 404 Not Found (give the cluster key") {
		t.Errorf("without the key: no word of why n1's page was not read:\n%s", stdout)
	}

	// The page itself: not there unsigned, refused under another key.
	resp, err := http.Get("http://" + s.addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unsigned GET /status: %d, want 404", resp.StatusCode)
	}
	if _, err := fetchNodeStatus(t.Context(), s.addr, "n1", []byte("another-key-of-32-bytes-00000000")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("GET /status signed with another key: %v, want 401", err)
	}
}

// TestClusterStatusSaysWhy: what a node's drain request says (a node that
// cannot open the secrets writes its own) and a deployed version a node
// cannot compile are printed under "What the nodes say".
func TestClusterStatusSaysWhy(t *testing.T) {
	mem := memstore.New(memstore.Faults{})
	writeTestCluster(t, mem)
	_, err := cluster.RequestDrain(t.Context(), mem, "n1", "the node itself: secrets: cannot open 1 of 1 (api-key)", clusterT0)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	e := env{out: &out, err: &errOut, now: func() time.Time { return clusterT0.Add(4 * time.Second) },
		fetchStatus: func(_ context.Context, addr string, node ownership.NodeID, key []byte) (nodeNow, error) {
			now, err := statusPages(t.Context(), addr, node, key)
			if err == nil {
				now.Deploys = append(now.Deploys, struct {
					Class   string `json:"class"`
					Version string `json:"version"`
					Failed  string `json:"failed"`
				}{Class: "room", Version: "v1hash", Failed: "version v2hash: not a WebAssembly module"})
			}
			return now, err
		},
		openBucket: func(context.Context, string) (ownership.Bucket, func() error, error) {
			return mem, func() error { return nil }, nil
		}}
	require.Equal(t, exitOK, runEnv(t.Context(), []string{"cluster", "status", "--bucket", "mem://"}, e), errOut.String())
	require.Contains(t, out.String(), "What the nodes say:")
	require.Contains(t, out.String(), "n1: drain requested by the node itself: secrets: cannot open 1 of 1 (api-key)")
	require.Contains(t, out.String(), "n1: deployed class room does not compile there (version v2hash: not a WebAssembly module); it serves version v1hash")
}
