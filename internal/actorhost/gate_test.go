package actorhost_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
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

// hungKeeper asks nobody: RequestMayAct's answer never comes.
type hungKeeper struct{ fakeKeeper }

func (o *hungKeeper) RequestMayAct(ownership.Actor, ownership.Generation, *actor.PID, uint64) {
	o.asked.Add(1)
}

// TestGateQuestionDoesNotHoldTheActor: while the gate waits for the
// keeper's answer, the actor's mailbox goes on: later events run (their
// answers wait behind the read's, in order), and a stop ends the actor at
// once, answering what waited with the keeper's verdict asked then.
func TestGateQuestionDoesNotHoldTheActor(t *testing.T) {
	o := &hungKeeper{}
	h := newHost(t, memstore.New(memstore.Faults{}), o, nil)
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
	require.Eventually(t, func() bool { return o.asked.Load() == 1 }, 10*time.Second, time.Millisecond)
	go func() {
		body, err := count(t, h, 1, "")
		write <- answer{body, err}
	}()
	// The write runs and commits behind the question; its answer waits
	// for the read's, which goes first.
	select {
	case a := <-write:
		t.Fatalf("the write was answered before the read before it: %+v", a)
	case a := <-read:
		t.Fatalf("the read was answered without the keeper's verdict: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}

	stopped := make(chan struct{})
	go func() {
		h.StopActing(room, 1)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the stop waited for the keeper's answer")
	}
	for _, ch := range []chan answer{read, write} {
		select {
		case a := <-ch:
			if a.err != nil {
				var ua *actorhost.UnavailableError
				require.True(t, errors.As(a.err, &ua), "an event that waited at the gate at a stop: %v", a.err)
			} else {
				require.Contains(t, []string{"1", "2"}, strings.TrimSpace(a.body))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an event that waited at the gate was not answered at the stop")
		}
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
