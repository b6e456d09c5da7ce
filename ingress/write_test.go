package ingress

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/peer"
)

type grantingKeeper struct{}

func (grantingKeeper) Status() ownership.Status                      { return ownership.Status{LeaseValid: true} }
func (grantingKeeper) PeerUnreachable(ownership.NodeID)              {}
func (grantingKeeper) RouteFailed(ownership.Actor, ownership.NodeID) {}

type bigAnswer struct{}

func (bigAnswer) Dispatch(context.Context, ownership.Actor, *actors.Request) (*actors.Response, *actorhost.Elsewhere, error) {
	return &actors.Response{Status: http.StatusOK, Body: make([]byte, 64<<20)}, nil, nil
}

func (bigAnswer) Take(context.Context, ownership.Actor) (*actorhost.Elsewhere, error) {
	return nil, nil
}

func (bigAnswer) Routable(context.Context, ownership.Actor) error { return nil }

// A client that never reads its answer holds its handler only until the
// answer's write deadline.
func TestUnreadAnswerEndsAtItsDeadline(t *testing.T) {
	h, err := New(Config{Node: "n1", Keeper: grantingKeeper{}, Host: bigAnswer{}, Registry: actors.BuiltIn(), Peers: mustPeers(t, grantingKeeper{})})
	require.NoError(t, err)
	h.writeTimeout = 300 * time.Millisecond
	done := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- struct{}{}
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("GET /actor/counter/a HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler is still writing to a client that does not read, 10 s on")
	}
}

// mustPeers is the peer client of node n1 whose keeper is k.
func mustPeers(t *testing.T, k peer.Keeper) *peer.Client {
	t.Helper()
	c, err := peer.New(peer.Config{Node: "n1", Keeper: k})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
