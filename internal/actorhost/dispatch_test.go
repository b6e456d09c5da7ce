package actorhost_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// scriptedKeeper answers acquisitions with the decisions of its script,
// in order; past its end, it grants at generation 1.
type scriptedKeeper struct {
	fakeKeeper
	mu     sync.Mutex
	script []keeper.Decision
	asked  int
}

func (k *scriptedKeeper) Acquire(context.Context, ownership.Actor) (keeper.Decision, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.asked++
	if len(k.script) == 0 {
		return keeper.Decision{Verdict: keeper.Granted, Gen: 1}, nil
	}
	d := k.script[0]
	k.script = k.script[1:]
	return d, nil
}

func refusal(reason string, draining bool) keeper.Decision {
	return keeper.Decision{Verdict: keeper.Refused, Reason: reason, RetryAfter: 2500 * time.Millisecond, Draining: draining}
}

// TestDispatch: an event handed to Dispatch is acquired and delivered; a
// refusal comes back as an UnavailableError at once (the HTTP client
// retries); an actor held elsewhere comes back as where it is held.
func TestDispatch(t *testing.T) {
	k := &scriptedKeeper{script: []keeper.Decision{
		refusal("record contended", false),
		{Verdict: keeper.Routed, Node: "n2", Addr: "127.0.0.1:9"},
	}}
	h := newHost(t, memstore.New(memstore.Faults{}), k, nil)
	_, at, err := h.Dispatch(t.Context(), room, get(""))
	var ua *actorhost.UnavailableError
	require.ErrorAs(t, err, &ua)
	assert.True(t, ua.NotRun)
	assert.Equal(t, "record contended", ua.Reason)
	assert.Nil(t, at)
	_, at, err = h.Dispatch(t.Context(), room, get(""))
	require.NoError(t, err)
	assert.Equal(t, &actorhost.Elsewhere{Node: "n2", Addr: "127.0.0.1:9"}, at)
	resp, at, err := h.Dispatch(t.Context(), room, get(""))
	require.NoError(t, err)
	assert.Nil(t, at)
	assert.Equal(t, "1\n", string(resp.Body))
	_, _, err = h.Dispatch(t.Context(), ownership.Actor{Class: "nope", Name: "a"}, get(""))
	assert.ErrorIs(t, err, actors.ErrUnknownClass)
}

// TestDispatchSocketPatience: a socket's event is tried again after a
// refusal that may pass, waiting what the refusal suggests (at most 1 s),
// within its patience; a drain's refusal is final. Time is synctest's.
func TestDispatchSocketPatience(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &scriptedKeeper{script: []keeper.Decision{refusal("bucket did not answer the record read", false), refusal("record contended", false)}}
		h := newHost(t, memstore.New(memstore.Faults{}), k, nil)
		ev := &actors.SocketEvent{Kind: actors.SocketError, Err: "test"}
		start := time.Now()
		_, at, err := h.DispatchSocket(t.Context(), room, ev, 30*time.Second)
		require.NoError(t, err)
		assert.Nil(t, at)
		assert.Equal(t, 3, k.asked)
		assert.Equal(t, 2*time.Second, time.Since(start), "two waits of 1 s")

		k.script = []keeper.Decision{refusal("node draining", true)}
		_, _, err = h.DispatchSocket(t.Context(), room, ev, 30*time.Second)
		var ua *actorhost.UnavailableError
		require.ErrorAs(t, err, &ua)
		assert.True(t, ua.Draining)

		k.script = nil
		for range 40 {
			k.script = append(k.script, refusal("record contended", false))
		}
		start = time.Now()
		_, _, err = h.DispatchSocket(t.Context(), room, ev, 3*time.Second)
		require.ErrorAs(t, err, &ua)
		assert.Contains(t, ua.Reason, "tried for 3s")
		assert.LessOrEqual(t, time.Since(start), 3*time.Second)
	})
}
