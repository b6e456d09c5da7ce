package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/examples/reminders"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// clock is a class with alarms. POST /set?name=N&in=D sets alarm N to
// fire D from now (and fails the event after, with &fail, so that its
// writes are discarded); POST /fail?times=K makes the next K alarm
// deliveries fail; POST /clear deletes everything; GET answers the
// fired counts and the alarms set, one per line.
type clock struct{}

// failing is how many alarm deliveries still fail (a failed event's
// writes are discarded, so the count is kept outside the actor).
var failing atomic.Int64

func (clock) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	name := req.Query.Get("name")
	switch req.Path {
	case "/set":
		in, err := time.ParseDuration(req.Query.Get("in"))
		if err != nil {
			return actors.Text(http.StatusBadRequest, err.Error()), nil
		}
		if err := actors.SetAlarm(ctx, name, time.Now().Add(in)); err != nil {
			return nil, err
		}
		if req.Query.Has("fail") {
			return nil, errors.New("failed after setting the alarm")
		}
		if to := req.Query.Get("call"); to != "" {
			// A call after the set: a commit point in the middle of the
			// event, which carries the alarm.
			if _, err := actors.Call(ctx, ownership.Actor{Class: "clock", Name: to}, &actors.Request{Method: http.MethodGet}); err != nil {
				return nil, err
			}
		}
	case "/fail":
		n, _ := strconv.Atoi(req.Query.Get("times"))
		failing.Store(int64(n))
	case "/clear":
		if err := actors.DeleteAll(st); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	entries, err := st.List(actors.ListOptions{Prefix: "fired/"})
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		fmt.Fprintf(&b, "%s=%s\n", e.Key, e.Value)
	}
	alarms, err := actors.ListAlarms(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range alarms {
		fmt.Fprintf(&b, "alarm %s retry %d\n", a.Name, a.Retry)
	}
	return actors.Text(http.StatusOK, b.String()), nil
}

func (clock) HandleAlarm(ctx context.Context, a actors.Alarm, st actors.Storage) error {
	if failing.Add(-1) >= 0 {
		return fmt.Errorf("failing delivery %d of %s", a.Retry, a.Name)
	}
	n := 0
	if v, ok := st.Get("fired/" + a.Name); ok {
		n, _ = strconv.Atoi(string(v))
	}
	return st.Put("fired/"+a.Name, []byte(strconv.Itoa(n+1)))
}

func alarmNode(t *testing.T, dir, instance string) *nodetest.Node {
	return nodetest.Start(t, nodetest.Options{Dir: dir, Instance: instance, Classes: map[string]actors.Class{"clock": clock{}}, IdleTimeout: 50 * time.Millisecond,
		Configure: func(c *node.Config) {
			c.AlarmPoll = 20 * time.Millisecond
			c.Actors.AlarmRetry = 20 * time.Millisecond
		}})
}

// post posts to url and returns the status and the body, trimmed.
func post(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// metricValue is the value of a series of n's /metrics (0 if absent).
func metricValue(t *testing.T, n *nodetest.Node, name string) float64 {
	t.Helper()
	l := series(t, n, name)
	if l == "" {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, name)), 64)
	require.NoError(t, err, l)
	return v
}

// TestAlarmWakesItsActor: an alarm fires once, waking its actor from
// hibernation, and ends with its event; an alarm set by an event that
// failed was never set; DeleteAll deletes the actor's alarms.
func TestAlarmWakesItsActor(t *testing.T) {
	n := alarmNode(t, "", "")
	u := n.URL + "/actor/clock/a"
	require.Equal(t, "200 alarm x retry 0", post(t, u+"/set?name=x&in=300ms"))
	require.Equal(t, "500", post(t, u+"/set?name=lost&in=10ms&fail")[:3])
	n.AwaitIdle(t, "clock/a")
	require.Eventually(t, func() bool { _, body := get(t, u); return body == "fired/x=1" }, 10*time.Second, 10*time.Millisecond)
	lists := metricValue(t, n, `wasmkeep_alarm_bucket_requests_total{op="list"}`)
	require.Eventually(t, func() bool { // passes enough to fire one twice, or "lost" once
		return metricValue(t, n, `wasmkeep_alarm_bucket_requests_total{op="list"}`) >= lists+5
	}, nodetest.Wait, 5*time.Millisecond)
	_, body := get(t, u)
	require.Equal(t, "fired/x=1", body, "fired once; the alarm of the failed event was never set")
	require.Equal(t, 1.0, metricValue(t, n, `wasmkeep_alarms_total{outcome="fired"}`))

	require.Equal(t, "200 fired/x=1\nalarm y retry 0", post(t, u+"/set?name=y&in=1h"))
	require.Equal(t, "200 ", post(t, u+"/clear"))
	_, body = get(t, u)
	require.Equal(t, "", body, "DeleteAll took the alarm with the storage")
}

// TestAlarmSetBeforeACallFires: an alarm set before the event calls
// another actor is committed at that call, in the middle of the event,
// and still fires: its index entry is written before that commit.
func TestAlarmSetBeforeACallFires(t *testing.T) {
	n := alarmNode(t, "", "")
	u := n.URL + "/actor/clock/c"
	require.Equal(t, "200 alarm x retry 0", post(t, u+"/set?name=x&in=100ms&call=other"))
	require.Eventually(t, func() bool { _, body := get(t, u); return body == "fired/x=1" }, 10*time.Second, 10*time.Millisecond)
}

// TestAlarmRetries: an alarm whose event fails is delivered again with a
// growing wait, the retry counted, until an event succeeds.
func TestAlarmRetries(t *testing.T) {
	n := alarmNode(t, "", "")
	u := n.URL + "/actor/clock/r"
	post(t, u+"/fail?times=2")
	post(t, u+"/set?name=x&in=0s")
	require.Eventually(t, func() bool { _, body := get(t, u); return strings.Contains(body, "fired/x=1") }, 10*time.Second, 10*time.Millisecond)
	_, body := get(t, u)
	require.Equal(t, "fired/x=1", body)
	require.Equal(t, 2.0, metricValue(t, n, `wasmkeep_alarms_total{outcome="retried"}`))
	require.Equal(t, 1.0, metricValue(t, n, `wasmkeep_alarms_total{outcome="fired"}`))
}

// TestAlarmGivesUp: an alarm whose event keeps failing is delivered
// again after each of its retries, then given up and deleted: six
// retries, one give-up, no fire.
func TestAlarmGivesUp(t *testing.T) {
	n := alarmNode(t, "", "")
	u := n.URL + "/actor/clock/g"
	post(t, u+"/fail?times=100")
	t.Cleanup(func() { failing.Store(0) })
	post(t, u+"/set?name=x&in=0s")
	require.Eventually(t, func() bool { return metricValue(t, n, `wasmkeep_alarms_total{outcome="given_up"}`) == 1 },
		20*time.Second, 10*time.Millisecond, "given up (retries after 20, 40, ... 640 ms)")
	require.Equal(t, 6.0, metricValue(t, n, `wasmkeep_alarms_total{outcome="retried"}`))
	require.Zero(t, metricValue(t, n, `wasmkeep_alarms_total{outcome="fired"}`))
	failing.Store(0)
	_, body := get(t, u)
	require.Equal(t, "", body, "the alarm is deleted when given up")
}

// TestAlarmPastDueAfterRestart: an alarm that came due while no node ran
// fires as soon as a node starts on the bucket.
func TestAlarmPastDueAfterRestart(t *testing.T) {
	dir := t.TempDir()
	n := alarmNode(t, dir, "i1")
	u := n.URL + "/actor/clock/p"
	post(t, u+"/set?name=x&in=400ms")
	require.NoError(t, n.Stop(context.Background()))
	time.Sleep(500 * time.Millisecond)
	n2 := alarmNode(t, dir, "i2")
	require.Eventually(t, func() bool { _, body := get(t, n2.URL+"/actor/clock/p"); return body == "fired/x=1" }, 10*time.Second, 10*time.Millisecond)
}

// TestAlarmsDueLaterCostNothing: with a thousand alarms due in an hour,
// the poller's passes list the index and do nothing else: no delete, no
// delivery, nothing pending.
func TestAlarmsDueLaterCostNothing(t *testing.T) {
	n := alarmNode(t, "", "")
	for i := range 10 {
		for j := range 100 {
			post(t, fmt.Sprintf("%s/actor/clock/far%d/set?name=a%d&in=1h", n.URL, i, j))
		}
	}
	before := metricValue(t, n, `wasmkeep_alarm_bucket_requests_total{op="list"}`)
	require.Eventually(t, func() bool {
		return metricValue(t, n, `wasmkeep_alarm_bucket_requests_total{op="list"}`) >= before+10
	}, nodetest.Wait, 5*time.Millisecond, "ten passes")
	require.Zero(t, metricValue(t, n, `wasmkeep_alarm_bucket_requests_total{op="delete"}`), "passes that list and nothing else")
	require.Zero(t, metricValue(t, n, `wasmkeep_alarms_pending`))
	require.Equal(t, 1000.0, metricValue(t, n, `wasmkeep_alarms_set_total`))
}

// bell is a class of rooms with alarms: a WebSocket upgrade joins the room,
// POST ?in=D sets its alarm, and the alarm rings every socket.
type bell struct{}

func (bell) Handle(ctx context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	if req.Header.Get("Upgrade") != "" {
		return actors.AcceptSocket("all"), nil
	}
	in, err := time.ParseDuration(req.Query.Get("in"))
	if err != nil {
		return actors.Text(http.StatusBadRequest, err.Error()), nil
	}
	return actors.Text(http.StatusOK, "set"), actors.SetAlarm(ctx, "ring", time.Now().Add(in))
}

func (bell) HandleAlarm(ctx context.Context, a actors.Alarm, _ actors.Storage) error {
	actors.SocketsOf(ctx).Broadcast("all", true, []byte("ring"))
	return nil
}

// TestParkedRoomAlarmWakesOnItsNode: a room whose sockets are on n1 parks
// there; its alarm comes due while both nodes poll the index, and wakes it
// where its sockets are: the socket hears the ring, and the room is never
// acquired by n2.
func TestParkedRoomAlarmWakesOnItsNode(t *testing.T) {
	dir := t.TempDir()
	start := func(id string) *nodetest.Node {
		return nodetest.Start(t, nodetest.Options{Dir: dir, Node: id, Instance: id + "-i", IdleTimeout: 50 * time.Millisecond,
			Classes: map[string]actors.Class{"bell": bell{}}, Configure: func(c *node.Config) {
				shortLeases(c)
				c.AlarmPoll = 20 * time.Millisecond
			}})
	}
	n1, n2 := start("n1"), start("n2")
	ws := n1.Dial(t, "bell", "hall")
	require.Equal(t, "200 set", post(t, n1.URL+"/actor/bell/hall?in=500ms"))
	require.Eventually(t, func() bool { return n1.Status().Parked == 1 }, nodetest.Wait, 5*time.Millisecond, "the room parks on n1")
	require.NoError(t, ws.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, msg, err := ws.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "ring", string(msg))
	require.Eventually(t, func() bool { return metricValue(t, n1, `wasmkeep_alarms_total{outcome="fired"}`) == 1 },
		nodetest.Wait, 5*time.Millisecond, "n1 fired it (counted once its event is answered)")
	require.Zero(t, metricValue(t, n2, `wasmkeep_alarms_total{outcome="fired"}`))
	require.Zero(t, n2.Status().Live, "n2 never held the room")
}

// TestReminderHook: examples/reminders posts a fired reminder's text to
// its hook, a local service the node's egress allows, and notes a hook it
// does not allow instead of retrying it.
func TestReminderHook(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"reminders": reminders.Reminders{}},
		Configure: func(c *node.Config) {
			c.AlarmPoll = 20 * time.Millisecond
			allow, err := egress.ParseAllow([]string{srv.Listener.Addr().String()})
			require.NoError(t, err)
			c.Egress.Allow = allow
		}})
	u := n.URL + "/actor/reminders/ada"
	require.Equal(t, "201", post(t, u+"?in=100ms&text=stretch&hook="+url.QueryEscape(srv.URL+"/in"))[:3])
	require.Equal(t, "201", post(t, u+"?in=100ms&text=water&hook="+url.QueryEscape("http://10.9.8.7/in"))[:3])
	select {
	case b := <-got:
		require.Equal(t, "stretch", b)
	case <-time.After(10 * time.Second):
		t.Fatal("the hook heard nothing")
	}
	require.Eventually(t, func() bool {
		_, body := get(t, u)
		return strings.Contains(body, "hook 202 stretch") && strings.Contains(body, "hook refused water")
	}, 10*time.Second, 10*time.Millisecond)
}
