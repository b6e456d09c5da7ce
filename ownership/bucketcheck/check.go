// Package bucketcheck is the conditional-write check: before a cluster
// trusts a bucket, it writes a few probe objects and verifies that the
// store honours the conditions the ownership protocol is built on. A
// server that ignores If-None-Match or If-Match lets two nodes own one
// actor; nothing else wasmkeep does can make up for that, so the check is
// meant to be run against every new server (`wasmkeep bucket check`), and
// every node runs it at start.
//
// The check is plain logic over ownership.Bucket: it does no I/O of its
// own (tests/deps holds it to that), and the caller supplies the nonce, so
// that a test can replay it exactly.
package bucketcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// ProbeStatus is the verdict on one probe.
type ProbeStatus uint8

const (
	// ProbePassed: the store behaved as wasmkeep requires.
	ProbePassed ProbeStatus = iota
	// ProbeWarning: the store lacks something wasmkeep can do without; the
	// report says what that costs.
	ProbeWarning
	// ProbeFailed: the store lacks something the protocol depends on.
	ProbeFailed
	// ProbeSkipped: not run, because the store stopped answering first.
	ProbeSkipped
)

func (s ProbeStatus) String() string {
	switch s {
	case ProbePassed:
		return "pass"
	case ProbeWarning:
		return "warn"
	case ProbeFailed:
		return "FAIL"
	case ProbeSkipped:
		return "skip"
	}
	return fmt.Sprintf("probe-status(%d)", uint8(s))
}

// Probe is one step of the check.
type Probe struct {
	// Name identifies the probe, e.g. "create-only-refused".
	Name string
	// Feature names what the probe exercises, as Missing and Warnings
	// report it, e.g. "create-only put (If-None-Match: *)".
	Feature string
	// Want is what a sound store does.
	Want string
	// Seen is what this store did.
	Seen   string
	Status ProbeStatus
}

// Report is the outcome of Run.
type Report struct {
	// Prefix is where the probe objects were written; cleanup removes them.
	Prefix string
	// Probes in the order they ran.
	Probes []Probe
	// Err is set when the store gave no usable answer (an error that is not
	// a refusal: denied, unreachable, timed out) and the check stopped; the
	// probes after it are skipped.
	Err error
}

// Sound reports whether the store honours every condition wasmkeep depends
// on: every probe ran, and none failed. Warnings do not make a store unsound.
func (r Report) Sound() bool {
	if r.Err != nil {
		return false
	}
	for _, p := range r.Probes {
		if p.Status == ProbeFailed || p.Status == ProbeSkipped {
			return false
		}
	}
	return len(r.Probes) > 0
}

// Unanswered says whether the check stopped because the store gave no
// usable answer (Err): a configuration or access problem (a bucket name the
// store rejects, a bucket that does not exist, bad credentials, an endpoint
// that does not answer), not a verdict on the store's conditions.
func (r Report) Unanswered() bool { return r.Err != nil }

// Missing names, once each and in probe order, the features whose probes
// failed: what the store lacks that wasmkeep needs.
func (r Report) Missing() []string { return r.features(ProbeFailed) }

// Warnings names the features whose probes gave a warning: what the store
// lacks that wasmkeep can do without.
func (r Report) Warnings() []string { return r.features(ProbeWarning) }

func (r Report) features(s ProbeStatus) []string {
	var out []string
	for _, p := range r.Probes {
		if p.Status != s || containsString(out, p.Feature) {
			continue
		}
		out = append(out, p.Feature)
	}
	return out
}

// String renders the report for a person: one line per probe, then the
// verdict.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "conditional-write check under %q\n", r.Prefix)
	for _, p := range r.Probes {
		fmt.Fprintf(&b, "  %-4s %-26s want: %s\n", p.Status, p.Name, p.Want)
		if p.Seen != "" {
			fmt.Fprintf(&b, "       %-26s seen: %s\n", "", p.Seen)
		}
	}
	if r.Err != nil {
		fmt.Fprintf(&b, "stopped: %v\n", r.Err)
	}
	if w := r.Warnings(); len(w) > 0 {
		fmt.Fprintf(&b, "warnings: %s\n", strings.Join(w, "; "))
	}
	switch {
	case r.Sound():
		b.WriteString("verdict: sound: the bucket honours the conditional writes wasmkeep depends on\n")
	case r.Err != nil:
		b.WriteString("verdict: NOT CHECKED: the bucket did not answer, so nothing is known of its conditional writes;\n" +
			"  check the bucket's name, that it exists, the endpoint and the credentials\n")
	case len(r.Missing()) == 0:
		// Only before any probe ran (an empty nonce, a bad prefix).
		b.WriteString("verdict: NOT SOUND: the check could not run\n")
	default:
		fmt.Fprintf(&b, "verdict: NOT SOUND: missing %s; wasmkeep must not run on this bucket\n",
			strings.Join(r.Missing(), "; "))
	}
	return b.String()
}

// Features the probes exercise, as reports name them.
const (
	featureCreateOnly = "create-only put (If-None-Match: *)"
	featureIfMatch    = "replace-only put (If-Match)"
	featureReadBack   = "reads return the written bytes and ETag"
	featureFreshETag  = "a new ETag for every write"
	featureCondDelete = "conditional delete (If-Match)"
	featureCleanup    = "removal of the probe objects"
	featureAnswers    = "a bucket that answers every probe"
)

// Run writes probe objects under probePrefix+nonce+"/" and
// reports whether b honours the conditional writes wasmkeep depends on:
//
//   - a create-only put of a new key lands, and a read returns it;
//   - a create-only put of an existing key is refused;
//   - If-Match with the current ETag lands and yields a new ETag;
//   - If-Match with a stale ETag is refused;
//   - If-Match on a missing key is refused;
//   - rewriting identical bytes yields a new ETag (a warning if not: S3
//     derives ETags from content, and wasmkeep survives it because every
//     record carries a nonce, so no two of its writes have equal bytes);
//   - a conditional delete with a stale ETag is refused (a warning if not:
//     wasmkeep releases with conditional puts and never relies on it).
//
// It then deletes its probe objects. nonce must make the probe prefix unique
// to this run (two checks sharing one would race each other); probePrefix
// may be empty. Run may be called from any goroutine; it makes
// its calls on b one at a time, from that goroutine, all under ctx. It never
// panics on a misbehaving store: everything it sees goes into the report.
func Run(ctx context.Context, b ownership.Bucket, probePrefix string, nonce string) Report {
	c := &checker{ctx: ctx, b: b, nonce: nonce}
	c.report.Prefix = probePrefix + nonce + "/"
	c.object = c.report.Prefix + "object"
	c.absent = c.report.Prefix + "never-written"
	if nonce == "" {
		c.report.Err = errors.New("check: empty nonce: probes could collide with another run")
		return c.report
	}
	if err := ownership.ValidateKey(c.absent); err != nil {
		c.report.Err = fmt.Errorf("check: probe prefix: %w", err)
		return c.report
	}
	c.run()
	c.cleanup()
	return c.report
}

// checker holds the state of one run; the probes run in order and each
// relies on the ETags the earlier ones saw.
type checker struct {
	ctx    context.Context
	b      ownership.Bucket
	nonce  string
	report Report

	object string // the key most probes write
	absent string // a key nothing writes, unless the store ignores If-Match
	// current is the ETag the object holds as far as the check knows;
	// stale is one it held before.
	current, stale ownership.ETag
	// stopped is set once the store gave an answer that is not a verdict;
	// later probes are skipped.
	stopped bool
}

// body returns distinct bytes for step, so only the deliberate rewrite of
// identical bytes can repeat content.
func (c *checker) body(step string) []byte {
	return []byte(fmt.Sprintf("wasmkeep bucket check %s: %s\n", c.nonce, step))
}

func (c *checker) add(p Probe) { c.report.Probes = append(c.report.Probes, p) }

// stop records a probe whose call ended in an error that says nothing about
// conditions (denied, unreachable, timed out) and skips the rest. What is
// missing then is a bucket that answers, not the probe's feature: the check
// could not tell whether the store has it.
func (c *checker) stop(p Probe, what string, err error) {
	p.Status = ProbeFailed
	p.Feature = featureAnswers
	p.Seen = fmt.Sprintf("%s: %s: %v", what, ownership.OutcomeOf(err), err)
	c.add(p)
	c.report.Err = fmt.Errorf("check: %s: %w", what, err)
	c.stopped = true
}

// noVerdict reports whether err is an answer that says nothing about the
// condition asked for.
func noVerdict(err error) bool {
	o := ownership.OutcomeOf(err)
	return o == ownership.Unknown || o == ownership.Failed
}

type step struct {
	name, feature, want string
	run                 func(p Probe) // must call c.add or c.stop exactly once
}

func (c *checker) run() {
	steps := []step{
		{"create-only-new", featureCreateOnly, "a create-only put of a new key lands", c.createNew},
		{"read-back", featureReadBack, "a get returns the bytes and the ETag the put returned", c.readBack},
		{"create-only-existing", featureCreateOnly, "a create-only put of an existing key is refused", c.createExisting},
		{"if-match-current", featureIfMatch, "a put with If-Match of the current ETag lands with a new ETag", c.ifMatchCurrent},
		{"if-match-stale", featureIfMatch, "a put with If-Match of a stale ETag is refused", c.ifMatchStale},
		{"if-match-missing", featureIfMatch, "a put with If-Match on a missing key is refused", c.ifMatchMissing},
		{"same-bytes-new-etag", featureFreshETag, "rewriting identical bytes yields a new ETag", c.sameBytes},
		{"delete-if-match-stale", featureCondDelete, "a delete with If-Match of a stale ETag is refused and leaves the object", c.deleteStale},
	}
	for _, s := range steps {
		p := Probe{Name: s.name, Feature: s.feature, Want: s.want}
		if c.stopped {
			p.Status = ProbeSkipped
			c.add(p)
			continue
		}
		s.run(p)
	}
}

func (c *checker) createNew(p Probe) {
	etag, err := c.b.Put(c.ctx, c.object, c.body("create"), ownership.IfAbsent())
	switch {
	case err == nil && etag != "":
		c.current = etag
		p.Status, p.Seen = ProbePassed, "landed, ETag "+string(etag)
		c.add(p)
	case err == nil:
		c.stop(p, "create-only put", errors.New("landed without an ETag"))
	case ownership.OutcomeOf(err) == ownership.Refused:
		// The nonce makes the key new, so a refusal means the store
		// refuses what it should accept: without creates no actor can
		// ever be owned.
		p.Status, p.Seen = ProbeFailed, "refused a new key: "+err.Error()
		c.add(p)
		c.stopped = true
	default:
		c.stop(p, "create-only put", err)
	}
}

func (c *checker) readBack(p Probe) {
	obj, err := c.b.Get(c.ctx, c.object)
	want := c.body("create")
	switch {
	case err != nil:
		if ownership.OutcomeOf(err) == ownership.NotFound {
			p.Status, p.Seen = ProbeFailed, "the object just written is not found"
			c.add(p)
			return
		}
		c.stop(p, "get", err)
	case string(obj.Body) != string(want):
		p.Status, p.Seen = ProbeFailed, fmt.Sprintf("body %q, want %q", obj.Body, want)
		c.add(p)
	case obj.ETag != c.current:
		// If-Match with what a read returns must match what the put
		// returned, or a node that re-reads can never write again.
		p.Status, p.Seen = ProbeFailed, fmt.Sprintf("ETag %s, but the put returned %s", obj.ETag, c.current)
		c.add(p)
	default:
		p.Status, p.Seen = ProbePassed, "same bytes, ETag "+string(obj.ETag)
		c.add(p)
	}
}

func (c *checker) createExisting(p Probe) {
	etag, err := c.b.Put(c.ctx, c.object, c.body("create again"), ownership.IfAbsent())
	switch {
	case err == nil:
		c.stale, c.current = c.current, etag
		p.Status, p.Seen = ProbeFailed, "landed: the existing object was overwritten"
		c.add(p)
	case ownership.OutcomeOf(err) == ownership.Refused:
		p.Status, p.Seen = ProbePassed, "refused"
		c.add(p)
	case noVerdict(err):
		c.stop(p, "create-only put of an existing key", err)
	default:
		p.Status, p.Seen = ProbeFailed, fmt.Sprintf("%s: %v", ownership.OutcomeOf(err), err)
		c.add(p)
	}
}

func (c *checker) ifMatchCurrent(p Probe) {
	prev := c.current
	etag, err := c.b.Put(c.ctx, c.object, c.body("replace"), ownership.IfMatch(prev))
	switch {
	case err == nil && etag == prev:
		c.stale, c.current = prev, etag
		p.Status, p.Seen = ProbeFailed, "landed, but new bytes kept the old ETag "+string(etag)
		c.add(p)
	case err == nil:
		c.stale, c.current = prev, etag
		p.Status, p.Seen = ProbePassed, fmt.Sprintf("landed, ETag %s -> %s", prev, etag)
		c.add(p)
	case ownership.OutcomeOf(err) == ownership.Refused:
		// The object still holds prev; a store that refuses this cannot
		// renew a lease or hand over an actor.
		p.Status, p.Seen = ProbeFailed, "refused although the ETag is current: "+err.Error()
		c.add(p)
	case noVerdict(err):
		c.stop(p, "put with If-Match of the current ETag", err)
	default:
		p.Status, p.Seen = ProbeFailed, fmt.Sprintf("%s: %v", ownership.OutcomeOf(err), err)
		c.add(p)
	}
}

func (c *checker) ifMatchStale(p Probe) {
	stale := c.stale
	if stale == "" || stale == c.current {
		// The previous probe was refused, so there is no older version;
		// an ETag the object never had is as stale as any.
		stale = ownership.ETag(`"` + c.nonce + `-never"`)
	}
	etag, err := c.b.Put(c.ctx, c.object, c.body("stale replace"), ownership.IfMatch(stale))
	switch {
	case err == nil:
		c.stale, c.current = c.current, etag
		p.Status, p.Seen = ProbeFailed, "landed: If-Match is ignored, a stale writer overwrote the object"
		c.add(p)
	case ownership.OutcomeOf(err) == ownership.Refused:
		p.Status, p.Seen = ProbePassed, "refused"
		c.add(p)
	case noVerdict(err):
		c.stop(p, "put with If-Match of a stale ETag", err)
	default:
		p.Status, p.Seen = ProbeFailed, fmt.Sprintf("%s: %v", ownership.OutcomeOf(err), err)
		c.add(p)
	}
}

func (c *checker) ifMatchMissing(p Probe) {
	_, err := c.b.Put(c.ctx, c.absent, c.body("replace missing"), ownership.IfMatch(c.current))
	switch {
	case err == nil:
		p.Status, p.Seen = ProbeFailed, "landed: a deleted record could be resurrected by a stale writer"
		c.add(p)
	case ownership.OutcomeOf(err) == ownership.Refused:
		p.Status, p.Seen = ProbePassed, "refused"
		c.add(p)
	case noVerdict(err):
		c.stop(p, "put with If-Match on a missing key", err)
	default:
		p.Status, p.Seen = ProbeFailed, fmt.Sprintf("%s: %v", ownership.OutcomeOf(err), err)
		c.add(p)
	}
}

func (c *checker) sameBytes(p Probe) {
	// Rewrite exactly what the object holds now. Read it rather than trust
	// the check's own bookkeeping: on a store that ignores conditions the
	// earlier probes may have changed it in ways the check did not expect.
	obj, err := c.b.Get(c.ctx, c.object)
	if err != nil {
		c.stop(p, "get before rewriting identical bytes", err)
		return
	}
	etag, err := c.b.Put(c.ctx, c.object, obj.Body, ownership.IfMatch(obj.ETag))
	switch {
	case err == nil && etag == obj.ETag:
		c.current = etag
		p.Status = ProbeWarning
		p.Seen = "the same ETag " + string(etag) + " came back: a writer holding an old ETag of equal bytes " +
			"would match; survivable only because every wasmkeep record carries a nonce"
		c.add(p)
	case err == nil:
		c.stale, c.current = obj.ETag, etag
		p.Status, p.Seen = ProbePassed, fmt.Sprintf("ETag %s -> %s", obj.ETag, etag)
		c.add(p)
	case noVerdict(err):
		c.stop(p, "put of identical bytes with If-Match", err)
	default:
		p.Status, p.Seen = ProbeFailed, fmt.Sprintf("If-Match of the ETag just read: %s: %v", ownership.OutcomeOf(err), err)
		c.add(p)
	}
}

func (c *checker) deleteStale(p Probe) {
	stale := c.stale
	if stale == "" || stale == c.current {
		stale = ownership.ETag(`"` + c.nonce + `-never"`)
	}
	err := c.b.Delete(c.ctx, c.object, ownership.IfMatch(stale))
	// Whatever the delete says, look at what is left: the object should
	// still be there.
	_, getErr := c.b.Get(c.ctx, c.object)
	const cost = "; wasmkeep releases with conditional puts, so this only loses a safety net"
	switch {
	case getErr != nil && ownership.OutcomeOf(getErr) != ownership.NotFound:
		c.stop(p, "get after a conditional delete", getErr)
		return
	case ownership.OutcomeOf(err) == ownership.Refused && getErr == nil:
		p.Status, p.Seen = ProbePassed, "refused, the object is still there"
	case err == nil && ownership.OutcomeOf(getErr) == ownership.NotFound:
		p.Status, p.Seen = ProbeWarning, "landed: the condition was ignored and the object deleted"+cost
	case err == nil:
		p.Status, p.Seen = ProbeWarning, "reported landed, yet the object is still there"+cost
	case ownership.OutcomeOf(getErr) == ownership.NotFound:
		p.Status, p.Seen = ProbeWarning, fmt.Sprintf("%s (%v), yet the object is gone%s", ownership.OutcomeOf(err), err, cost)
	default:
		p.Status, p.Seen = ProbeWarning, fmt.Sprintf("not supported: %s: %v%s", ownership.OutcomeOf(err), err, cost)
	}
	c.add(p)
}

// cleanup deletes every probe object it can find, listing rather than
// trusting its own bookkeeping: a store that ignores conditions may hold
// objects the check did not mean to write. It always runs, also after a
// stop, and reports leftovers as a warning: they cost nothing but space.
func (c *checker) cleanup() {
	p := Probe{Name: "cleanup", Feature: featureCleanup, Want: "every probe object is deleted"}
	if c.ctx.Err() != nil {
		p.Status, p.Seen = ProbeWarning, fmt.Sprintf("not attempted: %v; delete the keys under %q by hand", c.ctx.Err(), c.report.Prefix)
		c.add(p)
		return
	}
	keys := []string{c.object, c.absent}
	if page, err := c.b.List(c.ctx, c.report.Prefix, "", 0); err == nil {
		for _, e := range page.Entries {
			if !containsString(keys, e.Key) {
				keys = append(keys, e.Key)
			}
		}
	}
	var problems []string
	answered := false // the bucket answered one of the cleanup's calls
	for _, k := range keys {
		err := c.b.Delete(c.ctx, k, ownership.Always())
		answered = answered || err == nil || !noVerdict(err)
		if err != nil {
			problems = append(problems, fmt.Sprintf("delete %q: %v", k, err))
		}
	}
	page, err := c.b.List(c.ctx, c.report.Prefix, "", 0)
	answered = answered || err == nil
	if !answered && c.current == "" {
		// Nothing landed that the check knows of, and the bucket answers
		// nothing: say so once, rather than every call that failed.
		p.Status, p.Seen = ProbeSkipped, fmt.Sprintf("not done: the bucket answered none of its calls; a probe write that had "+
			"no answer may still have reached it: if the bucket answers later, delete the keys under %q", c.report.Prefix)
		c.add(p)
		return
	}
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("list: %v", err))
	case len(page.Entries) > 0:
		left := make([]string, 0, len(page.Entries))
		for _, e := range page.Entries {
			left = append(left, fmt.Sprintf("%q", e.Key))
		}
		problems = append(problems, "still listed: "+strings.Join(left, ", "))
	}
	if len(problems) > 0 {
		p.Status, p.Seen = ProbeWarning, strings.Join(problems, "; ")
	} else {
		p.Status, p.Seen = ProbePassed, fmt.Sprintf("%d keys deleted", len(keys))
	}
	c.add(p)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
