package actorhost_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestGateAsksTheKeeperByMessage: when the keeper's table of live holds
// cannot say at once whether a hold may act, the output gate asks by
// message and the actor goes on: a read-only event is released by the
// answer, or refused once its hold was revoked; a write is released
// without asking.
func TestGateAsksTheKeeperByMessage(t *testing.T) {
	o := &fakeKeeper{}
	o.slow.Store(true)
	h := newHost(t, memstore.New(memstore.Faults{}), o, nil)

	body, err := count(t, h, 1, "")
	require.NoError(t, err)
	require.Equal(t, "1", body)
	require.EqualValues(t, 1, o.asked.Load(), "the grant is asked; a write that landed is released without asking")

	body, err = count(t, h, 1, "read")
	require.NoError(t, err)
	require.Equal(t, "1", body)
	require.EqualValues(t, 2, o.asked.Load(), "a read is released by the keeper's answer")

	o.revoke(1)
	_, err = count(t, h, 1, "read")
	var ua *actorhost.UnavailableError
	require.ErrorAs(t, err, &ua, "a read of a revoked hold is refused by the answer")
	require.EqualValues(t, 3, o.asked.Load())
}

// heldKeeper holds RequestMayAct's answers until the test sends them.
type heldKeeper struct {
	fakeKeeper
	held chan func()
}

func (o *heldKeeper) RequestMayAct(a ownership.Actor, gen ownership.Generation, replyTo *actor.PID, tag uint64) {
	o.asked.Add(1)
	may := o.MayAct(a, gen)
	o.held <- func() { o.sys.Root.Send(replyTo, &keeper.MayActAnswer{Actor: a, Gen: gen, Tag: tag, May: may}) }
}

// putCount counts the bucket's writes, and sends the count of each on
// done (if set) once it returned.
type putCount struct {
	ownership.Bucket
	puts atomic.Int64
	done chan int64
}

func (b *putCount) Put(ctx context.Context, key string, body []byte, c ownership.Condition) (ownership.ETag, error) {
	n := b.puts.Add(1)
	etag, err := b.Bucket.Put(ctx, key, body, c)
	if b.done != nil {
		select {
		case b.done <- n:
		default: // far more writes than a test waits for
		}
	}
	return etag, err
}

// TestGateQuestionDoesNotHoldTheActor: while the gate waits for the
// keeper's answer, the actor's mailbox goes on: a later event runs and
// its commit is written, its answer waiting behind the read's; a stop
// waits for the answer by message too; the answer releases both, in
// order, and the actor stops.
func TestGateQuestionDoesNotHoldTheActor(t *testing.T) {
	o := &heldKeeper{held: make(chan func(), 4)}
	b := &putCount{Bucket: memstore.New(memstore.Faults{}), done: make(chan int64, 64)}
	h := newHost(t, b, o, nil)
	_, err := count(t, h, 1, "") // loaded, and 1 written
	require.NoError(t, err)
	o.slow.Store(true)

	type answer struct {
		body string
		err  error
	}
	read, write := make(chan answer, 1), make(chan answer, 1)
	go func() {
		body, err := count(t, h, 1, "read")
		read <- answer{body, err}
	}()
	var send func()
	select {
	case send = <-o.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the gate did not ask the keeper")
	}
	puts := b.puts.Load()
	go func() {
		body, err := count(t, h, 1, "")
		write <- answer{body, err}
	}()
	for committed := false; !committed; {
		select {
		case n := <-b.done:
			committed = n > puts
		case <-time.After(10 * time.Second):
			t.Fatal("the write behind the question did not run and commit")
		}
	}
	stopped := make(chan struct{})
	go func() {
		h.StopActing(room, 1)
		close(stopped)
	}()
	select {
	case a := <-write:
		t.Fatalf("the write was answered before the read before it: %+v", a)
	case a := <-read:
		t.Fatalf("the read was answered without the keeper's verdict: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}

	send()
	for want, ch := range map[string]chan answer{"1": read, "2": write} {
		select {
		case a := <-ch:
			require.NoError(t, a.err)
			require.Equal(t, want, strings.TrimSpace(a.body))
		case <-time.After(10 * time.Second):
			t.Fatal("an event that waited at the gate was not answered")
		}
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the actor did not stop once answered")
	}
}

// TestGrantSwitchWaitsByMessage: an event of a later grant waits, by
// message, for the commits of the earlier hold's events and for the
// keeper's verdict on the new grant, then runs on the state they wrote;
// events behind it keep their order.
func TestGrantSwitchWaitsByMessage(t *testing.T) {
	o := &fakeKeeper{}
	o.slow.Store(true)
	h := newHost(t, memstore.New(memstore.Faults{}), o, nil)
	for i := 1; i <= 3; i++ {
		body, err := count(t, h, 1, "")
		require.NoError(t, err)
		require.Equal(t, string(rune('0'+i)), body)
	}
	asked := o.asked.Load()
	body, err := count(t, h, 2, "")
	require.NoError(t, err)
	require.Equal(t, "4", body)
	require.Greater(t, o.asked.Load(), asked, "the new grant was asked by message")

	o.revoke(3)
	_, err = count(t, h, 3, "")
	var ua *actorhost.UnavailableError
	require.ErrorAs(t, err, &ua)
	require.True(t, ua.NotRun, "an event of a grant that ended is refused before it runs")
	body, err = count(t, h, 2, "")
	require.NoError(t, err)
	require.Equal(t, "5", body, "the revoked grant's event did not run")
}

// heldPuts holds each write of one key, while armed, until the test lets
// it go (land); entered says that one is held.
type heldPuts struct {
	ownership.Bucket
	key     string
	armed   atomic.Bool
	entered chan struct{}
	land    chan struct{}
}

func (b *heldPuts) Put(ctx context.Context, key string, body []byte, c ownership.Condition) (ownership.ETag, error) {
	if key == b.key && b.armed.Load() {
		b.entered <- struct{}{}
		<-b.land
	}
	return b.Bucket.Put(ctx, key, body, c)
}

// TestWriteAnsweredAtItsLanding: a write is answered as soon as the
// commit that carries it lands, by the commit's own goroutine, not after
// the actor's mailbox takes the commit's answer: while a later event of
// the actor still runs (so that the mailbox cannot), the writes' callers
// have their answers. So too for writes that ran while an earlier commit
// was in flight, whose commit starts as that one lands (back to back).
// The later event is answered once it ends, and reads the last write.
func TestWriteAnsweredAtItsLanding(t *testing.T) {
	a := ownership.Actor{Class: "slow", Name: "s"}
	ran, running, unblock := make(chan string, 8), make(chan struct{}, 1), make(chan struct{})
	reg := actors.BuiltIn()
	require.NoError(t, reg.Register("slow", actors.ClassFunc(func(_ context.Context, r *actors.Request, st actors.Storage) (*actors.Response, error) {
		if r.Path == "/block" {
			running <- struct{}{}
			<-unblock
			v, _ := st.Get("k")
			return actors.Text(http.StatusOK, string(v)), nil
		}
		ran <- r.Path
		return actors.Text(http.StatusOK, "written "+r.Path), st.Put("k", []byte(r.Path))
	})))
	b := &heldPuts{Bucket: memstore.New(memstore.Faults{}), key: actorstore.StateKey(a),
		entered: make(chan struct{}, 1), land: make(chan struct{})}
	h := newHost(t, b, &fakeKeeper{}, reg)
	var once sync.Once
	letAllGo := func() {
		once.Do(func() {
			b.armed.Store(false)
			close(b.land)
			close(unblock)
		})
	}
	t.Cleanup(letAllGo) // before the host's: a failure must leave nothing held
	deliver := func(path string) <-chan *actors.Response {
		ch := make(chan *actors.Response, 1)
		go func() {
			resp, err := h.Deliver(t.Context(), a, 1, &actors.Request{Method: http.MethodPost, Path: path, Header: http.Header{}})
			if err != nil {
				t.Errorf("%s: %v", path, err)
			}
			ch <- resp
		}()
		return ch
	}
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not within 10 s", what)
		}
	}
	answered := func(what string, ch <-chan *actors.Response, want string) {
		t.Helper()
		select {
		case resp := <-ch:
			require.Equal(t, http.StatusOK, resp.Status, what)
			require.Equal(t, want, string(resp.Body), what)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not answered within 10 s", what)
		}
	}
	first := deliver("/w0") // the load, and a first commit
	<-ran
	answered("the first write", first, "written /w0")

	b.armed.Store(true)
	w1 := deliver("/w1")
	<-ran
	wait("the commit of /w1", b.entered)
	// Two writes run while that commit is in flight: the next commit
	// carries them, starting as it lands.
	w2 := deliver("/w2")
	<-ran
	w3 := deliver("/w3")
	<-ran
	b.land <- struct{}{}
	answered("/w1", w1, "written /w1")
	wait("the commit of /w2 and /w3", b.entered)
	block := deliver("/block")
	wait("the later event runs", running)
	b.land <- struct{}{}
	answered("/w2, while a later event runs", w2, "written /w2")
	answered("/w3, while a later event runs", w3, "written /w3")
	select {
	case resp := <-block:
		t.Fatalf("the later event was answered while it ran: %+v", resp)
	default:
	}
	letAllGo()
	answered("the later event", block, "/w3")
}
