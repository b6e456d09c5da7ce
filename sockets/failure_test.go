package sockets

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// point is where a failure is injected: an actor's room, at an operation.
type point struct {
	actor ownership.Actor
	op    string
}

// injector makes the socket owner panic (Config.faults): armed at a
// point, it panics the next time that point is reached, once.
type injector struct {
	mu    sync.Mutex
	armed map[point]bool
	fired chan point
}

func (f *injector) arm(a ownership.Actor, op string) {
	f.mu.Lock()
	f.armed[point{a, op}] = true
	f.mu.Unlock()
}

func (f *injector) hook(a ownership.Actor, op string) {
	k := point{a, op}
	f.mu.Lock()
	fire := f.armed[k]
	delete(f.armed, k)
	f.mu.Unlock()
	if fire {
		f.fired <- k
		panic(fmt.Sprintf("injected failure of %s in %s", a, op))
	}
}

// failEnv is an env whose Owner takes injected failures, with its log
// and the failures it reported (Config.Failed, which the node counts).
type failEnv struct {
	*env
	inject *injector
	log    *testlog.Log
	failed chan point
}

func newFailEnv(t *testing.T, cfg Config) *failEnv {
	t.Helper()
	f := &failEnv{inject: &injector{armed: map[point]bool{}, fired: make(chan point, 8)}, log: &testlog.Log{}, failed: make(chan point, 8)}
	cfg.faults = f.inject.hook
	cfg.Logger = slog.New(f.log)
	cfg.Failed = func(a ownership.Actor, op string) { f.failed <- point{a, op} }
	f.env = newEnv(t, cfg)
	return f
}

// peer is a client socket read in the background, as a browser reads
// one, so that it answers pings: its messages come out of msgs, then the
// error its reading ended with.
type peer struct {
	name string
	msgs chan string
	end  chan error
}

func watch(name string, c *websocket.Conn) *peer {
	p := &peer{name: name, msgs: make(chan string, 16), end: make(chan error, 1)}
	go func() {
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				p.end <- err
				return
			}
			p.msgs <- string(data)
		}
	}()
	return p
}

// next returns the peer's next message.
func (p *peer) next(t *testing.T) string {
	t.Helper()
	select {
	case m := <-p.msgs:
		return m
	case err := <-p.end:
		t.Fatalf("%s: socket ended (%v), want a message", p.name, err)
	case <-time.After(wait):
		t.Fatalf("%s: no message within %v", p.name, wait)
	}
	return ""
}

// ended returns the error the peer's reading ended with, failing the test
// if a message came first.
func (p *peer) ended(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.end:
		select {
		case m := <-p.msgs:
			t.Errorf("%s got %q before its socket ended", p.name, m)
		default:
		}
		return err
	case m := <-p.msgs:
		t.Fatalf("%s got %q, want its socket to end", p.name, m)
	case <-time.After(wait):
		t.Fatalf("%s: socket still open after %v", p.name, wait)
	}
	return nil
}

// assertRoomFailed checks that a's room failed at op, once: each of its
// clients (peers, sockets ids) was sent close 1011 and nothing before it;
// the Sink was told each socket is gone (what the keeper's last-socket
// rule counts) and got its terminal ErrInternal; every slot of the room
// is freed; the failure was counted, reported and logged once, with the
// actor, the operation and the panic's stack.
func (f *failEnv) assertRoomFailed(t *testing.T, a ownership.Actor, op string, ids []ID, peers ...*peer) {
	t.Helper()
	select {
	case got := <-f.inject.fired:
		require.Equal(t, point{a, op}, got)
	case <-time.After(wait):
		t.Fatalf("the failure of %s in %s was never injected", a, op)
	}
	for _, p := range peers {
		var ce *websocket.CloseError
		require.ErrorAs(t, p.ended(t), &ce, p.name)
		assert.Equal(t, websocket.CloseInternalServerErr, ce.Code, p.name)
		assert.Equal(t, "internal error", ce.Text, p.name)
	}
	var ended []ID
	for range ids {
		e := next(t, f.sink.ends)
		assert.Equal(t, a, e.actor, "%+v", e)
		assert.Equal(t, "error", e.kind, "%+v", e)
		assert.ErrorIs(t, e.err, ErrInternal)
		assert.Equal(t, websocket.CloseInternalServerErr, CloseCode(e.err))
		ended = append(ended, e.id)
	}
	assert.ElementsMatch(t, ids, ended, "a terminal event for each socket of the room")
	opened, gone := f.sink.counts(a)
	assert.Equal(t, len(ids), opened)
	assert.Equal(t, len(ids), gone, "Sink.Gone (the keeper's SocketGone) once for each socket")
	assert.Empty(t, f.o.List(a, ""))

	assert.Equal(t, 1.0, value(t, f.o.m.failures.WithLabelValues(op)))
	select {
	case got := <-f.failed:
		assert.Equal(t, point{a, op}, got)
	default:
		t.Error("Config.Failed was not called")
	}
	select {
	case got := <-f.failed:
		t.Errorf("Config.Failed called again, for %v", got)
	default:
	}
	lines := f.log.Matching("socket owner of an actor failed")
	require.Len(t, lines, 1, "logged once")
	for _, want := range []string{"ERROR", "class=" + a.Class, "name=" + a.Name, "op=" + op,
		"panic=injected failure", "stack=goroutine", "(*injector).hook"} {
		assert.Contains(t, lines[0], want)
	}
}

func dialPeers(f *failEnv, a ownership.Actor, names ...string) ([]*peer, []ID) {
	var peers []*peer
	var ids []ID
	for _, name := range names {
		c, id := f.dial(a)
		peers = append(peers, watch(name, c))
		ids = append(ids, id)
	}
	return peers, ids
}

// TestRoomFailsInBroadcast: a panic in a broadcast, with every socket of
// the room claimed for its direct write, closes the room's sockets with
// 1011 (and writes them nothing), and the broadcast returns ErrInternal.
// The other room's sockets stay open and get its broadcasts; the failed
// room takes a new socket afterwards.
func TestRoomFailsInBroadcast(t *testing.T) {
	for _, p := range writePaths {
		t.Run(p.name, func(t *testing.T) { testRoomFailsInBroadcast(t, p.cfg) })
	}
}

func testRoomFailsInBroadcast(t *testing.T, cfg Config) {
	f := newFailEnv(t, cfg)
	needRings(t, f.env, cfg)
	peers, ids := dialPeers(f, room, "alice", "bob", "carol")
	others, _ := dialPeers(f, other, "dan", "eve")

	f.inject.arm(room, opBroadcast)
	n, err := f.o.Broadcast(room, "", true, []byte("lost"))
	require.ErrorIs(t, err, ErrInternal)
	assert.Zero(t, n)
	f.assertRoomFailed(t, room, opBroadcast, ids, peers...)
	assert.Equal(t, 2, f.o.Held(), "the other room's slots only")

	n, err = f.o.Broadcast(other, "", true, []byte("still here"))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	for _, p := range others {
		assert.Equal(t, "still here", p.next(t), p.name)
	}
	late, _ := dialPeers(f, room, "frank")
	n, err = f.o.Broadcast(room, "", true, []byte("again"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, "again", late[0].next(t))
}

// TestRoomFailsInReader: a panic on a socket's reader goroutine, while
// it handles a message, closes every socket of its room with 1011; the
// message never reaches the Sink. The other room's messages go on
// reaching it, and its socket is sent to.
func TestRoomFailsInReader(t *testing.T) {
	f := newFailEnv(t, Config{})
	aliceConn, aliceID := f.dial(room)
	alice := watch("alice", aliceConn)
	bobs, bobIDs := dialPeers(f, room, "bob")
	carolConn, carolID := f.dial(other)
	carol := watch("carol", carolConn)

	f.inject.arm(room, opReader)
	require.NoError(t, aliceConn.WriteMessage(websocket.TextMessage, []byte("boom")))
	f.assertRoomFailed(t, room, opReader, []ID{aliceID, bobIDs[0]}, alice, bobs[0])

	require.NoError(t, carolConn.WriteMessage(websocket.TextMessage, []byte("hello")))
	m := next(t, f.sink.messages)
	assert.Equal(t, carolID, m.id, "the Sink's first message is carol's: alice's never came")
	assert.Equal(t, "hello", m.data)
	require.NoError(t, f.o.Send(other, carolID, true, []byte("hi carol")))
	assert.Equal(t, "hi carol", carol.next(t))
}

// TestRoomFailsInWriter: a panic on a socket's writer goroutine (a
// message too large to write directly is queued for it) closes every
// socket of its room with 1011, the message unwritten. The other room's
// large messages are written by its writer.
func TestRoomFailsInWriter(t *testing.T) {
	f := newFailEnv(t, Config{})
	peers, ids := dialPeers(f, room, "alice", "bob")
	carolConn, carolID := f.dial(other)
	carol := watch("carol", carolConn)

	big := strings.Repeat("w", maxDirect+1)
	f.inject.arm(room, opWriter)
	require.NoError(t, f.o.Send(room, ids[0], true, []byte(big)))
	f.assertRoomFailed(t, room, opWriter, ids, peers...)

	require.NoError(t, f.o.Send(other, carolID, true, []byte(big)))
	assert.Equal(t, big, carol.next(t))
}

// TestRoomFailsInPinger: a panic in the pinger's work for a socket
// closes every socket of its room with 1011; the pinger goes on pinging
// the other room's socket, which answers and stays open.
func TestRoomFailsInPinger(t *testing.T) {
	// Pings every second: a pong has a second to come back.
	f := newFailEnv(t, Config{PingInterval: time.Second, PongTimeout: time.Second})
	peers, ids := dialPeers(f, room, "alice", "bob")
	carolConn, carolID := f.dial(other)
	carol := watch("carol", carolConn)

	f.inject.arm(room, opPinger)
	f.assertRoomFailed(t, room, opPinger, ids, peers...)

	s, err := f.o.lookup(other, carolID)
	require.NoError(t, err)
	var pinged int64
	require.Eventually(t, func() bool { pinged = s.pingTick.Load(); return pinged != 0 }, wait, 10*time.Millisecond,
		"carol's socket is pinged")
	require.Eventually(t, func() bool { return s.pingTick.Load() > pinged }, wait, 10*time.Millisecond,
		"carol's socket is pinged again")
	require.NoError(t, f.o.Send(other, carolID, true, []byte("hi carol")))
	assert.Equal(t, "hi carol", carol.next(t))
	assert.Len(t, f.o.List(other, ""), 1)
}

// TestRoomFailureSurvivesPanicInItsClose: the Sink's Gone panics while a
// failed room's sockets are closed with 1011. That is no failure of its
// own and nothing loops: the connections left are closed without a close
// frame, every socket of the room still ends (Gone and a terminal event
// each), and the other room carries on.
func TestRoomFailureSurvivesPanicInItsClose(t *testing.T) {
	f := newFailEnv(t, Config{})
	var goneFailed atomic.Bool
	f.sink.onGone = func(a ownership.Actor) {
		if a == room && goneFailed.CompareAndSwap(false, true) {
			panic("injected failure of the Sink's Gone")
		}
	}
	peers, ids := dialPeers(f, room, "alice", "bob", "carol")
	others, _ := dialPeers(f, other, "dan")

	f.inject.arm(room, opBroadcast)
	_, err := f.o.Broadcast(room, "", true, []byte("lost"))
	require.ErrorIs(t, err, ErrInternal)
	for _, p := range peers {
		assert.Error(t, p.ended(t), p.name)
	}
	var ended []ID
	for range ids {
		ended = append(ended, next(t, f.sink.ends).id)
	}
	assert.ElementsMatch(t, ids, ended)
	assert.True(t, goneFailed.Load())
	_, gone := f.sink.counts(room)
	assert.Equal(t, len(ids), gone)
	assert.Equal(t, 1, f.o.Held())

	assert.Equal(t, 1.0, value(t, f.o.m.failures.WithLabelValues(opBroadcast)), "one failure")
	assert.Equal(t, 1, f.log.Count("socket owner of an actor failed:"))
	assert.Equal(t, 1, f.log.Count("failed closing its sockets", "injected failure of the Sink's Gone"))
	n, err := f.o.Broadcast(other, "", true, []byte("still here"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, "still here", others[0].next(t))
}

// TestFailedOperationReturnsErrInternal: an operation of a room that
// fails returns ErrInternal, and the room's socket is closed with 1011.
func TestFailedOperationReturnsErrInternal(t *testing.T) {
	for _, op := range []string{opSend, opClose, opAttachment} {
		t.Run(op, func(t *testing.T) {
			f := newFailEnv(t, Config{})
			peers, ids := dialPeers(f, room, "alice")
			f.inject.arm(room, op)
			var err error
			switch op {
			case opSend:
				err = f.o.Send(room, ids[0], true, []byte("x"))
			case opClose:
				err = f.o.Close(room, ids[0], 1000, "")
			case opAttachment:
				err = f.o.SetAttachment(room, ids[0], []byte("x"))
			}
			require.ErrorIs(t, err, ErrInternal)
			assert.False(t, errors.Is(err, ErrUnknownSocket))
			f.assertRoomFailed(t, room, op, ids, peers...)
		})
	}
}
