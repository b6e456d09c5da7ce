package buckettest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Holder is an optional interface of the bucket open returns. A store that
// can hold writes in flight on demand (a test wrapper that takes the
// directory store's lock, say, or a proxy in front of an S3 server) lets Run
// check that a deadline expiring while a write is held yields
// ErrUnknownOutcome, never a refusal.
type Holder interface {
	// HoldWrites makes every Put and Delete that starts after it returns
	// wait, honouring its context, until release is called. release must be
	// called exactly once.
	HoldWrites(t *testing.T) (release func())
}

// Traits declares where a store under test departs, within what wasmkeep
// relies on, from the strictest behaviour the suite knows. The zero value is
// that strictest store: the directory and in-memory stores declare no traits.
//
// Traits never skip anything. Every subtest runs on every store; the traits
// choose what it asserts, and a store must behave exactly as it declares:
// one that declares ContentETags but hands out a new ETag for identical
// bytes fails, as does one that declares nothing and repeats an ETag.
type Traits struct {
	// ContentETags: the store derives an ETag from the bytes alone, as S3
	// does, so identical bytes get equal ETags, under one key or several and
	// across a delete, and a writer holding the ETag of bytes that come round
	// again matches them. Without it, every landed write must yield an ETag
	// no earlier write returned. Either way a stale ETag is refused once the
	// object holds other bytes, and distinct bytes get distinct ETags.
	ContentETags bool
	// IfMatchDeleteMissingLands: an If-Match delete of a key that holds
	// nothing lands instead of being refused (versitygw answers 204 where S3
	// answers 404). Either way nothing is there afterwards and the outcome
	// is definite.
	IfMatchDeleteMissingLands bool
	// PathKeys: the store keeps keys as file paths cut at '/', so no key may
	// be the directory of another ("a" beside "a/b"), and no segment may be
	// empty, "." or "..", or over 255 bytes (a file name's limit). The
	// delete, listing and key subtests then write only keys that keep these
	// rules (still byte-prefix neighbours such as "a/b", "a/bc" and "a-b",
	// slashes, spaces, unicode and long keys); without PathKeys they also
	// write keys that break them.
	PathKeys bool
}

// maxSegmentLen is the longest segment of a key, in bytes, that the suite
// writes to a store with PathKeys: the longest file name most file systems
// allow.
const maxSegmentLen = 255

type subtest struct {
	name string
	fn   func(t *testing.T, b ownership.Bucket, tr Traits)
}

var subtests = []subtest{
	{"GetMissing", testGetMissing},
	{"ReadAfterWrite", testReadAfterWrite},
	{"EmptyBody", testEmptyBody},
	{"NoAliasing", testNoAliasing},
	{"UnconditionalPut", testUnconditionalPut},
	{"CreateOnly", testCreateOnly},
	{"CreateOnlyRace", testCreateOnlyRace},
	{"IfMatch", testIfMatch},
	{"IfMatchRace", testIfMatchRace},
	{"IdenticalBytes", testIdenticalBytes},
	{"Delete", testDelete},
	{"ListPrefix", testListPrefix},
	{"ListPaging", testListPaging},
	{"LargeObject", testLargeObject},
	{"Ranges", testRanges},
	{"RangeOfLargeObject", testRangeOfLargeObject},
	{"RangeReadRace", testRangeReadRace},
	{"Keys", testKeys},
	{"InvalidKeys", testInvalidKeys},
	{"ContextDone", testContextDone},
	{"DeadlineMidCall", testDeadlineMidCall},
}

// Run runs the contract suite against the store open returns, holding it to
// the behaviour its traits declare. Each subtest calls open once for a
// fresh, empty bucket; open should register its own cleanup with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) ownership.Bucket, traits Traits) {
	t.Helper()
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			st.fn(t, open(t), traits)
		})
	}
}

// pathKeyProblem says why key breaks the PathKeys rules on its own, or
// returns "".
func pathKeyProblem(key string) string {
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return "empty segment"
		case seg == "." || seg == "..":
			return "segment " + seg
		case len(seg) > maxSegmentLen:
			return fmt.Sprintf("segment of %d bytes", len(seg))
		}
	}
	return ""
}

// checkPathKeys fails the test, as a bug in the suite, unless keys keep the
// PathKeys rules together: each key alone, and no key the directory of
// another.
func checkPathKeys(t *testing.T, keys []string) {
	t.Helper()
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	for _, k := range keys {
		if why := pathKeyProblem(k); why != "" {
			t.Fatalf("test bug: key %q written to a PathKeys store: %s", abbrevKey(k), why)
		}
		for i := range len(k) {
			if k[i] == '/' && set[k[:i]] {
				t.Fatalf("test bug: key %q written to a PathKeys store is the directory of %q", k[:i], abbrevKey(k))
			}
		}
	}
}

// keysFor returns the keys a subtest writes: always, which keep the PathKeys
// rules, and, unless the store declares PathKeys, extra, which break them.
func keysFor(t *testing.T, tr Traits, always, extra []string) []string {
	t.Helper()
	checkPathKeys(t, always)
	if tr.PathKeys {
		return slices.Clone(always)
	}
	return append(slices.Clone(always), extra...)
}

// onlyPresent returns the keys of want that are in keys, in want's order.
func onlyPresent(want, keys []string) []string {
	var out []string
	for _, k := range want {
		if slices.Contains(keys, k) {
			out = append(out, k)
		}
	}
	return out
}

// wantOutcome fails the test unless err classifies as want.
func wantOutcome(t *testing.T, what string, err error, want ownership.Outcome) {
	t.Helper()
	if got := ownership.OutcomeOf(err); got != want {
		t.Errorf("%s: outcome %v (err %v), want %v", what, got, err, want)
	}
}

func put(t *testing.T, b ownership.Bucket, key string, body []byte, cond ownership.Condition) ownership.ETag {
	t.Helper()
	etag, err := b.Put(t.Context(), key, body, cond)
	if err != nil {
		t.Fatalf("put %q (%s): %v", key, cond, err)
	}
	if etag == "" {
		t.Fatalf("put %q (%s): landed with an empty ETag", key, cond)
	}
	return etag
}

func get(t *testing.T, b ownership.Bucket, key string) ownership.Object {
	t.Helper()
	obj, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return obj
}

// wantObject fails the test unless key holds exactly body under etag.
func wantObject(t *testing.T, b ownership.Bucket, key string, body []byte, etag ownership.ETag) {
	t.Helper()
	obj := get(t, b, key)
	if !bytes.Equal(obj.Body, body) {
		t.Errorf("get %q: body %s, want %s", key, abbrev(obj.Body), abbrev(body))
	}
	if obj.ETag != etag {
		t.Errorf("get %q: ETag %q, want %q", key, obj.ETag, etag)
	}
}

// wantAbsent fails the test unless Get and List both say key holds nothing.
func wantAbsent(t *testing.T, b ownership.Bucket, key string) {
	t.Helper()
	obj, err := b.Get(t.Context(), key)
	if !errors.Is(err, ownership.ErrNotFound) {
		t.Errorf("get %q: (%s, %v), want ErrNotFound", key, abbrev(obj.Body), err)
	}
	page, err := b.List(t.Context(), key, "", 1)
	if err != nil {
		t.Fatalf("list prefix %q: %v", key, err)
	}
	if len(page.Entries) > 0 && page.Entries[0].Key == key {
		t.Errorf("list prefix %q: still lists the deleted key", key)
	}
}

func abbrev(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:64], len(b))
}

// race runs fn(0) … fn(n-1) in n goroutines released together, so that
// their requests overlap as much as the store lets them, and returns what
// each returned.
func race(n int, fn func(i int) (ownership.ETag, error)) ([]ownership.ETag, []error) {
	etags := make([]ownership.ETag, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			etags[i], errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return etags, errs
}

// oneWinner checks that exactly one racer landed and every other one was
// refused (not unknown, not failed), and returns the winner.
func oneWinner(t *testing.T, what string, etags []ownership.ETag, errs []error) int {
	t.Helper()
	winner := -1
	counts := map[ownership.Outcome]int{}
	for i, err := range errs {
		o := ownership.OutcomeOf(err)
		counts[o]++
		switch o {
		case ownership.Landed:
			winner = i
			if etags[i] == "" {
				t.Errorf("%s: writer %d landed with an empty ETag", what, i)
			}
		case ownership.Refused:
			if !errors.Is(err, ownership.ErrPrecondition) {
				t.Errorf("%s: writer %d refused without ErrPrecondition: %v", what, i, err)
			}
		default:
			t.Errorf("%s: writer %d: %v (%v)", what, i, o, err)
		}
	}
	if counts[ownership.Landed] != 1 || counts[ownership.Refused] != len(errs)-1 {
		t.Fatalf("%s: %d landed, %d refused, %d unknown, %d failed; want 1 landed, %d refused",
			what, counts[ownership.Landed], counts[ownership.Refused], counts[ownership.Unknown],
			counts[ownership.Failed], len(errs)-1)
	}
	return winner
}
