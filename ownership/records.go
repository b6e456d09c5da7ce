package ownership

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// NodeID names a node (a configured name, stable across restarts).
type NodeID string

// InstanceID names one start of a node process, chosen at random at start.
type InstanceID string

// Generation counts acquisitions of one actor's record: raised by every
// acquisition, never by a release.
type Generation uint64

// Actor addresses one actor.
type Actor struct {
	Class string
	Name  string
}

func (a Actor) String() string { return a.Class + "/" + a.Name }

// LeaseState is the state a node lease record declares.
type LeaseState string

const (
	LeaseLive     LeaseState = "live"
	LeaseDraining LeaseState = "draining"
	LeaseReleased LeaseState = "released"
	LeaseFenced   LeaseState = "fenced"
)

// Lease is the node lease record at nodes/<node>.
type Lease struct {
	Node     NodeID
	Instance InstanceID
	Addr     string
	TTLMilli int64
	State    LeaseState
	// Seq counts this instance's writes of the record; with Nonce it keeps
	// every write's bytes distinct, so no content-hash ETag repeats.
	Seq   uint64
	Nonce string
	// Informational, for `cluster status`; never used for a decision (peers
	// judge a lease by its version changing on their own clocks): the
	// writer's clock at the write (Unix milliseconds) and its counts of live
	// holds and parked records.
	WrittenAt int64
	Held      uint64
	Parked    uint64
}

// Record is the ownership record at owners/<class>/<name>.
//
// A free record keeps the node, instance and generation of its last holder:
// a release never lowers or resets the generation.
type Record struct {
	Class      string
	Name       string
	Node       NodeID
	Instance   InstanceID
	Generation Generation
	Held       bool
	Nonce      string
}

// Names reports whether the record is held by the given process.
func (r Record) Names(n NodeID, i InstanceID) bool { return r.Held && r.Node == n && r.Instance == i }

// MoveRequest is the move request at moves/<class>/<name>.
type MoveRequest struct {
	Class  string
	Name   string
	Target NodeID
	// From, FromInstance and Generation name the hold being moved: the
	// process that held the actor and the generation it held it at, so a
	// request left over from an earlier hold is recognisable.
	From         NodeID
	FromInstance InstanceID
	Generation   Generation
	By           string
	Nonce        string
}

// ErrUnreadable marks a record (or state object header) that cannot be
// decoded. A reader counts and reports it, and goes on with the records
// after it. It is one kind of damage: errors.Is(err, ErrDamaged) holds for
// every error that wraps it.
var ErrUnreadable error = unreadableError{}

// unreadableError is ErrUnreadable's type: a comparable value, so that
// errors.Is(err, ErrUnreadable) compares equal, which also matches
// ErrDamaged.
type unreadableError struct{}

func (unreadableError) Error() string { return "unreadable record" }

// Is makes errors.Is(err, ErrDamaged) true for an unreadable record.
func (unreadableError) Is(target error) bool { return target == ErrDamaged }

// The encoding is one line of space-separated fields, each escaped with
// EscapeSegment so that no field holds a space: "wk1 <kind> <fields...>".
// "wk1" names the encoding version; a reader refuses versions it does not
// know rather than guess. It is readable in a bucket browser and cheap to
// parse, which matters on the acquire path.
const recordMagic = "wk" + "1"

type fields struct{ b []byte }

func newFields(kind string) *fields {
	f := &fields{b: make([]byte, 0, 128)}
	f.b = append(f.b, recordMagic...)
	f.b = append(f.b, ' ')
	f.b = append(f.b, kind...)
	return f
}

func (f *fields) str(s string) *fields {
	f.b = append(f.b, ' ')
	f.b = append(f.b, EscapeSegment(s)...)
	return f
}

func (f *fields) num(n uint64) *fields {
	f.b = append(f.b, ' ')
	f.b = strconv.AppendUint(f.b, n, 10)
	return f
}

type parser struct {
	parts []string
	i     int
	err   error
	kind  string
}

func parse(kind string, data []byte, want int) *parser {
	line := string(data)
	p := &parser{kind: kind}
	magic, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(magic, "wk") {
		p.err = fmt.Errorf("%w: %s: not a wasmkeep record", ErrUnreadable, kind)
		return p
	}
	if magic != recordMagic {
		p.err = fmt.Errorf("%w: %s: encoding %q, this node reads %q", ErrUnreadable, kind, magic, recordMagic)
		return p
	}
	got, rest, _ := strings.Cut(rest, " ")
	if got != kind {
		p.err = fmt.Errorf("%w: expected a %s, found a %q", ErrUnreadable, kind, got)
		return p
	}
	p.parts = strings.Split(rest, " ")
	if len(p.parts) != want {
		p.err = fmt.Errorf("%w: %s: %d fields, want %d", ErrUnreadable, kind, len(p.parts), want)
	}
	return p
}

func (p *parser) str() string {
	if p.err != nil {
		return ""
	}
	s, err := UnescapeSegment(p.parts[p.i])
	p.i++
	if err != nil {
		p.err = fmt.Errorf("%w: %s: %v", ErrUnreadable, p.kind, err)
	}
	return s
}

func (p *parser) num() uint64 {
	if p.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(p.parts[p.i], 10, 64)
	p.i++
	if err != nil {
		p.err = fmt.Errorf("%w: %s: %v", ErrUnreadable, p.kind, err)
	}
	return n
}

// EncodeLease gives the stored bytes of a node lease record.
func EncodeLease(l Lease) []byte {
	return newFields("lease").str(string(l.Node)).str(string(l.Instance)).str(l.Addr).
		num(uint64(max(l.TTLMilli, 0))).str(string(l.State)).num(l.Seq).str(l.Nonce).
		num(uint64(max(l.WrittenAt, 0))).num(l.Held).num(l.Parked).b
}

// EncodeRecord gives the stored bytes of an ownership record.
func EncodeRecord(r Record) []byte {
	held := uint64(0)
	if r.Held {
		held = 1
	}
	return newFields("owner").str(r.Class).str(r.Name).str(string(r.Node)).str(string(r.Instance)).
		num(uint64(r.Generation)).num(held).str(r.Nonce).b
}

// EncodeMove gives the stored bytes of a move request.
func EncodeMove(m MoveRequest) []byte {
	return newFields("move").str(m.Class).str(m.Name).str(string(m.Target)).
		str(string(m.From)).str(string(m.FromInstance)).num(uint64(m.Generation)).str(m.By).str(m.Nonce).b
}

// NodeClasses is what a node serves, at ClassesKey: the classes of one
// instance of it. It decides nothing of ownership; it routes an event for
// a class this node does not serve.
type NodeClasses struct {
	Node     NodeID
	Instance InstanceID
	Classes  []string
}

// EncodeNodeClasses gives the stored bytes of a NodeClasses.
func EncodeNodeClasses(c NodeClasses) []byte {
	f := newFields("classes").str(string(c.Node)).str(string(c.Instance)).num(uint64(len(c.Classes)))
	for _, name := range c.Classes {
		f.str(name)
	}
	return f.b
}

// DecodeNodeClasses reads a NodeClasses.
func DecodeNodeClasses(data []byte) (NodeClasses, error) {
	// The count of classes says how many fields follow it.
	n := 0
	if fs := strings.Fields(string(data)); len(fs) >= 5 {
		if v, err := strconv.Atoi(fs[4]); err == nil && v >= 0 && v <= len(fs) {
			n = v
		}
	}
	p := parse("classes", data, 3+n)
	c := NodeClasses{Node: NodeID(p.str()), Instance: InstanceID(p.str())}
	if count := p.num(); p.err == nil && int(count) != n {
		p.err = fmt.Errorf("%w: classes: %d named, %d counted", ErrUnreadable, n, count)
	}
	for range n {
		if name := p.str(); p.err == nil {
			c.Classes = append(c.Classes, name)
		}
	}
	if p.err != nil {
		return NodeClasses{}, p.err
	}
	if c.Node == "" || c.Instance == "" {
		return NodeClasses{}, fmt.Errorf("%w: classes without node or instance", ErrUnreadable)
	}
	return c, nil
}

// DecodeLease reads a node lease record.
func DecodeLease(data []byte) (Lease, error) {
	p := parse("lease", data, 10)
	l := Lease{Node: NodeID(p.str()), Instance: InstanceID(p.str()), Addr: p.str(), TTLMilli: int64(p.num()),
		State: LeaseState(p.str()), Seq: p.num(), Nonce: p.str(), WrittenAt: int64(p.num()), Held: p.num(), Parked: p.num()}
	if p.err != nil {
		return Lease{}, p.err
	}
	if l.Node == "" || l.Instance == "" {
		return Lease{}, fmt.Errorf("%w: lease without node or instance", ErrUnreadable)
	}
	switch l.State {
	case LeaseLive, LeaseDraining, LeaseReleased, LeaseFenced:
	default:
		return Lease{}, fmt.Errorf("%w: lease state %q", ErrUnreadable, l.State)
	}
	return l, nil
}

// DecodeRecord reads an ownership record.
func DecodeRecord(data []byte) (Record, error) {
	p := parse("owner", data, 7)
	r := Record{Class: p.str(), Name: p.str(), Node: NodeID(p.str()), Instance: InstanceID(p.str()), Generation: Generation(p.num())}
	held := p.num()
	r.Held, r.Nonce = held == 1, p.str()
	if p.err == nil && held > 1 {
		p.err = fmt.Errorf("%w: owner: held flag %d", ErrUnreadable, held)
	}
	if p.err != nil {
		return Record{}, p.err
	}
	if r.Generation == 0 || r.Node == "" || r.Instance == "" {
		return Record{}, fmt.Errorf("%w: owner record without generation, node or instance", ErrUnreadable)
	}
	return r, nil
}

// DecodeMove reads a move request.
func DecodeMove(data []byte) (MoveRequest, error) {
	p := parse("move", data, 8)
	m := MoveRequest{Class: p.str(), Name: p.str(), Target: NodeID(p.str()),
		From: NodeID(p.str()), FromInstance: InstanceID(p.str()), Generation: Generation(p.num()), By: p.str(), Nonce: p.str()}
	if p.err != nil {
		return MoveRequest{}, p.err
	}
	if m.Target == "" {
		return MoveRequest{}, fmt.Errorf("%w: move request without target", ErrUnreadable)
	}
	return m, nil
}

// ErrInvalidActor is the error for an actor whose record key cannot exist.
var ErrInvalidActor = errors.New("invalid actor")

// ValidateActor says whether a can have a record: a class and a name, which
// make a valid key. The error wraps ErrInvalidActor.
func ValidateActor(a Actor) error {
	if a.Class == "" || a.Name == "" {
		return fmt.Errorf("%w: %q: empty class or name", ErrInvalidActor, a)
	}
	if err := ValidateKey(OwnerKey(a)); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidActor, a, err)
	}
	return nil
}
