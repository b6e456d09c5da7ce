package dirstore

import (
	"slices"
	"strings"
)

// entry locates the current version of one key in the segment. The index
// holds keys and locations only; bodies stay on disk.
type entry struct {
	off    int64  // of the record in the segment
	size   uint32 // of the whole record
	keyLen uint16
	etag   etagBits
}

func (e entry) bodyLen() int64 { return int64(e.size) - recHeaderLen - int64(e.keyLen) }

// index maps each present key to its entry and keeps the keys in byte
// order for List. New keys are appended to added and deleted ones only
// leave the map; sorted merges both into keys when a listing needs it, so
// a write costs a map update and a listing after n writes an O(n log n)
// sort of what changed plus one pass over the keys.
//
// Invariant: when dirty is false, keys holds exactly the keys of m, sorted.
type index struct {
	m     map[string]entry
	keys  []string
	added []string
	dirty bool
	// live is the size of every record the index points at: the bytes a
	// compaction would keep.
	live int64
}

func newIndex() *index { return &index{m: make(map[string]entry)} }

func (x *index) get(key string) (entry, bool) {
	e, ok := x.m[key]
	return e, ok
}

func (x *index) put(key string, e entry) {
	if old, ok := x.m[key]; ok {
		x.live -= int64(old.size)
	} else {
		x.added = append(x.added, key)
		x.dirty = true
	}
	x.m[key] = e
	x.live += int64(e.size)
}

func (x *index) remove(key string) {
	if old, ok := x.m[key]; ok {
		x.live -= int64(old.size)
		delete(x.m, key)
		x.dirty = true
	}
}

// sorted returns every present key in byte order. The caller must hold
// the Store's mutex for writing if the index is dirty.
func (x *index) sorted() []string {
	if !x.dirty {
		return x.keys
	}
	absent := func(k string) bool { _, ok := x.m[k]; return !ok }
	kept := slices.DeleteFunc(x.keys, absent)
	added := slices.DeleteFunc(x.added, absent)
	slices.Sort(added)
	merged := make([]string, 0, len(kept)+len(added))
	i, j := 0, 0
	for i < len(kept) || j < len(added) {
		var k string
		if j == len(added) || i < len(kept) && strings.Compare(kept[i], added[j]) <= 0 {
			k, i = kept[i], i+1
		} else {
			k, j = added[j], j+1
		}
		// A key deleted and written again is in both lists; a key
		// written, deleted and written again is in added twice.
		if len(merged) == 0 || merged[len(merged)-1] != k {
			merged = append(merged, k)
		}
	}
	x.keys, x.added, x.dirty = merged, nil, false
	return x.keys
}
