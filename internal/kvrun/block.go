package kvrun

import (
	"fmt"
	"sort"
	"strings"
	"unsafe"
)

// block is a decoded data block: its entries in key order. The keys are
// substrings of one string; the values alias the block's bytes, which the
// block keeps.
type block struct {
	ents []Entry
	size int64 // what the cache is charged
}

// search returns the index of the first entry whose key is not below key.
func (b *block) search(key string) int {
	return sort.Search(len(b.ents), func(i int) bool { return b.ents[i].Key >= key })
}

// decodeBlock decodes a data block whose checksum has been checked. It
// checks what the index promises of it: its keys ascend, come after after
// and end at last, and for the first block, start at first. It reads the
// block twice, to size its allocations exactly before making them.
func decodeBlock(raw []byte, after, last string, isFirst bool, first string) (*block, error) {
	// First pass: count the entries and their keys' bytes, checking every
	// length against what is left.
	n, keyBytes, prevLen := 0, 0, uint64(0)
	for d := (decoder{b: raw}); len(d.b) > 0; {
		shared, unshared, vl := d.uvarint(), d.uvarint(), d.uvarint()
		vlen, tomb := vl>>1, vl&1 == 1
		d.bytes(unshared)
		d.bytes(vlen)
		klen := shared + unshared
		switch {
		case d.bad:
			return nil, fmt.Errorf("entry %d cut short", n)
		case shared > prevLen || unshared == 0 || klen > MaxKeyLen:
			return nil, fmt.Errorf("entry %d: key of %d+%d bytes after one of %d", n, shared, unshared, prevLen)
		case vlen > MaxValueLen || tomb && vlen > 0:
			return nil, fmt.Errorf("entry %d: value of %d bytes (tombstone %t)", n, vlen, tomb)
		}
		n++
		keyBytes += int(klen)
		prevLen = klen
	}
	if n == 0 {
		return nil, fmt.Errorf("no entries")
	}

	// Second pass: build the keys in one string and the entries.
	ents := make([]Entry, n)
	ends := make([]int, n+1) // entry i's key is keys[ends[i]:ends[i+1]]
	var sb strings.Builder
	sb.Grow(keyBytes)
	d := decoder{b: raw}
	for i := range ents {
		shared, unshared, vl := d.uvarint(), d.uvarint(), d.uvarint()
		suffix := d.bytes(unshared)
		if i > 0 {
			sb.WriteString(sb.String()[ends[i-1] : ends[i-1]+int(shared)])
		}
		sb.Write(suffix)
		ends[i+1] = sb.Len()
		if vl&1 == 1 {
			ents[i].Tombstone = true
		} else {
			ents[i].Value = d.bytes(vl >> 1)
		}
	}
	keys := sb.String()
	prev := after
	for i := range ents {
		k := keys[ends[i]:ends[i+1]]
		if k <= prev { // keys are not empty: any comes after ""
			return nil, fmt.Errorf("entry %d: key %.64q not after %.64q", i, k, prev)
		}
		ents[i].Key, prev = k, k
	}
	switch {
	case isFirst && ents[0].Key != first:
		return nil, fmt.Errorf("first key %.64q, index says %.64q", ents[0].Key, first)
	case prev != last:
		return nil, fmt.Errorf("last key %.64q, index says %.64q", prev, last)
	}
	size := int64(unsafe.Sizeof(block{})) + int64(cap(raw)) + int64(len(keys)) + int64(n)*int64(unsafe.Sizeof(Entry{}))
	return &block{ents: ents, size: size}, nil
}
