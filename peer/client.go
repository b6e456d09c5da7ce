package peer

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Keeper is what the client needs of the ownership keeper: the peers'
// status (to take a silent holder for dead), and to tell it of a peer that
// refused a connection and of an event sent on that did not run there.
type Keeper interface {
	Status() ownership.Status
	PeerUnreachable(node ownership.NodeID)
	// RouteFailed says an event sent on to node for a was refused there
	// before it ran, or not sent: the keeper reads a's record again
	// rather than routing the next event the same way.
	RouteFailed(a ownership.Actor, node ownership.NodeID)
}

// Config is what a Client sends with. Node and Keeper are required.
type Config struct {
	// Node is this node's id, sent in ForwardedHeader.
	Node   ownership.NodeID
	Keeper Keeper
	// Transport carries forwarded requests, calls and take calls. Nil: a
	// transport of the client's own, with PeerConns connections to each
	// peer at most.
	Transport http.RoundTripper
	// PeerConns bounds the connections to each peer that forwarded
	// requests and calls use at once (a WebSocket relay's are bounded by
	// the socket budget). Zero: DefaultPeerConns.
	PeerConns int
	// ClusterKey, when set, signs every request sent (Sign).
	ClusterKey []byte
	// MaxBody bounds the answer of a call, and the body of a refusal
	// relayed to a client. Zero: 1 MiB.
	MaxBody int64
	// Logger: nil logs nothing.
	Logger *slog.Logger
	// TLS, when set, reaches peers over TLS with it (https and a TLS
	// relay), checking their certificates against its RootCAs; nil: plain
	// HTTP. The nodes of a cluster all serve TLS or none does.
	TLS *tls.Config
}

// DefaultPeerConns is the default of Config.PeerConns.
const DefaultPeerConns = 256

// Bounds on reaching a peer: connecting, and its answer's header. A peer
// that hangs (stopped, or cut off) must not hold the request forever; the
// answer may take what an event takes (a call waits up to its timeout,
// 30 s by default).
const (
	dialTimeout   = 5 * time.Second
	answerTimeout = 45 * time.Second
)

// Client sends events and take calls to the node's peers. Safe for
// concurrent use.
type Client struct {
	cfg    Config
	log    *slog.Logger
	peers  *peerLog // failures logged once per peer and state
	relays relays   // the WebSockets relayed to other nodes (relay.go)
}

// Validate reports bounds New cannot run with (the wiring, Node and
// Keeper, is New's to check).
func (c Config) Validate() error {
	if c.PeerConns < 0 || c.MaxBody < 0 {
		return fmt.Errorf("peer config: peer connections %d or max body %d is negative", c.PeerConns, c.MaxBody)
	}
	return nil
}

// New returns the client of cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Node == "" || cfg.Keeper == nil {
		return nil, errors.New("peer config: node and keeper are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.PeerConns = cmp.Or(cfg.PeerConns, DefaultPeerConns)
	cfg.MaxBody = cmp.Or(cfg.MaxBody, 1<<20)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Transport == nil {
		// Forwards and calls take at most PeerConns connections to each
		// peer, out of the descriptors reserved for peers; a relayed
		// WebSocket holds its own for as long as it lives, counted in
		// the socket budget instead (see relay.go).
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.ResponseHeaderTimeout = answerTimeout
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost = cfg.PeerConns, min(cfg.PeerConns, 64)
		t.TLSClientConfig, t.ForceAttemptHTTP2 = cfg.TLS, false
		cfg.Transport = t
	}
	return &Client{cfg: cfg, log: cfg.Logger.With(slog.String("component", "peer")), peers: newPeerLog(cfg.Logger)}, nil
}

// scheme is the peers' URL scheme.
func (c *Client) scheme() string {
	if c.cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// Sent is what became of an event sent to a peer.
type Sent uint8

const (
	// Answered: the holder's answer was given (relayed to the client, or
	// returned to the caller).
	Answered Sent = iota
	// NotSent: no connection to the holder: nothing was sent.
	NotSent
	// Refused: the holder refused the event without running it.
	Refused
	// Unknown: it was sent and then no answer came (the connection broke,
	// the holder was taken for dead), or the holder's answer says that its
	// outcome is unknown, or that it still runs.
	Unknown
)

// ErrHolderRefused: the holder answered that it did not run the event.
var ErrHolderRefused = errors.New("the holder refused the event without running it")

// ErrHolderUnknown: the holder answered that the event's outcome is
// unknown there, or that it still runs.
var ErrHolderUnknown = errors.New("the holder does not know the event's outcome yet")

// judgeAnswer reads the answer of the node an event was sent to: nil when
// it is the event's answer, ErrHolderRefused when the event did not run
// there, ErrHolderUnknown when its outcome is not known there yet (or,
// retrying, it still runs there from an earlier try). Unless last, the
// sender sends the event again on either error. It tells the keeper what
// the answer says of the holder.
func (c *Client) judgeAnswer(a ownership.Actor, d actorhost.Elsewhere, status int, header http.Header, last, retrying bool) error {
	outcome := header.Get(actorhost.OutcomeHeader)
	switch {
	case status == http.StatusUnauthorized && header.Get(NotRunHeader) != "":
		// Signed for an instance the holder no longer is: its lease is
		// read again, and the event sent again.
		c.cfg.Keeper.PeerUnreachable(d.Node)
		fallthrough
	case status == http.StatusServiceUnavailable && header.Get(NotRunHeader) != "":
		c.cfg.Keeper.RouteFailed(a, d.Node)
		if !last {
			return ErrHolderRefused
		}
	case !last && status == http.StatusGatewayTimeout && outcome == "unknown" && header.Get(actorhost.RanHeader) == "",
		!last && retrying && status == http.StatusConflict && outcome == "running":
		return ErrHolderUnknown
	}
	return nil
}

// judgeFailure says what became of an event whose send ended with err and
// no answer: nothing was sent when the connection could not be made, and
// otherwise it may have reached the holder. dead says this node took the
// holder for dead while it waited (watchHolder). It tells the keeper and
// the peer log, and returns the error to report.
func (c *Client) judgeFailure(a ownership.Actor, d actorhost.Elsewhere, what string, err error, dead bool) (Sent, error) {
	c.peers.failed(d.Node, d.Addr, what, err)
	c.cfg.Keeper.RouteFailed(a, d.Node)
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		c.cfg.Keeper.PeerUnreachable(d.Node)
		return NotSent, err
	case dead:
		return Unknown, fmt.Errorf("node %s taken for dead while it did not answer", d.Node)
	}
	return Unknown, err
}

// watchHolder calls dead once this node takes peer for dead (its DeadIn
// reaches 0: its lease unchanged for ttl + grace here, or read fenced by
// another watcher), until the returned stop is called. It looks at the
// peer's status a second after the send began, then every second, or
// sooner when the peer would be dead by then if it renewed nothing: a
// fence by another node shows as a change of the peer's lease, which this
// node reads at once (ownership: a suspect peer), not as a DeadIn that
// reaches 0.
func (c *Client) watchHolder(peer ownership.NodeID, dead func()) (stop func()) {
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	var look func()
	look = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		for _, p := range c.cfg.Keeper.Status().Peers {
			if p.Node != peer {
				continue
			}
			if p.DeadIn <= 0 {
				stopped = true
				go dead()
				return
			}
			t = time.AfterFunc(min(p.DeadIn+10*time.Millisecond, time.Second), look)
			return
		}
		// Not a peer this node knows: nothing to watch.
	}
	// The first look waits a second: most forwards are answered well
	// before, and a look asks the keeper for its whole status.
	mu.Lock()
	t = time.AfterFunc(time.Second, look)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if t != nil {
			t.Stop()
		}
	}
}

// DeadIn estimates when this node takes peer for dead, freeing what it
// holds: a client's Retry-After.
func (c *Client) DeadIn(peer ownership.NodeID) time.Duration {
	for _, p := range c.cfg.Keeper.Status().Peers {
		if p.Node == peer {
			return max(p.DeadIn, time.Second)
		}
	}
	return time.Second
}

// refuse answers a client 503 for an event that did not run, with a
// Retry-After.
func refuse(w http.ResponseWriter, retry time.Duration, msg string) {
	w.Header().Set(NotRunHeader, "1")
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retry, time.Second).Seconds()))))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, msg+"\n")
}

// header marks out as sent by this node to the node d names, for the
// instance d names when known, and signs it with body when the nodes have
// a cluster key: the last thing done to out's headers.
func (c *Client) header(out *http.Request, d actorhost.Elsewhere, body []byte) {
	out.Header.Set(ForwardedHeader, string(c.cfg.Node))
	out.Header.Set(ForwardedToHeader, string(d.Node))
	setInstance(out.Header, d.Instance)
	if len(c.cfg.ClusterKey) > 0 {
		Sign(out, body, c.cfg.ClusterKey, time.Now())
	}
}
