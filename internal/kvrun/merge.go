package kvrun

import "fmt"

// Merge iterates the union of its, newest first: on equal keys the entry
// of the earliest iterator wins and the others are skipped, tombstones
// included (a tombstone that wins hides the key; the caller drops it). All
// of its must yield the same direction, ascending, or descending if
// reverse; an iterator that yields a key out of that order ends the merge
// with an error. An error of any of its ends the merge with it, before an
// entry that could be wrong is yielded.
//
// Each Next compares the head of every iterator: it is for the few
// iterators of one actor's storage (a table in memory and some runs).
func Merge(reverse bool, its ...Iterator) Iterator {
	switch len(its) {
	case 0:
		return &sliceIter{}
	case 1:
		return its[0]
	}
	return &mergeIter{its: its, heads: make([]Entry, len(its)), live: make([]bool, len(its)), reverse: reverse}
}

type mergeIter struct {
	its     []Iterator
	heads   []Entry // the next entry of each iterator, if live
	live    []bool
	reverse bool
	started bool
	err     error
}

func (m *mergeIter) Err() error { return m.err }

func (m *mergeIter) Next() (Entry, bool) {
	if !m.started {
		m.started = true
		for i := range m.its {
			m.advance(i)
		}
	}
	// Invariant: every iterator has a head or ended without an error, so
	// the least head is the next entry of the union.
	if m.err != nil {
		return Entry{}, false
	}
	best := -1
	for i, ok := range m.live {
		if ok && (best < 0 || m.before(m.heads[i].Key, m.heads[best].Key)) {
			best = i
		}
	}
	if best < 0 {
		return Entry{}, false
	}
	e := m.heads[best]
	for i, ok := range m.live {
		if ok && m.heads[i].Key == e.Key {
			m.advance(i)
		}
	}
	return e, true
}

// before says whether key a comes before key b in the merge's direction.
func (m *mergeIter) before(a, b string) bool {
	if m.reverse {
		return a > b
	}
	return a < b
}

// advance moves iterator i to its next entry.
func (m *mergeIter) advance(i int) {
	e, ok := m.its[i].Next()
	if !ok {
		m.live[i] = false
		if err := m.its[i].Err(); err != nil && m.err == nil {
			m.err = fmt.Errorf("merge: iterator %d: %w", i, err)
		}
		return
	}
	if m.live[i] && !m.before(m.heads[i].Key, e.Key) {
		m.live[i] = false
		if m.err == nil {
			m.err = fmt.Errorf("merge: iterator %d yields %.64q after %.64q", i, e.Key, m.heads[i].Key)
		}
		return
	}
	m.heads[i], m.live[i] = e, true
}
