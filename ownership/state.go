package ownership

import (
	"bytes"
	"fmt"
)

// StateKey is the key of an actor's state object: everything the actor
// stored, in one object, whatever its payload's layout.
func StateKey(a Actor) string {
	return ActorsPrefix + KeySegment(a.Class) + "/" + KeySegment(a.Name) + "/state"
}

// StateHeader is what the ownership layer reads of a state object: the
// generation of the hold that last wrote it (an acquisition's seal, or a
// commit of that hold) and a count of its writes. The payload after it
// belongs to the actors layer.
type StateHeader struct {
	Gen Generation
	// Seq counts the object's writes: every write's bytes differ, since an
	// ETag may be a hash of the content.
	Seq uint64
}

// EncodeState gives the stored bytes of a state object: one header line,
// "wk1 state <gen> <seq>\n", then the payload as is.
func EncodeState(h StateHeader, payload []byte) []byte {
	f := newFields("state").num(uint64(h.Gen)).num(h.Seq)
	out := make([]byte, 0, len(f.b)+1+len(payload))
	out = append(out, f.b...)
	out = append(out, '\n')
	return append(out, payload...)
}

// DecodeState splits a state object into its header and its payload (a
// slice of data).
func DecodeState(data []byte) (StateHeader, []byte, error) {
	line, payload, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return StateHeader{}, nil, fmt.Errorf("%w: state: no header line", ErrUnreadable)
	}
	p := parse("state", line, 2)
	h := StateHeader{Gen: Generation(p.num()), Seq: p.num()}
	if p.err != nil {
		return StateHeader{}, nil, p.err
	}
	return h, payload, nil
}

// StateVerdict is what a hold does with the state object it reads at the
// start of a residency (JudgeState).
type StateVerdict uint8

const (
	// StateNew: there is no object; the hold's first commit creates it
	// (If-None-Match). An actor with no object had no record (the seal
	// creates one for every acquisition after the first), so no older
	// hold can have a commit in flight.
	StateNew StateVerdict = iota + 1
	// StateUse: the object is stamped with the hold's generation (its
	// acquisition sealed it, or the hold wrote it): used as is.
	StateUse
	// StateSuperseded: the object is stamped with a later generation, so a
	// later hold sealed it: this hold was superseded and ends without
	// acting.
	StateSuperseded
	// StateFence: the object is stamped with an earlier generation (the
	// hold was granted without the core's seal, as in tests and tools): it
	// is rewritten with the header JudgeState returns, conditioned on the
	// version read, before the hold acts, so that no older hold's write
	// can land after it. (JudgeReload fences a hold's own object too, or
	// creates it empty, If-None-Match, when there is none.)
	StateFence
)

func (v StateVerdict) String() string {
	switch v {
	case StateNew:
		return "new"
	case StateUse:
		return "use"
	case StateSuperseded:
		return "superseded"
	case StateFence:
		return "fence"
	}
	return fmt.Sprintf("StateVerdict(%d)", v)
}

// JudgeState is the seal and supersede rule for a hold at gen that
// read the actor's state object (found false: there is none; read is its
// header). With StateFence it also returns the header to write: stamped
// gen, its write count one more.
func JudgeState(found bool, read StateHeader, gen Generation) (StateVerdict, StateHeader) {
	switch {
	case !found:
		return StateNew, StateHeader{Gen: gen}
	case read.Gen > gen:
		return StateSuperseded, read
	case read.Gen == gen:
		return StateUse, read
	}
	return StateFence, StateHeader{Gen: gen, Seq: read.Seq + 1}
}

// JudgeReload is JudgeState for a hold that reads its state again after
// dropping it (a commit that did not land, a restart), with pending when
// a commit of its own may still land: its outcome stayed unknown, as the
// resolve's fence (LostFence) did not land either. What the hold reads
// then is not final: that commit could land after the read, and undo what
// the hold decided from it (that an alarm's set is gone, and its index
// entry may go, when the commit carries that set). So the object is
// fenced as an older hold's is: rewritten as read, its write count
// raised, conditioned on the version read, or created empty
// (If-None-Match) when there is none; once the fence lands, the commit
// can never land, and the hold reads its state as any other.
func JudgeReload(found bool, read StateHeader, gen Generation, pending bool) (StateVerdict, StateHeader) {
	v, h := JudgeState(found, read, gen)
	if !pending {
		return v, h
	}
	switch v {
	case StateUse:
		return StateFence, StateHeader{Gen: gen, Seq: read.Seq + 1}
	case StateNew:
		return StateFence, h
	}
	return v, h
}

// LostCommit is what a hold does with a commit of its state object that
// had no answer, once it has read the object again (JudgeLostCommit).
type LostCommit uint8

const (
	// LostLanded: the object is the commit's own: it landed.
	LostLanded LostCommit = iota + 1
	// LostFence: the object is still the version the commit was
	// conditioned on (or still absent, for a first commit). Written again
	// as it is (its write count raised), on that condition, it can no
	// longer be replaced by the commit, however late that lands: landed,
	// the fence makes the commit a refused one.
	LostFence
	// LostUnknown: another write came between (a later hold's seal), or
	// the object says nothing of the commit: its outcome stays unknown.
	LostUnknown
)

func (l LostCommit) String() string {
	switch l {
	case LostLanded:
		return "landed"
	case LostFence:
		return "fence"
	case LostUnknown:
		return "unknown"
	}
	return fmt.Sprintf("LostCommit(%d)", uint8(l))
}

// JudgeLostCommit judges a commit of the bytes sent, conditioned on the
// object's version prev ("": a first commit, on its absence), that had no
// answer, from a read of the object made after the commit was sent: found,
// holding read at version etag. The commit landed if the object holds its
// very bytes. Its header alone (generation and write count) would not
// tell: an acquisition that lost its race to this hold's may have sealed
// the object stamped with the same generation and count before it failed
// (the simulation found it), and a later commit would have changed the
// object again. If the object holds those bytes only because another
// write gave it the same content, the state is what the commit would have
// made it all the same.
func JudgeLostCommit(found bool, read []byte, etag ETag, sent []byte, prev ETag) LostCommit {
	switch {
	case found && bytes.Equal(read, sent):
		return LostLanded
	case !found && prev == "", found && prev != "" && etag == prev:
		return LostFence
	}
	return LostUnknown
}

// An actor's state object may list run objects: immutable parts of its
// storage, each written once (If-None-Match) by one hold before the state
// object that lists it. The state object stays the only thing a hold
// writes conditionally, so the seal fences runs too: a run that a
// superseded hold wrote, however late it lands, is listed by no state
// object a later hold reads, and so is never read. Runs are named by the
// generation of the hold that wrote them and a number of its choosing
// (random, so that no two attempts name the same run): no two holds ever
// write the same key.

// RunsPrefix is the prefix of an actor's run objects' keys.
func RunsPrefix(a Actor) string {
	return ActorsPrefix + KeySegment(a.Class) + "/" + KeySegment(a.Name) + "/runs/"
}

// RunKey is the key of the run number n of the hold at gen.
func RunKey(a Actor, gen Generation, n uint64) string {
	return RunsPrefix(a) + RunName(gen, n)
}

// RunName is the last segment of a run's key: generation and number, in
// fixed-width hexadecimal so that keys sort by generation.
func RunName(gen Generation, n uint64) string {
	return fmt.Sprintf("%016x-%016x", uint64(gen), n)
}

// ParseRunName reads a run's name; ok is false for a name RunName did not
// give.
func ParseRunName(name string) (gen Generation, n uint64, ok bool) {
	var g uint64
	if len(name) != 33 || name[16] != '-' {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(name, "%016x-%016x", &g, &n); err != nil || RunName(Generation(g), n) != name {
		return 0, 0, false
	}
	return Generation(g), n, true
}

// RunGarbage is the rule of what a hold at gen may delete of its actor's
// runs that it finds in the bucket without knowing them (a listing of
// RunsPrefix): a run that its working state does not list (listed false)
// and that an earlier generation wrote. Such a run is listed by no later
// state object either: every later hold starts from one of this hold's
// objects or a later one, which list only the earlier generations' runs
// this hold took over and runs of their own. A run of this hold's own
// generation or a later one is never garbage by this rule (it may be
// being written, or listed where this hold cannot see); the runs a hold
// itself stops listing it deletes by name.
func RunGarbage(gen Generation, listed bool, runGen Generation) bool {
	return !listed && runGen < gen
}
