package actorstore

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
)

// MaxKeptAnswer bounds the body of a remembered answer: a larger one is
// remembered without its body (its replay says so in KeptHeader).
const MaxKeptAnswer = 1 << 20

// TimedExpiry is the expiry (Unix milliseconds) a timed key begins with; 0
// for a key that begins with none.
func TimedExpiry(key string) int64 {
	if len(key) < 12 {
		return 0
	}
	exp, err := strconv.ParseUint(key[:12], 16, 64)
	if err != nil {
		return 0
	}
	return int64(exp)
}

// LedgerKey is an event key as the ledger keeps it.
type LedgerKey struct {
	Name  string        // its name in the ledger: a client's and a node's apart, timed ones in the order they end
	Timed bool          // a node's key kept only if its event took effect, named by its expiry
	Fresh bool          // its sender has not sent it before
	Keep  time.Duration // how long it is kept
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

// LedgerEntry is what an actor keeps of a key.
type LedgerEntry struct {
	// partial: the event took effect in part (its writes before a call
	// were committed for it), and did not end: no answer is kept.
	Partial bool
	expires int64 // Unix milliseconds
	Sum     [sha256.Size]byte
	Status  int
	Header  http.Header
	Body    []byte
	NoBody  bool // the body was over MaxKeptAnswer
	parts   int  // further parts of body
	// mark: a timed key's: its event took effect; nothing else is kept.
	Mark bool
}

const entryVersion = 1

func (e *LedgerEntry) encode() []byte {
	b := []byte{entryVersion, 0}
	if e.Partial {
		b[1] |= 1
	}
	if e.NoBody {
		b[1] |= 2
	}
	b = binary.AppendUvarint(b, uint64(e.expires))
	b = append(b, e.Sum[:]...)
	b = binary.AppendUvarint(b, uint64(e.Status))
	b = binary.AppendUvarint(b, uint64(e.parts))
	b = binary.AppendUvarint(b, uint64(len(e.Header)))
	for name, vs := range e.Header {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, e.Body...)
}

// errLedger marks an entry that cannot be decoded.
var errLedger = errors.New("unreadable event key entry")

func decodeEntry(b []byte) (LedgerEntry, error) {
	var e LedgerEntry
	if len(b) < 2 || b[0] != entryVersion {
		return e, errLedger
	}
	e.Partial, e.NoBody = b[1]&1 != 0, b[1]&2 != 0
	d := decoder{p: b[2:]}
	e.expires = int64(d.uvarint())
	if d.err != nil || len(d.p) < sha256.Size {
		return e, errLedger
	}
	copy(e.Sum[:], d.p)
	d.p = d.p[sha256.Size:]
	e.Status, e.parts = int(d.uvarint()), int(d.uvarint())
	if n := d.count(); n > 0 {
		e.Header = make(http.Header, n)
		for range n {
			name := string(d.field())
			vs := make([]string, d.count())
			for i := range vs {
				vs[i] = string(d.field())
			}
			e.Header[name] = vs
		}
	}
	if d.err != nil {
		return e, fmt.Errorf("%w: %v", errLedger, d.err)
	}
	e.Body = append([]byte(nil), d.p...)
	return e, nil
}

// LedgerLookup reads what the actor keeps of k, if anything. An entry that
// cannot be decoded is damage to the actor's storage.
func (t *Txn) LedgerLookup(k LedgerKey) (LedgerEntry, bool, error) {
	name := k.Name
	v, ok := t.nodeGet(entryKey(name))
	if !ok {
		return LedgerEntry{}, false, nil
	}
	if k.Timed {
		return LedgerEntry{Mark: true}, true, nil
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
		e.Body = append(e.Body, p...)
	}
	return e, true, nil
}

// LedgerRecord keeps e under k in the event's writes, replacing what was
// kept (a partial entry), and ends up to expireAtOnce keys whose time is
// over, or the oldest past maxKeys. absent: the caller knows nothing is
// kept under k (it looked, and wrote nothing since), so no read is needed
// to find out. It fails with ErrLimit when the actor's state would be too
// large.
func (t *Txn) LedgerRecord(k LedgerKey, e *LedgerEntry, now time.Time, maxKeys int, absent bool) error {
	name := k.Name
	if k.Timed {
		if k.Fresh || absent {
			// Never sent before: nothing is kept under it, and no read of
			// the runs is needed to find what its write replaces.
			return t.nodePutNew(entryKey(name), timedMark)
		}
		return t.nodePut(entryKey(name), timedMark)
	}
	var old LedgerEntry
	had := false
	if !absent {
		var err error
		if old, had, err = t.LedgerLookup(k); err != nil {
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
	body := e.Body
	if len(body) > MaxKeptAnswer {
		body, e.NoBody = nil, true
	}
	first := min(len(body), partSize)
	e.Body, e.parts = body[:first], (len(body)-first+partSize-1)/partSize
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

// ExpireTimed ends up to expireAtOnce timed keys whose time is over at
// now, listing from the least that may be live (timedLowKey) so that what
// earlier passes deleted is not stepped over again.
func (t *Txn) ExpireTimed(now time.Time) error {
	ms := now.UnixMilli()
	low := timedPrefix
	if v, ok := t.nodeGet(timedLowKey); ok {
		low = string(v)
	}
	xs := t.nodeList(actors.ListOptions{Prefix: timedPrefix, Start: low, Limit: expireAtOnce})
	next := ""
	for _, x := range xs {
		if TimedExpiry(strings.TrimPrefix(x.Key, timedPrefix)) > ms {
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
func (t *Txn) ledgerStat() ledgerStat {
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
func (t *Txn) keyCount() int { return t.ledgerStat().count }

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
func (t *Txn) expireKeys(now time.Time, st ledgerStat, maxKeys int, keep string) error {
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
func (t *Txn) ledgerEntries() []actors.Entry {
	return t.nodeList(actors.ListOptions{Prefix: ledgerPrefix})
}
