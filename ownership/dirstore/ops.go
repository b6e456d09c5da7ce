package dirstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Get reads an object; see ownership.Bucket. It first catches up with
// what other Stores wrote (an fstat when they wrote nothing), so it sees
// every write that returned before it started, from any Store.
func (s *Store) Get(ctx context.Context, key string) (ownership.Object, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get: %w", err)
	}
	return s.view(ctx, key, func() (ownership.Object, error) { return s.read(key) })
}

// view runs read, a read of key, on an index that is up to date: under mu
// for reading when the segment has not changed since the index caught up
// with it, else under mu for writing after catching up.
func (s *Store) view(ctx context.Context, key string, read func() (ownership.Object, error)) (ownership.Object, error) {
	if err := ctx.Err(); err != nil {
		return ownership.Object{}, unknown("get", key, err)
	}
	if s.closed.Load() {
		return ownership.Object{}, ErrClosed
	}
	if err := s.brokenErr(); err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, err)
	}
	s.mu.RLock()
	fresh, err := s.fresh()
	if err == nil && fresh {
		obj, err := read()
		s.mu.RUnlock()
		return obj, err
	}
	s.mu.RUnlock()
	if err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(false); err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, s.fatal(err, s.segPath()))
	}
	return read()
}

// read reads the current version of key from the segment, checking its
// record. A record that fails its check is damage to that object alone
// (ownership.ErrDamaged, which also wraps ErrCorrupt): the other keys are
// read as before, and nothing is written over it. A segment that ends
// before the record is damage to the whole store (see fatal). The caller
// holds mu.
func (s *Store) read(key string) (ownership.Object, error) {
	e, ok := s.idx.get(key)
	if !ok {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, ownership.ErrNotFound)
	}
	sg := s.seg
	buf := make([]byte, e.size)
	if err := preadFull(sg.fd, sg.path, buf, e.off); err != nil {
		if errors.Is(err, errShortFile) {
			err = s.fatal(fmt.Errorf("%w: %s ends before the record at offset %d that the index names: %w", ErrCorrupt, sg.path, e.off, err), sg.path)
		}
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, err)
	}
	r, err := parseRecord(buf)
	if err == nil && (r.kind != kindPut || r.etag != e.etag || !bytes.Equal(r.key, []byte(key))) {
		err = fmt.Errorf("%w: not the record the index names", ErrCorrupt)
	}
	if err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w: %s at offset %d: %w", key, ownership.ErrDamaged, sg.path, e.off, err)
	}
	// r.body aliases buf, which no one else holds.
	return ownership.Object{Body: r.body, ETag: r.etag.ETag()}, nil
}

// Put writes an object under a condition; see ownership.Bucket. It joins a
// group commit (commit.go) and returns once its batch is durable.
func (s *Store) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return "", fmt.Errorf("dirstore: put: %w", err)
	}
	if cond.Kind > ownership.ReplaceOnly {
		return "", fmt.Errorf("dirstore: put %q with %s: %w", key, cond, errBadCondition)
	}
	if len(body) > maxBodyLen {
		return "", fmt.Errorf("dirstore: put %q: body of %d bytes, over %d", key, len(body), maxBodyLen)
	}
	w := &write{ctx: ctx, op: "put", kind: kindPut, key: key, body: body, cond: cond, etag: newETagBits()}
	if err := s.submit(ctx, w); err != nil {
		return "", err
	}
	return w.etag.ETag(), nil
}

// Delete removes an object under a condition; see ownership.Bucket. It
// commits like a Put; an unconditional delete of a missing key writes
// nothing and lands.
func (s *Store) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	if err := ownership.ValidateKey(key); err != nil {
		return fmt.Errorf("dirstore: delete: %w", err)
	}
	if cond.Kind != ownership.Unconditional && cond.Kind != ownership.ReplaceOnly {
		return fmt.Errorf("dirstore: delete %q with %s: %w", key, cond, errBadCondition)
	}
	w := &write{ctx: ctx, op: "delete", kind: kindDelete, key: key, cond: cond, etag: newETagBits()}
	return s.submit(ctx, w)
}

func (s *Store) submit(ctx context.Context, w *write) error {
	if err := ctx.Err(); err != nil {
		return unknown(w.op, w.key, err)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.brokenErr(); err != nil {
		return w.fail(err)
	}
	return s.commit(ctx, w)
}

// List returns one page of keys; see ownership.Bucket. Pages hold at most
// ownership.DefaultListLimit keys, as S3 pages do. Like Get, it catches up
// first; the page is taken from the index at one moment.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return ownership.ListPage{}, unknown("list", prefix, err)
	}
	if s.closed.Load() {
		return ownership.ListPage{}, ErrClosed
	}
	if err := s.brokenErr(); err != nil {
		return ownership.ListPage{}, fmt.Errorf("dirstore: list %q: %w", prefix, err)
	}
	if limit <= 0 || limit > ownership.DefaultListLimit {
		limit = ownership.DefaultListLimit
	}
	s.mu.RLock()
	fresh, err := s.fresh()
	if err == nil && fresh && !s.idx.dirty {
		page := s.page(prefix, startAfter, limit)
		s.mu.RUnlock()
		return page, nil
	}
	s.mu.RUnlock()
	if err != nil {
		return ownership.ListPage{}, fmt.Errorf("dirstore: list %q: %w", prefix, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUp(false); err != nil {
		return ownership.ListPage{}, fmt.Errorf("dirstore: list %q: %w", prefix, s.fatal(err, s.segPath()))
	}
	s.idx.sorted()
	return s.page(prefix, startAfter, limit), nil
}

// page cuts one page from the sorted keys. The caller holds mu and the
// index is not dirty.
func (s *Store) page(prefix, startAfter string, limit int) ownership.ListPage {
	keys := s.idx.keys
	i := max(sort.SearchStrings(keys, prefix), sort.Search(len(keys), func(i int) bool { return keys[i] > startAfter }))
	var page ownership.ListPage
	for ; i < len(keys) && strings.HasPrefix(keys[i], prefix); i++ {
		if len(page.Entries) == limit {
			page.Truncated = true
			break
		}
		e := s.idx.m[keys[i]]
		page.Entries = append(page.Entries, ownership.ListEntry{Key: keys[i], ETag: e.etag.ETag(), Size: e.bodyLen()})
	}
	return page
}
