package kvrun

import (
	"context"
	"sort"
)

// runIter iterates a run's window [lo, hi) (hi == "": unbounded).
type runIter struct {
	r       *Reader
	ctx     context.Context
	lo, hi  string
	reverse bool

	done bool
	err  error
	ix   *index
	blk  *block // the block at b, nil before the first Next
	b, i int    // the current block and the entry in it
}

func (it *runIter) Err() error { return it.err }

func (it *runIter) Next() (Entry, bool) {
	if it.done {
		return Entry{}, false
	}
	var ok bool
	if it.blk == nil {
		ok = it.seek()
	} else {
		ok = it.step()
	}
	if ok {
		e := it.blk.ents[it.i]
		if it.reverse && e.Key >= it.lo || !it.reverse && (it.hi == "" || e.Key < it.hi) {
			return e, true
		}
	}
	it.done, it.ix, it.blk = true, nil, nil
	return Entry{}, false
}

// seek positions the iterator at its window's first entry in its
// direction, or at an entry past the window's other end (Next then stops),
// and says whether there is one.
func (it *runIter) seek() bool {
	if it.r.err != nil {
		it.err = it.r.err
		return false
	}
	ix, err := it.r.index(it.ctx)
	if err != nil {
		it.err = err
		return false
	}
	it.ix = ix
	n := len(ix.keys)
	if !it.reverse {
		// The first block whose last key is not below lo holds the first
		// key of the window, if any block does.
		it.b = sort.SearchStrings(ix.keys, it.lo)
		if it.b == n || !it.load() {
			return false
		}
		it.i = it.blk.search(it.lo)
		return true
	}
	// The first block whose last key is not below hi holds the last key
	// below hi, or else the block before it does.
	it.b = n - 1
	if it.hi != "" {
		it.b = min(sort.SearchStrings(ix.keys, it.hi), n-1)
	}
	if !it.load() {
		return false
	}
	it.i = len(it.blk.ents) - 1
	if it.hi != "" {
		it.i = it.blk.search(it.hi) - 1
	}
	if it.i < 0 {
		return it.stepBlock()
	}
	return true
}

// step moves to the next entry in the iterator's direction.
func (it *runIter) step() bool {
	if it.reverse {
		it.i--
		if it.i < 0 {
			return it.stepBlock()
		}
		return true
	}
	it.i++
	if it.i == len(it.blk.ents) {
		return it.stepBlock()
	}
	return true
}

// stepBlock moves to the first entry in the iterator's direction of the
// next block in that direction.
func (it *runIter) stepBlock() bool {
	if it.reverse {
		if it.b == 0 {
			return false
		}
		it.b--
		if !it.load() {
			return false
		}
		it.i = len(it.blk.ents) - 1
		return true
	}
	if it.b == len(it.ix.keys)-1 {
		return false
	}
	it.b++
	if !it.load() {
		return false
	}
	it.i = 0
	return true
}

// load reads block it.b.
func (it *runIter) load() bool {
	blk, err := it.r.block(it.ctx, it.ix, it.b)
	if err != nil {
		it.err = err
		return false
	}
	it.blk = blk
	return true
}
