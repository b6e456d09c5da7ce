package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/deploys"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

// buildGuest builds the example guest pkg (room-wasm, counter-wasm) with
// its version set to v.
func buildGuest(t *testing.T, pkg, v string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg)+"-"+v+".wasm")
	if !strings.Contains(pkg, "/") {
		pkg = "../examples/" + pkg
	}
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", "-X main.version="+v, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s %s: %v\n%s", pkg, v, err, msg)
	}
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	return b
}

func buildRoom(t *testing.T, v string) []byte    { return buildGuest(t, "room-wasm", v) }
func buildCounter(t *testing.T, v string) []byte { return buildGuest(t, "counter-wasm", v) }

// deployNode starts a node that serves the classes deployed to its bucket,
// looking every poll, with first deployed as class before it starts.
func deployNode(t *testing.T, class string, first []byte, idle, poll time.Duration) (*nodetest.Node, ownership.Bucket) {
	t.Helper()
	dir, b, comp := deployParts(t)
	_, err := deploys.Upload(t.Context(), b, class, first, deploys.Deploy{At: time.Now()})
	require.NoError(t, err)
	n := nodetest.Start(t, nodetest.Options{Dir: dir, IdleTimeout: idle, Configure: func(c *node.Config) {
		c.Deploys, c.DeployPoll = comp, poll
	}})
	return n, b
}

// compiler is the node's wasm runtime, as serve gives it.
type compiler struct{ rt *wasmhost.Runtime }

// deployParts makes what a node that serves deployed classes is made of:
// a directory bucket (its directory, for the node) and a compiler of
// wasm classes.
func deployParts(t *testing.T) (string, ownership.Bucket, compiler) {
	t.Helper()
	dir := t.TempDir()
	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	rt, err := wasmhost.NewRuntime(t.Context(), wasmhost.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(context.Background()) })
	return dir, b, compiler{rt}
}

func (c compiler) Compile(ctx context.Context, class string, wasm []byte) (actors.Class, error) {
	return c.rt.Compile(ctx, class, wasm)
}

func (c compiler) Front(ctx context.Context, wasm []byte) (actors.Front, error) {
	mod, err := c.rt.Compile(ctx, "front", wasm)
	if err != nil {
		return nil, err
	}
	return wasmhost.Front(mod), nil
}

// TestDeployKeepsSockets: a wasm class deployed through the bucket is
// served from the node's first event; a new version deployed with --now
// is taken by the resident room at its next event, and one deployed
// without it only at its next hibernation; either way the room's people
// stay connected (no socket closes) and see the version that runs. A
// version that does not compile is shown, counted, and the one before
// served.
func TestDeployKeepsSockets(t *testing.T) {
	v1, v2 := buildRoom(t, "1"), buildRoom(t, "2")
	ctx := t.Context()
	n, b := deployNode(t, "room", v1, time.Hour, 20*time.Millisecond)
	var err error

	join := func(name string) *websocket.Conn {
		ws := n.Dial(t, "room", "den")
		require.NoError(t, ws.WriteJSON(map[string]string{"type": "join", "name": name}))
		awaitFrame(t, ws, func(f nodetest.Frame) bool { return f.Type == "history" })
		return ws
	}
	ada, bob := join("ada"), join("bob")
	version := func() string {
		t.Helper()
		require.NoError(t, ada.WriteJSON(map[string]string{"type": "say", "text": "/version"}))
		var got string
		for _, ws := range []*websocket.Conn{ada, bob} {
			f := awaitFrame(t, ws, func(f nodetest.Frame) bool { return f.Type == "said" && f.Message.From == "room" })
			if got != "" {
				require.Equal(t, got, f.Message.Text, "both people see the same room")
			}
			got = f.Message.Text
		}
		return got
	}
	applied := func(want float64) {
		t.Helper()
		require.Eventually(t, func() bool { return metricValue(t, n, "wasmkeep_deploys_applied_total") == want },
			nodetest.Wait, 5*time.Millisecond, "the node applies deploy %v", want)
	}
	applied(1)
	require.Equal(t, "room-wasm version 1", version(), "served from the node's first event")

	_, err = deploys.Upload(ctx, b, "room", v2, deploys.Deploy{At: time.Now(), Now: true})
	require.NoError(t, err)
	applied(2)
	require.Equal(t, "room-wasm version 2", version(), "--now: the resident room switched at its next event")

	_, err = deploys.Rollback(ctx, b, "room", "", deploys.Deploy{At: time.Now()})
	require.NoError(t, err)
	applied(3)
	require.Equal(t, "room-wasm version 2", version(), "without --now the resident room keeps its version until it hibernates")

	_, err = deploys.Upload(ctx, b, "room", []byte("not a module"), deploys.Deploy{At: time.Now(), Now: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return metricValue(t, n, "wasmkeep_deploy_failures_total") == 1 }, nodetest.Wait, 5*time.Millisecond)
	code, body := get(t, n.URL+"/status?format=json")
	require.Equal(t, 200, code)
	var st struct {
		Deploys []struct{ Class, Version, Failed string } `json:"deploys"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Deploys, 1)
	require.Equal(t, deploys.Version(v1), st.Deploys[0].Version, "the version before is served")
	require.Contains(t, st.Deploys[0].Failed, deploys.Version([]byte("not a module")))
	require.Equal(t, "room-wasm version 2", version(), "the room goes on")
	_, metrics := get(t, n.URL+"/metrics")
	require.NotContains(t, metrics, "wasmkeep_websocket_closed_total{", "no socket closed")
	require.Equal(t, 2.0, metricValue(t, n, "wasmkeep_websockets_open"))
}

// TestDeployUnderLoad: counters take increments from four clients while
// their class is deployed again and again (with and without --now): every
// increment acknowledged is in the count at the end, none counted twice,
// none refused for the deploys, and the versions did change under the load.
func TestDeployUnderLoad(t *testing.T) {
	v1, v2 := buildCounter(t, "1"), buildCounter(t, "2")
	ctx := t.Context()
	n, b := deployNode(t, "tally", v1, 20*time.Millisecond, 10*time.Millisecond)

	const clients, counters = 4, 8
	stop := make(chan struct{})
	acked := make([][counters]int, clients)
	failed := make([]string, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (c + i) % counters
				res, err := http.Get(fmt.Sprintf("%s/actor/tally/c%d", n.URL, k))
				if err != nil {
					failed[c] = err.Error()
					return
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					failed[c] = fmt.Sprintf("%d %s", res.StatusCode, body)
					return
				}
				acked[c][k]++
			}
		})
	}
	versions := map[string]bool{}
	for i := range 10 {
		m := v1
		if i%2 == 0 {
			m = v2
		}
		_, err := deploys.Upload(ctx, b, "tally", m, deploys.Deploy{At: time.Now(), Now: i%3 == 0})
		require.NoError(t, err)
		want := float64(i + 2)
		require.Eventually(t, func() bool { return metricValue(t, n, "wasmkeep_deploys_applied_total") >= want },
			nodetest.Wait, 2*time.Millisecond)
		_, body := get(t, n.URL+"/actor/tally/probe?version")
		versions[body] = true
	}
	close(stop)
	wg.Wait()
	for c, f := range failed {
		require.Empty(t, f, "client %d had an increment refused", c)
	}
	total := 0
	for k := range counters {
		want := 0
		for c := range clients {
			want += acked[c][k]
		}
		total += want
		_, body := get(t, fmt.Sprintf("%s/actor/tally/c%d?read", n.URL, k))
		require.Equal(t, fmt.Sprint(want), body, "counter c%d: every acknowledged increment, once", k)
	}
	require.Greater(t, total, 100, "the load ran through the deploys")
	require.Len(t, versions, 2, "both versions served: %v", versions)
}

// TestDeployAtHibernation: a version deployed without --now is taken by
// an actor at its next wake, once it hibernated.
func TestDeployAtHibernation(t *testing.T) {
	v1, v2 := buildCounter(t, "1"), buildCounter(t, "2")
	ctx := t.Context()
	n, b := deployNode(t, "tally", v1, 100*time.Millisecond, 10*time.Millisecond)
	var err error
	_, body := get(t, n.URL+"/actor/tally/a?version")
	require.Equal(t, "counter-wasm version 1", body)
	_, err = deploys.Upload(ctx, b, "tally", v2, deploys.Deploy{At: time.Now()})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return metricValue(t, n, "wasmkeep_deploys_applied_total") == 2 }, nodetest.Wait, 5*time.Millisecond)
	// Asked less often than it hibernates: each ask wakes it.
	require.Eventually(t, func() bool { _, body = get(t, n.URL+"/actor/tally/a?version"); return body == "counter-wasm version 2" },
		10*time.Second, 300*time.Millisecond, "the actor takes the new version once it hibernated: %s", body)

	// What learning of deploys costs: a list a pass; a record and a module
	// read per deploy, none while nothing changes.
	lists := metricValue(t, n, `wasmkeep_deploy_bucket_requests_total{op="list"}`)
	require.Eventually(t, func() bool {
		return metricValue(t, n, `wasmkeep_deploy_bucket_requests_total{op="list"}`) >= lists+10
	}, nodetest.Wait, 5*time.Millisecond)
	require.Equal(t, 2.0, metricValue(t, n, `wasmkeep_deploy_bucket_requests_total{op="record"}`))
	require.Equal(t, 2.0, metricValue(t, n, `wasmkeep_deploy_bucket_requests_total{op="module"}`))
}

// TestDeployFront: a front deployed through the bucket serves the paths
// outside /actor/ from the node's next look, calling its actors.
func TestDeployFront(t *testing.T) {
	n, b := deployNode(t, "tally", buildCounter(t, "1"), time.Hour, 10*time.Millisecond)
	code, _ := get(t, n.URL+"/hello")
	require.Equal(t, 404, code, "no front yet")
	_, err := deploys.Upload(t.Context(), b, deploys.FrontName, buildGuest(t, "../wasmhost/testdata/front", "1"), deploys.Deploy{At: time.Now()})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, body := get(t, n.URL+"/hello"); return body == "hello from the front" },
		nodetest.Wait, 10*time.Millisecond)
	get(t, n.URL+"/actor/counter/c")
	_, body := get(t, n.URL+"/count")
	require.Equal(t, "count 2", strings.TrimSpace(body))
}

// TestDeployedClassWinsOverLocal: a class deployed under the name of a
// node's own class replaces it, and the node says so once.
func TestDeployedClassWinsOverLocal(t *testing.T) {
	dir, b, comp := deployParts(t)
	logs := &lockedBuffer{}
	local := actors.ClassFunc(func(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
		return actors.Text(http.StatusOK, "the node's own"), nil
	})
	n := nodetest.Start(t, nodetest.Options{Dir: dir, Classes: map[string]actors.Class{"tally": local}, Configure: func(c *node.Config) {
		c.Deploys, c.DeployPoll = comp, 10*time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}})
	_, body := get(t, n.URL+"/actor/tally/a")
	require.Equal(t, "the node's own", body)
	for _, v := range []string{"1", "2"} {
		_, err := deploys.Upload(t.Context(), b, "tally", buildCounter(t, v), deploys.Deploy{At: time.Now(), Now: true})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			_, body = get(t, n.URL+"/actor/tally/a?version")
			return body == "counter-wasm version "+v
		},
			nodetest.Wait, 10*time.Millisecond)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "a deployed class replaces this node's own class"), logs.String())
}
