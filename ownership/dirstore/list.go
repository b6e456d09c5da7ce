package dirstore

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// List returns one page of keys; see ownership.Bucket. Pages hold at most
// ownership.DefaultListLimit keys, as S3 pages do.
//
// It walks only the directory the prefix determines, visiting entries in
// key order (see keypath.go) and skipping subtrees that hold no key after
// startAfter, so it stops as soon as the page is full. Objects written or
// deleted during the walk may or may not appear, as with S3; every key it
// does return was present, whole, while the walk ran.
//
// Cost: a page reads every entry of each directory it enters (directories
// come back unsorted), so paging through one directory of n keys reads
// about n*n/1000 entries in all. That is fine for the thousands of keys a
// single machine's bucket holds; an index would be the next step.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return ownership.ListPage{}, unknown("list", prefix, err)
	}
	if s.closed.Load() {
		return ownership.ListPage{}, ErrClosed
	}
	if limit <= 0 || limit > ownership.DefaultListLimit {
		limit = ownership.DefaultListLimit
	}
	if len(prefix) > ownership.MaxKeyLen {
		return ownership.ListPage{}, nil // no key is that long
	}
	dir, base := prefixDir(prefix)
	start := s.objects
	if dir != "" {
		start += "/" + dir
	}
	w := walker{ctx: ctx, prefix: prefix, startAfter: startAfter, want: limit + 1}
	if err := w.walk(start, base); err != nil {
		if ctx.Err() != nil {
			return ownership.ListPage{}, unknown("list", prefix, err)
		}
		return ownership.ListPage{}, fmt.Errorf("dirstore: list %q: %w", prefix, err)
	}
	page := ownership.ListPage{Entries: w.entries}
	if len(page.Entries) > limit {
		page.Entries, page.Truncated = page.Entries[:limit], true
	}
	return page, nil
}

type walker struct {
	ctx        context.Context
	prefix     string
	startAfter string
	// want is one more than the page size: finding that extra key is how
	// the walk knows the page is truncated.
	want    int
	entries []ownership.ListEntry
}

type dirEntry struct {
	name    string
	kind    byte
	seg     string
	sortKey string
}

// walk visits the directory dir, every key beneath which starts with base,
// in key order. A directory that does not exist (never made, or pruned by a
// delete meanwhile) holds no keys.
func (w *walker) walk(dir, base string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	entries := make([]dirEntry, 0, len(names))
	for _, name := range names {
		// Names keyPath never makes are not objects; skip them.
		if kind, seg, ok := parseComponent(name); ok {
			entries = append(entries, dirEntry{name, kind, seg, sortKey(kind, seg)})
		}
	}
	slices.SortFunc(entries, func(a, b dirEntry) int { return strings.Compare(a.sortKey, b.sortKey) })

	for _, e := range entries {
		if len(w.entries) >= w.want {
			return nil
		}
		if e.kind == kindObject {
			key := base + e.seg
			if key <= w.startAfter || !strings.HasPrefix(key, w.prefix) || ownership.ValidateKey(key) != nil {
				continue
			}
			entry, ok, err := readEntry(dir+"/"+e.name, key)
			if err != nil {
				return err
			}
			if ok {
				w.entries = append(w.entries, entry)
			}
			continue
		}
		// Every key beneath this directory starts with sub.
		sub := base + e.seg
		if e.kind == kindDir {
			sub += "/"
		}
		if !strings.HasPrefix(sub, w.prefix) && !strings.HasPrefix(w.prefix, sub) {
			continue // no key beneath has the prefix
		}
		if sub <= w.startAfter && !strings.HasPrefix(w.startAfter, sub) {
			continue // every key beneath sorts before startAfter
		}
		if len(sub) > ownership.MaxKeyLen {
			continue // no valid key beneath
		}
		if err := w.walk(dir+"/"+e.name, sub); err != nil {
			return err
		}
	}
	return nil
}

// readEntry reads the list entry of the object file p. It reports false if
// the object was deleted since its directory was read.
func readEntry(p, key string) (ownership.ListEntry, bool, error) {
	etag, size, err := readHeader(p)
	if isNotExist(err) {
		return ownership.ListEntry{}, false, nil
	}
	if err != nil {
		return ownership.ListEntry{}, false, err
	}
	return ownership.ListEntry{Key: key, ETag: etag, Size: size - int64(headerLen)}, true, nil
}
