package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// RecordState is what an actor's ownership record says of who may act
// for it, read from the bucket alone.
type RecordState string

const (
	// RecordNone: the actor has no record: no node ever held it.
	RecordNone RecordState = "none"
	// RecordFree: released; it names its last holder.
	RecordFree RecordState = "free"
	// RecordHeld: a live node holds it: the actor is resident there, or
	// parked beside its sockets. A park writes nothing, so the bucket
	// cannot tell the two apart.
	RecordHeld RecordState = "held"
	// RecordEnded: it names a process that has ended (an earlier instance
	// of its node, or a node whose lease is fenced or released): any node
	// may acquire it.
	RecordEnded RecordState = "ended"
	// RecordUnreadable: the record could not be read or decoded.
	RecordUnreadable RecordState = "unreadable"
)

// Holder is an actor's record and, when it is held, its holder's lease.
type Holder struct {
	State RecordState
	// Record is nil for RecordNone and RecordUnreadable.
	Record *ownership.Record
	// Lease is the lease of the node the record names, when it is held
	// and that lease could be read.
	Lease *ownership.Lease
	// Err says why the record is unreadable.
	Err error
}

// holderOf judges a held record by the lease of its node (nil: none).
func holderOf(rec ownership.Record, lease *ownership.Lease) Holder {
	h := Holder{State: RecordFree, Record: &rec}
	if !rec.Held {
		return h
	}
	h.Lease, h.State = lease, RecordEnded
	if lease != nil && lease.Instance == rec.Instance && (lease.State == ownership.LeaseLive || lease.State == ownership.LeaseDraining) {
		h.State = RecordHeld
	}
	return h
}

// ReadHolder reads actor a's record and, when it is held, the lease of
// the node it names, and says who may act for it. A record that cannot be
// read or decoded is RecordUnreadable with its error; a bucket that does
// not answer is an error.
func ReadHolder(ctx context.Context, b ownership.Bucket, a ownership.Actor) (Holder, error) {
	obj, err := b.Get(ctx, ownership.OwnerKey(a))
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
	case ownership.NotFound:
		return Holder{State: RecordNone}, nil
	case ownership.Damaged:
		return Holder{State: RecordUnreadable, Err: err}, nil
	default:
		return Holder{}, fmt.Errorf("read the record of %s: %w", a, err)
	}
	rec, err := ownership.DecodeRecord(obj.Body)
	if err != nil {
		return Holder{State: RecordUnreadable, Err: err}, nil
	}
	if !rec.Held {
		return holderOf(rec, nil), nil
	}
	l, err := readLease(ctx, b, rec.Node)
	switch {
	case errors.Is(err, ErrUnknownNode):
		return holderOf(rec, nil), nil
	case err != nil:
		return Holder{}, err
	}
	return holderOf(rec, &l), nil
}

// ImportHolder is the node a record written by ClaimRecord names: no node
// of a cluster, so none acts on it; any node may acquire the actor.
const ImportHolder ownership.NodeID = "wasmkeep-import"

// ClaimRecord gives an actor that has no record a free one, at generation
// 1, naming ImportHolder, and returns its holder as ReadHolder would read
// it (that of a record another writer created first, if one did). Why:
// the first acquisition of an actor with no record writes nothing to its
// state object, while every later one seals it first (ownership's seal);
// with a record in place, a writer of the state object that conditions
// its write on the version it read (an import) cannot land beneath a hold
// that loaded the state before it.
func ClaimRecord(ctx context.Context, b ownership.Bucket, a ownership.Actor, nonce string) (Holder, error) {
	rec := ownership.Record{Class: a.Class, Name: a.Name, Node: ImportHolder, Instance: ownership.InstanceID(nonce), Generation: 1, Nonce: nonce}
	_, err := b.Put(ctx, ownership.OwnerKey(a), ownership.EncodeRecord(rec), ownership.IfAbsent())
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
		return holderOf(rec, nil), nil
	case ownership.Refused:
		return ReadHolder(ctx, b, a) // another writer's came first
	}
	return Holder{}, fmt.Errorf("write a free record for %s: %w", a, err)
}

// ActorOptions say what ListActors reads beyond the two listings.
type ActorOptions struct {
	// Records: read every actor's record (one GET each) and the nodes'
	// leases, for who holds it.
	Records bool
	// Headers: read the header of every actor's state object (one ranged
	// GET of its first bytes each), for its generation and its count of
	// writes.
	Headers bool
	// Readers bounds the reads under way at once; 0: 16.
	Readers int
}

// ActorSummary is one actor of a class as the bucket's listings, and the
// reads asked for, show it.
type ActorSummary struct {
	// Name is the actor's name: its record's, or else its key segment's
	// (a name too long for a key is cut and hashed there: Segment then
	// holds what is left of it and Name is empty, unless the record was
	// read).
	Name    string `json:"name"`
	Segment string `json:"segment"`
	// StateBytes is the size of its state object (0: it has none);
	// RunBytes that of its run objects (parts and manifests, including
	// those its head no longer lists and no hold has deleted yet); Objects
	// counts them all.
	StateBytes int64 `json:"state_bytes"`
	RunBytes   int64 `json:"run_bytes"`
	Objects    int   `json:"objects"`
	// Record is what its record says (with Records): the holder, or the
	// last holder of a free record, and its generation.
	Record     RecordState          `json:"record,omitempty"`
	Node       ownership.NodeID     `json:"node,omitempty"`
	Instance   ownership.InstanceID `json:"instance,omitempty"`
	Generation ownership.Generation `json:"generation,omitempty"`
	// State is its state object's header (with Headers), nil when it has
	// none or the header could not be read (Err says why).
	State *StateStamp `json:"state,omitempty"`
	Err   string      `json:"error,omitempty"`
}

// StateStamp is a state object's header: the generation of the hold that
// last wrote or sealed it, and its count of writes.
type StateStamp struct {
	Generation ownership.Generation `json:"generation"`
	Writes     uint64               `json:"writes"`
}

// Size is the bytes of all the actor's objects.
func (s ActorSummary) Size() int64 { return s.StateBytes + s.RunBytes }

// ActorList is the actors of one class.
type ActorList struct {
	Class  string         `json:"class"`
	ReadAt time.Time      `json:"read_at"`
	Actors []ActorSummary `json:"actors"`
}

// stateHeaderRead is how many bytes of a state object hold its header
// line ("wk1 state <gen> <seq>\n": at most 52).
const stateHeaderRead = 64

// ListActors lists the actors of class in the bucket: every actor with an
// object under actors/<class>/ or a record under owners/<class>/, in the
// order of their keys, from those two listings alone (a LIST page per
// thousand keys), with the sizes the listing gives; opt adds reads, each
// with at most opt.Readers under way. now is the reader's clock, for
// ReadAt. It only reads.
func ListActors(ctx context.Context, b ownership.Bucket, class string, opt ActorOptions, now time.Time) (ActorList, error) {
	out := ActorList{Class: class, ReadAt: now.UTC(), Actors: []ActorSummary{}}
	n := opt.Readers
	if n <= 0 {
		n = 16
	}
	classSeg := ownership.KeySegment(class) + "/"
	bySeg := map[string]*ActorSummary{}
	actor := func(seg string) *ActorSummary {
		s := bySeg[seg]
		if s == nil {
			s = &ActorSummary{Segment: seg, Record: RecordNone}
			if !opt.Records {
				s.Record = ""
			}
			if name, err := ownership.UnescapeSegment(seg); err == nil {
				s.Name = name
			}
			bySeg[seg] = s
		}
		return s
	}

	storage := ownership.ActorsPrefix + classSeg
	err := listEach(ctx, b, storage, func(e ownership.ListEntry) {
		seg, rest, _ := strings.Cut(e.Key[len(storage):], "/")
		s := actor(seg)
		s.Objects++
		if rest == "state" {
			s.StateBytes = e.Size
		} else {
			s.RunBytes += e.Size
		}
	})
	if err != nil {
		return ActorList{}, err
	}
	owners := ownership.OwnersPrefix + classSeg
	var ownerSegs []string
	err = listEach(ctx, b, owners, func(e ownership.ListEntry) {
		seg := e.Key[len(owners):]
		if strings.Contains(seg, "/") {
			return // not a record of this class
		}
		actor(seg)
		ownerSegs = append(ownerSegs, seg)
	})
	if err != nil {
		return ActorList{}, err
	}

	if opt.Records && len(ownerSegs) > 0 {
		leases, err := readLeases(ctx, b, n)
		if err != nil {
			return ActorList{}, err
		}
		inParallel(n, len(ownerSegs), func(i int) {
			s := bySeg[ownerSegs[i]]
			obj, err := b.Get(ctx, owners+ownerSegs[i])
			switch {
			case errors.Is(err, ownership.ErrNotFound):
				return // listed, then not found: as if it had not been listed
			case err != nil:
				s.Record, s.Err = RecordUnreadable, err.Error()
				return
			}
			rec, err := ownership.DecodeRecord(obj.Body)
			if err != nil {
				s.Record, s.Err = RecordUnreadable, err.Error()
				return
			}
			var l *ownership.Lease
			if lease, ok := leases[rec.Node]; ok {
				l = &lease
			}
			h := holderOf(rec, l)
			s.Name, s.Record, s.Node, s.Instance, s.Generation = rec.Name, h.State, rec.Node, rec.Instance, rec.Generation
		})
	}
	if opt.Headers {
		var withState []*ActorSummary
		for _, s := range bySeg {
			if s.StateBytes > 0 { // a state object is never empty: its header
				withState = append(withState, s)
			}
		}
		inParallel(n, len(withState), func(i int) {
			s := withState[i]
			key := storage + s.Segment + "/state"
			obj, err := ownership.ReadRange(ctx, b, key, 0, stateHeaderRead)
			if errors.Is(err, ownership.ErrNotFound) {
				return
			}
			if err == nil {
				var h ownership.StateHeader
				if h, _, err = ownership.DecodeState(obj.Body); err == nil {
					s.State = &StateStamp{Generation: h.Gen, Writes: h.Seq}
					return
				}
			}
			if s.Err == "" {
				s.Err = fmt.Sprintf("state object: %v", err)
			}
		})
	}
	if err := ctx.Err(); err != nil {
		return ActorList{}, fmt.Errorf("read the bucket: %w", err)
	}
	for _, s := range bySeg {
		out.Actors = append(out.Actors, *s)
	}
	slices.SortFunc(out.Actors, func(a, b ActorSummary) int { return strings.Compare(a.Segment, b.Segment) })
	return out, nil
}

// listEach calls fn with every entry under prefix, page after page.
func listEach(ctx context.Context, b ownership.Bucket, prefix string, fn func(ownership.ListEntry)) error {
	after := ""
	for {
		page, err := b.List(ctx, prefix, after, 0)
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, e := range page.Entries {
			fn(e)
		}
		if !page.Truncated {
			return nil
		}
		if len(page.Entries) == 0 {
			return fmt.Errorf("list %s: the store said more keys follow %q but gave none", prefix, after)
		}
		after = page.Entries[len(page.Entries)-1].Key
	}
}

// readLeases reads every node's lease; one that cannot be read or
// decoded is left out (the records naming it count as ended).
func readLeases(ctx context.Context, b ownership.Bucket, n int) (map[ownership.NodeID]ownership.Lease, error) {
	keys, err := listAll(ctx, b, ownership.NodesPrefix)
	if err != nil {
		return nil, err
	}
	// Drain and move requests lie beside the leases, with a '~'.
	keys = slices.DeleteFunc(keys, func(k string) bool { return strings.Contains(k, "~") })
	reads := make([]read, len(keys))
	inParallel(n, len(keys), func(i int) {
		obj, err := b.Get(ctx, keys[i])
		reads[i] = read{obj: obj, err: err}
	})
	leases := map[ownership.NodeID]ownership.Lease{}
	for i, key := range keys {
		if reads[i].err != nil {
			continue
		}
		l, err := ownership.DecodeLease(reads[i].obj.Body)
		if err != nil || ownership.NodeKey(l.Node) != key {
			continue
		}
		leases[l.Node] = l
	}
	return leases, nil
}
