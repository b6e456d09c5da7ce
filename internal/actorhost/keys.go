package actorhost

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
)

// Event keys: an actor runs an event that carries a key at most once.
//
// A client names a request with an Idempotency-Key header; a node names
// what it forwards to another node, and an actor's calls, with a key of
// its own. The actor remembers each key it ran, with the event's answer
// (status, headers, body) and a hash of the request, in its own storage,
// under the node's prefix, in the same commit as the event's writes: a key
// is remembered if and only if the event's writes are durable. So a second
// event with the key, on whatever node holds the actor by then, finds it
// and gets the first answer without running again; one that finds nothing
// knows that no earlier run with the key took effect, nor can (a later
// commit of an earlier hold cannot land over the seal of the hold that
// reads, and an earlier commit of this hold was read). That is how a node
// whose forward broke after it was sent, or whose holder stopped answering,
// tells whether to send the event again: it sends it again, with the same
// key. The same request with the key while the first still runs here is
// answered 409; the key with a different request, 422 (the IETF httpapi
// draft's answers).
//
// A client's key is remembered for Config.KeyWindow (24 h by default),
// with the answer of every event that ran to an answer but a failed one (a
// retry of a 500 runs again). A node's key is remembered for NodeKeyWindow,
// only when the event took effect (wrote, sent on a socket, or called): an
// event that did not can run again for nothing. An actor keeps at most
// Config.MaxKeys keys; past that the ones closest to their end go first.
// The remembered keys and answers count toward the actor's bound on its
// state (Config.MaxState), survive DeleteAll, and are neither seen nor
// touched by the class.
//
// A call an actor makes carries a key derived from its event's: the same
// call of a retried event (with the client's key) is the same key, so the
// callee answers it from what it remembers. A call from an event without a
// key carries a random one, used once the call is forwarded, so that the
// forward can be tried again.

// IdempotencyHeader is the header with which a client names a request so
// that it runs at most once (draft-ietf-httpapi-idempotency-key-header).
const IdempotencyHeader = "Idempotency-Key"

// ReplayedHeader, "true", marks an answer given from what the actor
// remembered of an earlier event with the same key.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLenIdempotency bounds an Idempotency-Key, in bytes.
const MaxKeyLenIdempotency = 255

// DefaultKeyWindow is how long a client's key is remembered unless Config
// says otherwise; NodeKeyWindow how long a node's is: longer than a
// forward and its tries can last (ingress's failover wait and answer time).
const (
	DefaultKeyWindow = 24 * time.Hour
	NodeKeyWindow    = 10 * time.Minute
)

// DefaultMaxKeys bounds the keys one actor remembers unless Config says
// otherwise.
const DefaultMaxKeys = 10000

// KeptHeader, "no-body", marks a replayed answer whose body was too large
// to keep (over actorstore.MaxKeptAnswer).
const KeptHeader = "Wasmkeep-Replayed-Body"

// EventKey names an event that must run at most once.
type EventKey struct {
	Key string
	// Node: a node made it (a forward's, a call's), not a client. The two
	// are kept apart: a client cannot name a node's key.
	Node bool
	// Keep is how long the actor remembers it.
	Keep time.Duration
	// Always: remember the answer even of an event that took no effect
	// (a client's key, and a call's derived from one: the first answer is
	// the answer).
	Always bool
	// Fresh: its sender has not sent it before, so no earlier event can
	// have run with it, and the actor does not look for one.
	Fresh bool
}

// CheckIdempotencyKey reports why s is not a valid Idempotency-Key: one to
// MaxKeyLenIdempotency visible ASCII characters.
func CheckIdempotencyKey(s string) error {
	if s == "" || len(s) > MaxKeyLenIdempotency {
		return fmt.Errorf("%s of %d bytes: want 1 to %d", IdempotencyHeader, len(s), MaxKeyLenIdempotency)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return fmt.Errorf("%s holds byte 0x%02x: want visible ASCII", IdempotencyHeader, s[i])
		}
	}
	return nil
}

// ClientKey is the key of a client's Idempotency-Key, remembered for
// window (zero: DefaultKeyWindow).
func ClientKey(key string, window time.Duration) EventKey {
	if window <= 0 {
		window = DefaultKeyWindow
	}
	return EventKey{Key: key, Keep: window, Always: true}
}

// NewNodeKey is a fresh random key of a node's (timed): kept for
// NodeKeyWindow, only if its event takes effect, and then only as the mark
// that it did, without its answer. It begins with its expiry (Unix
// milliseconds, 12 hexadecimal digits), so that an actor keeps such keys
// in the order they end and needs no index of them, then 96 random bits.
func NewNodeKey() EventKey {
	var b [12]byte
	rand.Read(b[:])
	exp := time.Now().Add(NodeKeyWindow).UnixMilli()
	return EventKey{Key: fmt.Sprintf("%012x", uint64(exp)) + base64.RawURLEncoding.EncodeToString(b[:]),
		Node: true, Keep: NodeKeyWindow, Fresh: true}
}

// timed says whether k is a node's key kept only if its event took effect,
// named by its expiry (NewNodeKey).
func (k EventKey) timed() bool { return k.Node && !k.Always }

// String gives the key as a node sends it to another (EventKeyHeader in
// package ingress): the window in milliseconds, "always" or "effect", the
// key, and "fresh" if it is. ParseEventKey reads it.
func (k EventKey) String() string {
	mode := "effect"
	if k.Always {
		mode = "always"
	}
	s := strconv.FormatInt(k.Keep.Milliseconds(), 10) + " " + mode + " " + k.Key
	if k.Fresh {
		s += " fresh"
	}
	return s
}

// ParseEventKey reads a node's key as String gives it.
func ParseEventKey(s string) (EventKey, error) {
	parts := strings.Split(s, " ")
	if len(parts) != 3 && (len(parts) != 4 || parts[3] != "fresh") {
		return EventKey{}, errors.New("event key: want window, mode, key and perhaps fresh")
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || ms <= 0 || ms > int64(366*24*time.Hour/time.Millisecond) {
		return EventKey{}, fmt.Errorf("event key: bad window %q", parts[0])
	}
	k := EventKey{Key: parts[2], Node: true, Keep: time.Duration(ms) * time.Millisecond, Fresh: len(parts) == 4}
	switch parts[1] {
	case "always":
		k.Always = true
	case "effect":
		if actorstore.TimedExpiry(k.Key) == 0 {
			return EventKey{}, errors.New("event key: an effect key begins with its expiry")
		}
	default:
		return EventKey{}, fmt.Errorf("event key: bad mode %q", parts[1])
	}
	if err := CheckIdempotencyKey(k.Key); err != nil {
		return EventKey{}, fmt.Errorf("event key: %w", err)
	}
	return k, nil
}

type eventKeyKey struct{}

// WithEventKey returns ctx carrying k: the event dispatched with it runs at
// most once per key (see the top of this file).
func WithEventKey(ctx context.Context, k EventKey) context.Context {
	return context.WithValue(ctx, eventKeyKey{}, k)
}

// EventKeyOf returns the key ctx carries, if any (an empty key is none:
// WithEventKey(ctx, EventKey{}) takes a key away).
func EventKeyOf(ctx context.Context) (EventKey, bool) {
	k, ok := ctx.Value(eventKeyKey{}).(EventKey)
	return k, ok && k.Key != ""
}

// callKey is the key of the n-th call (from 0) of an event with key k (nil:
// an event without one) to the actor to.
func callKey(k *EventKey, from, to string, n int) EventKey {
	if k == nil {
		return NewNodeKey()
	}
	h := sha256.New()
	for _, s := range []string{"call", strconv.FormatBool(k.Node), k.Key, from, to, strconv.Itoa(n)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return EventKey{Key: hex.EncodeToString(h.Sum(nil)[:16]), Node: true, Keep: k.Keep, Always: k.Always}
}

// name is the key as the actor keeps it: the client's and the nodes' apart,
// and the timed ones in the order they end.
func (k EventKey) name() string {
	switch {
	case k.timed():
		return "t/" + k.Key
	case k.Node:
		return "n/" + k.Key
	}
	return "c/" + k.Key
}

// fingerprint is what an event key's entry knows of its request, to tell
// the same request from another with the same key: method, path, query
// and body.
func fingerprint(req *actors.Request) [sha256.Size]byte {
	h := sha256.New()
	q := ""
	if req.Query != nil {
		q = req.Query.Encode()
	}
	for _, s := range []string{req.Method, req.Path, q} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(req.Body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// ledger is k as the ledger keeps it.
func (k EventKey) ledger() actorstore.LedgerKey {
	return actorstore.LedgerKey{Name: k.name(), Timed: k.timed(), Fresh: k.Fresh, Keep: k.Keep}
}
