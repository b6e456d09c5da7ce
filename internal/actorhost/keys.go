package actorhost

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
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

// MaxKeptAnswer bounds the body of a remembered answer: a larger one is
// remembered without its body (its replay says so in KeptHeader).
const MaxKeptAnswer = 1 << 20

// KeptHeader, "no-body", marks a replayed answer whose body was too large
// to keep (over MaxKeptAnswer).
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

// timedExpiry is the expiry (Unix milliseconds) a timed key begins with; 0
// for a key that begins with none.
func timedExpiry(key string) int64 {
	if len(key) < 12 {
		return 0
	}
	exp, err := strconv.ParseUint(key[:12], 16, 64)
	if err != nil {
		return 0
	}
	return int64(exp)
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
		if timedExpiry(k.Key) == 0 {
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

// The ledger: where an actor keeps its keys, under the node's prefix.
//
//	\x00k/e/<name>           the entry: encodeEntry
//	\x00k/e/<name>\x00<i>    the i-th further part of its answer's body
//	\x00k/x/<expiry>/<name>  its place in the order of expiry (16 hex
//	                         digits of Unix milliseconds); the value is
//	                         the count of its body's further parts
//	\x00k#                   how many keys the actor keeps (uvarint),
//	                         then the least expiry key that may be live
//	                         (ledgerStat)
//	\x00k/e/t/<expiry><rand> a timed key: the mark that its event took
//	                         effect (one byte; no answer, no place in the
//	                         order of expiry, no count: its name begins
//	                         with its expiry, and only the window bounds
//	                         them)
//	\x00k/t                  the least timed entry's key that may be
//	                         live (expireTimed)
const (
	ledgerPrefix = actors.NodePrefix + "k"
	entryPrefix  = ledgerPrefix + "/e/"
	expiryPrefix = ledgerPrefix + "/x/"
	countKey     = ledgerPrefix + "#"
	timedPrefix  = entryPrefix + "t/"
	timedLowKey  = ledgerPrefix + "/t"
)

// partSize is the body bytes one ledger value holds, under MaxValueLen
// with room for the entry's own fields.
const partSize = actors.MaxValueLen - 16<<10

// expireAtOnce bounds the keys one record ends (expired, or past MaxKeys).
const expireAtOnce = 16

func entryKey(name string) string       { return entryPrefix + name }
func partKey(name string, i int) string { return entryPrefix + name + "\x00" + strconv.Itoa(i) }
func expiryKey(exp int64, name string) string {
	return fmt.Sprintf("%s%016x/%s", expiryPrefix, uint64(exp), name)
}

// ledgerEntry is what an actor keeps of a key.
type ledgerEntry struct {
	// partial: the event took effect in part (its writes before a call
	// were committed for it), and did not end: no answer is kept.
	partial bool
	expires int64 // Unix milliseconds
	sum     [sha256.Size]byte
	status  int
	header  http.Header
	body    []byte
	noBody  bool // the body was over MaxKeptAnswer
	parts   int  // further parts of body
	// mark: a timed key's: its event took effect; nothing else is kept.
	mark bool
}

const entryVersion = 1

func (e *ledgerEntry) encode() []byte {
	b := []byte{entryVersion, 0}
	if e.partial {
		b[1] |= 1
	}
	if e.noBody {
		b[1] |= 2
	}
	b = binary.AppendUvarint(b, uint64(e.expires))
	b = append(b, e.sum[:]...)
	b = binary.AppendUvarint(b, uint64(e.status))
	b = binary.AppendUvarint(b, uint64(e.parts))
	b = binary.AppendUvarint(b, uint64(len(e.header)))
	for name, vs := range e.header {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, e.body...)
}

// errLedger marks an entry that cannot be decoded.
var errLedger = errors.New("unreadable event key entry")

func decodeEntry(b []byte) (ledgerEntry, error) {
	var e ledgerEntry
	if len(b) < 2 || b[0] != entryVersion {
		return e, errLedger
	}
	e.partial, e.noBody = b[1]&1 != 0, b[1]&2 != 0
	d := decoder{p: b[2:]}
	e.expires = int64(d.uvarint())
	if d.err != nil || len(d.p) < sha256.Size {
		return e, errLedger
	}
	copy(e.sum[:], d.p)
	d.p = d.p[sha256.Size:]
	e.status, e.parts = int(d.uvarint()), int(d.uvarint())
	if n := d.count(); n > 0 {
		e.header = make(http.Header, n)
		for range n {
			name := string(d.field())
			vs := make([]string, d.count())
			for i := range vs {
				vs[i] = string(d.field())
			}
			e.header[name] = vs
		}
	}
	if d.err != nil {
		return e, fmt.Errorf("%w: %v", errLedger, d.err)
	}
	e.body = append([]byte(nil), d.p...)
	return e, nil
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

// ledgerLookup reads what the actor keeps of k, if anything. An entry that
// cannot be decoded is damage to the actor's storage.
func (t *txn) ledgerLookup(k EventKey) (ledgerEntry, bool, error) {
	name := k.name()
	v, ok := t.nodeGet(entryKey(name))
	if !ok {
		return ledgerEntry{}, false, nil
	}
	if k.timed() {
		return ledgerEntry{mark: true}, true, nil
	}
	e, err := decodeEntry(v)
	if err != nil {
		return e, false, fmt.Errorf("event key %q: %w", name, err)
	}
	for i := range e.parts {
		p, ok := t.nodeGet(partKey(name, i+1))
		if !ok {
			return e, false, fmt.Errorf("event key %q: part %d of its answer is missing: %w", name, i+1, errLedger)
		}
		e.body = append(e.body, p...)
	}
	return e, true, nil
}

// ledgerRecord keeps e under k in the event's writes, replacing what was
// kept (a partial entry), and ends up to expireAtOnce keys whose time is
// over, or the oldest past maxKeys. absent: the caller knows nothing is
// kept under k (it looked, and wrote nothing since), so no read is needed
// to find out. It fails with ErrLimit when the actor's state would be too
// large.
func (t *txn) ledgerRecord(k EventKey, e *ledgerEntry, now time.Time, maxKeys int, absent bool) error {
	name := k.name()
	if k.timed() {
		if k.Fresh || absent {
			// Never sent before: nothing is kept under it, and no read of
			// the runs is needed to find what its write replaces.
			return t.nodePutNew(entryKey(name), timedMark)
		}
		return t.nodePut(entryKey(name), timedMark)
	}
	var old ledgerEntry
	had := false
	if !absent {
		var err error
		if old, had, err = t.ledgerLookup(k); err != nil {
			return err
		}
	}
	put := t.nodePut
	if !had {
		// The entry, its parts and its place in the order of expiry are
		// new keys: their writes replace nothing, which needs no read.
		put = t.nodePutNew
	}
	st := t.ledgerStat()
	if had {
		e.expires = old.expires // its place in the expiry order stays
	} else {
		e.expires = now.Add(k.Keep).UnixMilli()
		st.count++
	}
	body := e.body
	if len(body) > MaxKeptAnswer {
		body, e.noBody = nil, true
	}
	first := min(len(body), partSize)
	e.body, e.parts = body[:first], (len(body)-first+partSize-1)/partSize
	if err := put(entryKey(name), e.encode()); err != nil {
		return err
	}
	for i := range e.parts {
		part := body[first+i*partSize : min(len(body), first+(i+1)*partSize)]
		if err := put(partKey(name, i+1), part); err != nil {
			return err
		}
	}
	for i := e.parts; i < old.parts; i++ {
		t.nodeDelete(partKey(name, i+1))
	}
	xk := expiryKey(e.expires, name)
	if err := put(xk, binary.AppendUvarint(nil, uint64(e.parts))); err != nil {
		return err
	}
	if st.low == "" || xk < st.low {
		st.low = xk
	}
	return t.expireKeys(now, st, maxKeys, name)
}

// timedMark is what a timed key keeps: that its event took effect. Its
// answer is not kept: a node sends its own key again only after a failure,
// which is rare, while keeping every answer would grow every forwarded
// write several times over; the node then answers "outcome unknown", as it
// would have without the key. A client that wants the answer itself sends
// an Idempotency-Key.
var timedMark = []byte{1}

// expireTimed ends up to expireAtOnce timed keys whose time is over at
// now, listing from the least that may be live (timedLowKey) so that what
// earlier passes deleted is not stepped over again.
func (t *txn) expireTimed(now time.Time) error {
	ms := now.UnixMilli()
	low := timedPrefix
	if v, ok := t.nodeGet(timedLowKey); ok {
		low = string(v)
	}
	xs := t.nodeList(actors.ListOptions{Prefix: timedPrefix, Start: low, Limit: expireAtOnce})
	next := ""
	for _, x := range xs {
		if timedExpiry(strings.TrimPrefix(x.Key, timedPrefix)) > ms {
			next = x.Key
			break
		}
		t.nodeDelete(x.Key)
		next = x.Key + "\x00"
	}
	if next == "" || next == low {
		return nil
	}
	return t.nodePut(timedLowKey, []byte(next))
}

// ledgerStat is what the ledger keeps of itself: how many keys it keeps,
// and the least key of the expiry order that may still be live (every
// live one is at or after it). The keys before it are deleted, but their
// deletes may still lie in the actor's runs (until a merge reaches the
// oldest run): a listing of the order from its start would step over
// every key ever ended, so expireKeys lists from low.
type ledgerStat struct {
	count int
	low   string
}

// ledgerStat reads the ledger's own entry.
func (t *txn) ledgerStat() ledgerStat {
	v, ok := t.nodeGet(countKey)
	if !ok {
		return ledgerStat{}
	}
	n, w := binary.Uvarint(v)
	if w <= 0 {
		return ledgerStat{}
	}
	return ledgerStat{count: int(n), low: string(v[w:])}
}

// keyCount is how many keys the actor keeps.
func (t *txn) keyCount() int { return t.ledgerStat().count }

// expireOf is the expiry (Unix milliseconds) an expiry key names; 0 for
// one that names none.
func expireOf(key string) int64 {
	rest := strings.TrimPrefix(key, expiryPrefix)
	exp, err := strconv.ParseUint(rest[:min(16, len(rest))], 16, 64)
	if err != nil {
		return 0
	}
	return int64(exp)
}

// expireKeys ends the keys whose time is over at now, and the oldest while
// more than maxKeys are kept (but the key just kept, keep), up to
// expireAtOnce of them, and writes the ledger's entry (st, as it was
// before). Nothing is listed while none can be due: fewer than maxKeys
// kept, and the least live expiry later than now.
func (t *txn) expireKeys(now time.Time, st ledgerStat, maxKeys int, keep string) error {
	ms := now.UnixMilli()
	if st.count > maxKeys || st.low != "" && expireOf(st.low) <= ms {
		start := st.low
		if start == "" {
			start = expiryPrefix
		}
		xs := t.nodeList(actors.ListOptions{Prefix: expiryPrefix, Start: start, Limit: expireAtOnce})
		// low becomes the first key kept, or what follows the last ended.
		st.low = ""
		for i, x := range xs {
			name := x.Key[min(len(expiryPrefix)+17, len(x.Key)):]
			if name == keep {
				if st.low == "" {
					st.low = x.Key
				}
				continue
			}
			if expireOf(x.Key) > ms && st.count <= maxKeys {
				if st.low == "" {
					st.low = x.Key
				}
				break
			}
			parts, _ := binary.Uvarint(x.Value)
			t.nodeDelete(x.Key)
			t.nodeDelete(entryKey(name))
			for i := range int(parts) {
				t.nodeDelete(partKey(name, i+1))
			}
			st.count--
			if i == len(xs)-1 && st.low == "" {
				st.low = x.Key + "\x00"
			}
		}
	}
	v := binary.AppendUvarint(nil, uint64(max(st.count, 0)))
	return t.nodePut(countKey, append(v, st.low...))
}

// ledgerEntries lists everything the ledger keeps, values not copied
// (DeleteAll keeps them).
func (t *txn) ledgerEntries() []actors.Entry {
	return t.nodeList(actors.ListOptions{Prefix: ledgerPrefix})
}
