package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Op is the kind of a bucket request: the core's own, so that a simulator
// can hand the core's requests to a State as they are.
type Op = ownership.Op

const (
	OpGet    = ownership.OpGet
	OpPut    = ownership.OpPut
	OpDelete = ownership.OpDelete
	OpList   = ownership.OpList
)

// Request is one bucket call as data, so that a simulator can hold it in
// flight and decide when it lands. Fields an Op does not use are ignored.
type Request struct {
	Op Op
	// Key is the object of a Get, Put or Delete.
	Key string
	// Ranged makes a Get a range read (ownership.RangeReader): of N bytes
	// from Off, instead of the whole object.
	Ranged bool
	Off, N int64
	// Body is what a Put writes. The State copies it when the request lands,
	// not before: a caller that holds a Request in flight must not modify
	// Body meanwhile.
	Body []byte
	// Cond guards a Put or a Delete.
	Cond ownership.Condition
	// Prefix, StartAfter and Limit shape a List.
	Prefix     string
	StartAfter string
	Limit      int
}

// IsWrite reports whether the request changes the bucket when it lands.
func (r Request) IsWrite() bool { return r.Op == OpPut || r.Op == OpDelete }

func (r Request) String() string {
	switch r.Op {
	case OpPut:
		return fmt.Sprintf("put %q (%d bytes, %s)", r.Key, len(r.Body), r.Cond)
	case OpDelete:
		return fmt.Sprintf("delete %q (%s)", r.Key, r.Cond)
	case OpList:
		return fmt.Sprintf("list prefix %q after %q limit %d", r.Prefix, r.StartAfter, r.Limit)
	case OpGet:
		if r.Ranged {
			return fmt.Sprintf("get %q range %d+%d", r.Key, r.Off, r.N)
		}
	}
	return fmt.Sprintf("%s %q", r.Op, r.Key)
}

// errBadRequest marks requests no server would accept (a bad condition or
// an unknown operation). OutcomeOf classifies it as Failed.
var errBadRequest = errors.New("bad request")

// check rejects a request before it is sent, as a client library would:
// invalid keys and meaningless conditions never reach the server, so they
// never meet a fault either.
func (r Request) check() error {
	switch r.Op {
	case OpGet:
		if err := checkKey(r.Op, r.Key); err != nil || !r.Ranged {
			return err
		}
		if err := ownership.ValidateRange(r.Off, r.N); err != nil {
			return fmt.Errorf("memstore: %s: %w", r, err)
		}
		return nil
	case OpPut, OpDelete:
		if err := checkKey(r.Op, r.Key); err != nil {
			return err
		}
		switch r.Cond.Kind {
		case ownership.Unconditional, ownership.ReplaceOnly:
			return nil
		case ownership.CreateOnly:
			if r.Op == OpPut {
				return nil
			}
		}
		return fmt.Errorf("memstore: %s %q with %s: %w", r.Op, r.Key, r.Cond, errBadRequest)
	case OpList:
		return nil
	}
	return fmt.Errorf("memstore: %s: %w", r.Op, errBadRequest)
}

func checkKey(op Op, key string) error {
	if err := ownership.ValidateKey(key); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	return nil
}

// Response is the result of applying one Request. Err is nil or wraps one of
// the ownership sentinels (or a bad-request error), as the Bucket contract
// says; State never returns ErrUnknownOutcome, because it always answers.
type Response struct {
	Object ownership.Object   // Get
	ETag   ownership.ETag     // Put
	Page   ownership.ListPage // List
	Err    error
}

type object struct {
	body []byte
	etag ownership.ETag
}

// State holds the objects of one bucket. The zero value is an empty bucket,
// ready to use. It is not safe for concurrent use: one goroutine at a time.
type State struct {
	// IgnoreConditions imitates a broken server that accepts If-Match and
	// If-None-Match but does not enforce them: every Put and Delete lands as
	// if unconditional. It exists to prove that a conditional-write checker
	// notices such a server.
	IgnoreConditions bool

	objects map[string]object
	// keys is every key in ascending byte order, kept sorted on each write
	// so that List is a binary search and a scan.
	keys []string
	// writes counts landed writes; ETags are drawn from it so they are
	// deterministic yet never repeat within one State.
	writes uint64
}

// NewState returns an empty State.
func NewState() *State { return &State{} }

// Len reports how many objects the bucket holds.
func (s *State) Len() int { return len(s.objects) }

// Apply lands one request and returns its result.
func (s *State) Apply(r Request) Response {
	if err := r.check(); err != nil {
		return Response{Err: err}
	}
	switch r.Op {
	case OpGet:
		if r.Ranged {
			o, err := s.getRange(r.Key, r.Off, r.N)
			return Response{Object: o, Err: err}
		}
		o, err := s.get(r.Key)
		return Response{Object: o, Err: err}
	case OpPut:
		etag, err := s.put(r.Key, r.Body, r.Cond)
		return Response{ETag: etag, Err: err}
	case OpDelete:
		return Response{Err: s.delete(r.Key, r.Cond)}
	}
	return Response{Page: s.list(r.Prefix, r.StartAfter, r.Limit)}
}

// Get reads an object; see ownership.Bucket.
func (s *State) Get(key string) (ownership.Object, error) {
	res := s.Apply(Request{Op: OpGet, Key: key})
	return res.Object, res.Err
}

// GetRange reads part of an object; see ownership.RangeReader.
func (s *State) GetRange(key string, off, n int64) (ownership.Object, error) {
	res := s.Apply(Request{Op: OpGet, Key: key, Ranged: true, Off: off, N: n})
	return res.Object, res.Err
}

// Put writes an object under a condition; see ownership.Bucket.
func (s *State) Put(key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	res := s.Apply(Request{Op: OpPut, Key: key, Body: body, Cond: cond})
	return res.ETag, res.Err
}

// Delete removes an object under a condition; see ownership.Bucket.
func (s *State) Delete(key string, cond ownership.Condition) error {
	return s.Apply(Request{Op: OpDelete, Key: key, Cond: cond}).Err
}

// List returns one page of keys; see ownership.Bucket.
func (s *State) List(prefix, startAfter string, limit int) (ownership.ListPage, error) {
	res := s.Apply(Request{Op: OpList, Prefix: prefix, StartAfter: startAfter, Limit: limit})
	return res.Page, res.Err
}

func (s *State) get(key string) (ownership.Object, error) {
	o, ok := s.objects[key]
	if !ok {
		return ownership.Object{}, fmt.Errorf("memstore: get %q: %w", key, ownership.ErrNotFound)
	}
	return ownership.Object{Body: slices.Clone(o.body), ETag: o.etag}, nil
}

func (s *State) getRange(key string, off, n int64) (ownership.Object, error) {
	o, ok := s.objects[key]
	if !ok {
		return ownership.Object{}, fmt.Errorf("memstore: get %q range %d+%d: %w", key, off, n, ownership.ErrNotFound)
	}
	return ownership.Object{Body: ownership.CopyRange(o.body, off, n), ETag: o.etag}, nil
}

// admits reports whether a write under cond may land on key.
func (s *State) admits(op Op, key string, cond ownership.Condition) error {
	if s.IgnoreConditions || cond.Kind == ownership.Unconditional {
		return nil
	}
	cur, ok := s.objects[key]
	switch {
	case cond.Kind == ownership.CreateOnly && ok:
		return fmt.Errorf("memstore: %s %q (%s): key exists: %w", op, key, cond, ownership.ErrPrecondition)
	case cond.Kind == ownership.ReplaceOnly && !ok:
		return fmt.Errorf("memstore: %s %q (%s): key absent: %w", op, key, cond, ownership.ErrPrecondition)
	case cond.Kind == ownership.ReplaceOnly && cur.etag != cond.ETag:
		return fmt.Errorf("memstore: %s %q (%s): holds %s: %w", op, key, cond, cur.etag, ownership.ErrPrecondition)
	}
	return nil
}

func (s *State) put(key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if err := s.admits(OpPut, key, cond); err != nil {
		return "", err
	}
	if s.objects == nil {
		s.objects = make(map[string]object)
	}
	if _, ok := s.objects[key]; !ok {
		i, _ := slices.BinarySearch(s.keys, key)
		s.keys = slices.Insert(s.keys, i, key)
	}
	s.writes++
	// Invariant: ETags are unique within a State because writes only grows.
	etag := ownership.ETag("m" + strconv.FormatUint(s.writes, 10))
	// Never nil, so an empty object reads back as an empty, non-nil body in
	// every store.
	b := make([]byte, len(body))
	copy(b, body)
	s.objects[key] = object{body: b, etag: etag}
	return etag, nil
}

func (s *State) delete(key string, cond ownership.Condition) error {
	if err := s.admits(OpDelete, key, cond); err != nil {
		return err
	}
	if _, ok := s.objects[key]; !ok {
		return nil // an unconditional delete of a missing key lands, as in S3
	}
	delete(s.objects, key)
	i, _ := slices.BinarySearch(s.keys, key)
	s.keys = slices.Delete(s.keys, i, i+1)
	return nil
}

func (s *State) list(prefix, startAfter string, limit int) ownership.ListPage {
	if limit <= 0 || limit > ownership.DefaultListLimit {
		limit = ownership.DefaultListLimit
	}
	i, _ := slices.BinarySearch(s.keys, prefix)
	if startAfter >= prefix {
		j, found := slices.BinarySearch(s.keys, startAfter)
		if found {
			j++
		}
		i = j
	}
	var page ownership.ListPage
	for ; i < len(s.keys) && strings.HasPrefix(s.keys[i], prefix); i++ {
		if len(page.Entries) == limit {
			page.Truncated = true
			break
		}
		k := s.keys[i]
		o := s.objects[k]
		page.Entries = append(page.Entries, ownership.ListEntry{Key: k, ETag: o.etag, Size: int64(len(o.body))})
	}
	return page
}

// Bucket returns the State as an ownership.Bucket whose calls land at once
// and ignore their context: for single-threaded drivers (a simulator, a
// scripted test) that decide themselves when a request lands. It is an
// ownership.RangeReader too.
func (s *State) Bucket() ownership.Bucket { return stateBucket{s} }

type stateBucket struct{ s *State }

var _ ownership.RangeReader = stateBucket{}

func (b stateBucket) Get(_ context.Context, key string) (ownership.Object, error) {
	return b.s.Get(key)
}

func (b stateBucket) GetRange(_ context.Context, key string, off, n int64) (ownership.Object, error) {
	return b.s.GetRange(key, off, n)
}

func (b stateBucket) Put(_ context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	return b.s.Put(key, body, cond)
}

func (b stateBucket) Delete(_ context.Context, key string, cond ownership.Condition) error {
	return b.s.Delete(key, cond)
}

func (b stateBucket) List(_ context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	return b.s.List(prefix, startAfter, limit)
}
