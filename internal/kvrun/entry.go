package kvrun

import "sort"

// Entry is one key of a run: its value, or a tombstone.
//
// An Entry a Reader returns shares its bytes with the Cache: Value must not
// be modified (its capacity ends with it, so appending to it copies).
type Entry struct {
	Key   string
	Value []byte
	// Tombstone says the key was deleted: the entry hides the key in older
	// runs. A tombstone has no value.
	Tombstone bool
}

// Iterator yields entries in key order, ascending or descending. One
// goroutine uses an Iterator at a time.
type Iterator interface {
	// Next returns the next entry and true, or false once the window is
	// done or an error ended it.
	Next() (Entry, bool)
	// Err is the error that ended the iteration; nil if it reached the
	// end of its window, or has not ended yet.
	Err() error
}

// IterOptions selects a window of keys: those that start with Prefix, from
// Start (inclusive) to End (exclusive), in byte order; an empty Start or
// End leaves that side unbounded, as in actors.ListOptions. Reverse yields
// them descending. A limit is the caller's: it stops calling Next.
type IterOptions struct {
	Prefix  string
	Start   string
	End     string
	Reverse bool
}

// bounds reduces the window to the keys in [lo, hi), hi == "" meaning
// unbounded; empty says no key can be in it.
func (o IterOptions) bounds() (lo, hi string, empty bool) {
	lo, hi = o.Start, o.End
	if o.Prefix > lo {
		lo = o.Prefix
	}
	if o.Prefix != "" {
		if pe := prefixEnd(o.Prefix); pe != "" && (hi == "" || pe < hi) {
			hi = pe
		}
	}
	return lo, hi, hi != "" && lo >= hi
}

// prefixEnd is the least key above every key that starts with p, or ""
// if there is none (p is all 0xff).
func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// IterSlice iterates the entries of es in the window opt selects. es must
// be sorted by key, strictly ascending (Merge reports it if not); the
// entries are yielded as they are, not copied. It is how a small sorted
// table in memory (the head's, an event's writes) joins runs in a Merge.
func IterSlice(es []Entry, opt IterOptions) Iterator {
	lo, hi, empty := opt.bounds()
	if empty {
		return &sliceIter{}
	}
	i := sort.Search(len(es), func(i int) bool { return es[i].Key >= lo })
	j := len(es)
	if hi != "" {
		j = i + sort.Search(len(es)-i, func(k int) bool { return es[i+k].Key >= hi })
	}
	return &sliceIter{es: es[i:j], reverse: opt.Reverse}
}

type sliceIter struct {
	es      []Entry
	reverse bool
}

func (it *sliceIter) Next() (Entry, bool) {
	n := len(it.es)
	if n == 0 {
		return Entry{}, false
	}
	var e Entry
	if it.reverse {
		e, it.es = it.es[n-1], it.es[:n-1]
	} else {
		e, it.es = it.es[0], it.es[1:]
	}
	return e, true
}

func (it *sliceIter) Err() error { return nil }
