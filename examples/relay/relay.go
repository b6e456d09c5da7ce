// Package relay is an example class with an outbound WebSocket: each
// actor follows a feed (a WebSocket service it dials) and relays every
// message of it to its own clients, the sockets it accepted. The feed's
// socket belongs to the node, as the clients' do, so the relay sleeps
// between messages: each message wakes it, and it goes back to sleep.
//
//	POST   /actor/relay/NAME?url=ws://host/feed   follow a feed (a URL the node's
//	                                              --egress-allow allows)
//	DELETE /actor/relay/NAME                      stop following it
//	GET    /actor/relay/NAME (WebSocket upgrade)  a client: gets every message of the feed
//	GET    /actor/relay/NAME                      what it follows, how many messages it
//	                                              relayed, and how its feed sockets ended
//
// When its feed's socket closes (the service ended it, or the relay left
// the node that held it: a drain, a move), the relay is told, wherever it
// is then, and dials the feed again; if that fails, an alarm tries again
// a few seconds later.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
)

// Relay is the class, registered as "relay" by the wasmkeep binary.
type Relay struct{}

// retry is how long after a failed dial the relay tries again.
const retry = 5 * time.Second

// Keys of its storage.
const (
	keyURL     = "url"     // the feed it follows, while it does
	keySocket  = "socket"  // the feed's socket, while open
	keyCount   = "relayed" // messages relayed
	keyEnds    = "ends/"   // ends/<time>: how a feed socket ended
	maxEndKept = 20
)

// Handle serves one request.
func (Relay) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	switch {
	case req.IsUpgrade():
		return actors.AcceptSocket("client"), nil
	case req.Method == http.MethodPost:
		url := req.Query.Get("url")
		if url == "" {
			return actors.Text(http.StatusBadRequest, "relay: ?url=ws://... is required\n"), nil
		}
		stop(ctx, st)
		if err := st.Put(keyURL, []byte(url)); err != nil {
			return nil, err
		}
		if err := follow(ctx, st); err != nil {
			st.Delete(keyURL)
			return actors.Text(dialStatus(err), "relay: "+err.Error()+"\n"), nil
		}
	case req.Method == http.MethodDelete:
		stop(ctx, st)
		st.Delete(keyURL)
	case req.Method != http.MethodGet:
		return actors.Text(http.StatusMethodNotAllowed, "relay: GET, POST or DELETE\n"), nil
	}
	return status(st)
}

// follow dials the feed the relay follows.
func follow(ctx context.Context, st actors.Storage) error {
	url, ok := st.Get(keyURL)
	if !ok {
		return nil
	}
	id, err := actors.DialSocket(ctx, &actors.SocketDial{URL: string(url), Tags: []string{"feed"}})
	if err != nil {
		return err
	}
	return st.Put(keySocket, []byte(id.String()))
}

// stop closes the feed's socket, if open.
func stop(ctx context.Context, st actors.Storage) {
	if v, ok := st.Get(keySocket); ok {
		if id, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			actors.SocketsOf(ctx).Close(actors.SocketID(id), 1000, "unfollowed")
		}
		st.Delete(keySocket)
	}
}

// dialStatus is the HTTP status of a dial that failed.
func dialStatus(err error) int {
	switch {
	case errors.Is(err, actors.ErrFetchRefused), errors.Is(err, actors.ErrBadFetch):
		return http.StatusBadRequest
	case errors.Is(err, actors.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}

// HandleSocket relays the feed's messages to the clients, and follows the
// feed again when its socket ends.
func (Relay) HandleSocket(ctx context.Context, ev *actors.SocketEvent, st actors.Storage) error {
	if !ev.Socket.Dialed() {
		return nil // a client's: the relay only sends to them
	}
	switch ev.Kind {
	case actors.SocketMessage:
		actors.SocketsOf(ctx).Broadcast("client", ev.Text, ev.Data)
		n := 0
		if v, ok := st.Get(keyCount); ok {
			n, _ = strconv.Atoi(string(v))
		}
		return st.Put(keyCount, []byte(strconv.Itoa(n+1)))
	}
	// A close or an error: the socket is gone.
	if err := noteEnd(st, ev); err != nil {
		return err
	}
	if v, ok := st.Get(keySocket); !ok || string(v) != ev.Socket.String() {
		return nil // not the socket it follows now (unfollowed, or followed again)
	}
	st.Delete(keySocket)
	if url, ok := st.Get(keyURL); ok && string(url) == ev.URL {
		if err := follow(ctx, st); err != nil {
			return actors.SetAlarm(ctx, "reconnect", time.Now().Add(retry))
		}
	}
	return nil
}

// HandleAlarm dials the feed again after a dial that failed.
func (Relay) HandleAlarm(ctx context.Context, a actors.Alarm, st actors.Storage) error {
	if _, open := st.Get(keySocket); open {
		return nil
	}
	if err := follow(ctx, st); err != nil {
		return actors.SetAlarm(ctx, "reconnect", time.Now().Add(retry))
	}
	return nil
}

// noteEnd keeps how a feed socket ended, the last maxEndKept of them.
func noteEnd(st actors.Storage, ev *actors.SocketEvent) error {
	what := fmt.Sprintf("socket %v closed %d %s", ev.Socket, ev.Code, ev.URL)
	if ev.Kind == actors.SocketError {
		what = fmt.Sprintf("socket %v failed %d %s", ev.Socket, ev.Code, ev.URL)
	}
	if err := st.Put(fmt.Sprintf("%s%020d", keyEnds, time.Now().UnixNano()), []byte(what)); err != nil {
		return err
	}
	ends, err := st.List(actors.ListOptions{Prefix: keyEnds})
	if err != nil {
		return err
	}
	for i := 0; i < len(ends)-maxEndKept; i++ {
		st.Delete(ends[i].Key)
	}
	return nil
}

func status(st actors.Storage) (*actors.Response, error) {
	var b strings.Builder
	if url, ok := st.Get(keyURL); ok {
		fmt.Fprintf(&b, "following %s", url)
		if id, ok := st.Get(keySocket); ok {
			fmt.Fprintf(&b, " on socket %s", id)
		} else {
			b.WriteString(" (reconnecting)")
		}
		b.WriteByte('\n')
	}
	n, _ := st.Get(keyCount)
	fmt.Fprintf(&b, "relayed %s\n", cmp.Or(string(n), "0"))
	ends, err := st.List(actors.ListOptions{Prefix: keyEnds})
	if err != nil {
		return nil, err
	}
	for _, e := range ends {
		fmt.Fprintf(&b, "%s\n", e.Value)
	}
	return actors.Text(http.StatusOK, b.String()), nil
}
