package kvrun

// The filter is a bloom filter over every key of a run, tombstones
// included, so that a Get of a key the run does not hold usually reads no
// block. It is blocked: the probes of one key all fall in one 64-byte line
// of the filter, which a warm Get then reads from memory once, however
// large the filter (about 1% false positives at 10 bits a key, against
// 0.8% for probes spread over the whole filter).

const (
	// filterSeed seeds the filter's hash. Changing it changes the format.
	filterSeed = 0x6b7672756e // "kvrun"
	// filterLine is the bytes of one line of the filter.
	filterLine = 64
	// maxProbes bounds the probes a filter may ask for; a reader refuses
	// more as damage.
	maxProbes = 30
	// probeMul steps a key's probes through its line (2^32/φ, odd).
	probeMul = 0x9e3779b9
)

// hashKey is the filter's hash of key: MurmurHash64A with filterSeed.
func hashKey(key string) uint64 { return murmur64A(key, filterSeed) }

// murmur64A is MurmurHash64A (Austin Appleby's 64-bit MurmurHash2): well
// mixed, fast on short keys, and defined byte by byte, which a filter
// kept in a bucket for years needs.
func murmur64A(key string, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := seed ^ uint64(len(key))*m
	for len(key) >= 8 {
		k := uint64(key[0]) | uint64(key[1])<<8 | uint64(key[2])<<16 | uint64(key[3])<<24 |
			uint64(key[4])<<32 | uint64(key[5])<<40 | uint64(key[6])<<48 | uint64(key[7])<<56
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
		key = key[8:]
	}
	if len(key) > 0 {
		for i := len(key) - 1; i >= 0; i-- {
			h ^= uint64(key[i]) << (8 * i)
		}
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// probes is the number of bits a filter of bitsPerKey bits a key sets for
// each key: bitsPerKey·ln 2 rounded down, which minimises false positives.
func probes(bitsPerKey int) int {
	k := bitsPerKey * 69 / 100
	return min(max(k, 1), maxProbes)
}

// filterBytes is the size of the bit array for n keys: whole lines.
func filterBytes(n, bitsPerKey int) int {
	if n == 0 {
		return 0
	}
	lines := (n*bitsPerKey + 8*filterLine - 1) / (8 * filterLine)
	return max(lines, 1) * filterLine
}

// line is the line of bits (a whole number of lines long) that hash h
// probes: the high half of h scaled to the number of lines.
func line(bits []byte, h uint64) []byte {
	n := uint64(len(bits) / filterLine)
	i := (h >> 32) * n >> 32
	return bits[i*filterLine : (i+1)*filterLine]
}

// addHash sets the k bits of hash h in bits.
func addHash(bits []byte, k int, h uint64) {
	l, p := line(bits, h), uint32(h)
	for range k {
		b := p >> 23 // the top 9 bits: one of the line's 512
		l[b/8] |= 1 << (b % 8)
		p *= probeMul
	}
}

// filter is a decoded filter; bits aliases the bytes fetched.
type filter struct {
	bits []byte
	k    int
	size int64 // what the cache is charged
}

// mayContain says whether the key of hash h may be in the filter; false
// means it is not.
func (f *filter) mayContain(h uint64) bool {
	if len(f.bits) == 0 {
		return true
	}
	l, p := line(f.bits, h), uint32(h)
	for range f.k {
		b := p >> 23
		if l[b/8]&(1<<(b%8)) == 0 {
			return false
		}
		p *= probeMul
	}
	return true
}
