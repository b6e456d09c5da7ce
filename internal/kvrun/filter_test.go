package kvrun

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// TestMurmur64A checks the hash against SMHasher's verification value for
// MurmurHash64A: hash the keys {}, {0}, {0, 1}, … {0, …, 254} with seeds
// 256 down to 1, hash the 256 results' bytes with seed 0, and take its low
// 32 bits. The filter depends on it bit for bit.
func TestMurmur64A(t *testing.T) {
	key := make([]byte, 256)
	hashes := make([]byte, 0, 256*8)
	for i := range 256 {
		key[i] = byte(i)
		hashes = binary.LittleEndian.AppendUint64(hashes, murmur64A(string(key[:i]), uint64(256-i)))
	}
	if got := uint32(murmur64A(string(hashes), 0)); got != 0x1f0d3804 {
		t.Errorf("verification value %#08x, want 0x1f0d3804", got)
	}
}

// TestFilter: no false negatives, and false positives near what the size
// promises.
func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		keys, bitsPerKey int
		maxFP            float64
	}{
		{1, DefaultBitsPerKey, 0.01},
		{1000, DefaultBitsPerKey, 0.02},
		{100_000, DefaultBitsPerKey, 0.0125},
		{100_000, 20, 0.001},
		{100_000, 4, 0.2},
	} {
		t.Run(fmt.Sprintf("%d keys, %d bits", tc.keys, tc.bitsPerKey), func(t *testing.T) {
			f := &filter{bits: make([]byte, filterBytes(tc.keys, tc.bitsPerKey)), k: probes(tc.bitsPerKey)}
			for i := range tc.keys {
				addHash(f.bits, f.k, hashKey(fmt.Sprintf("user/%d", i)))
			}
			for i := range tc.keys {
				if !f.mayContain(hashKey(fmt.Sprintf("user/%d", i))) {
					t.Fatalf("user/%d added, not found", i)
				}
			}
			const probesN = 200_000
			fp := 0
			for i := range probesN {
				if f.mayContain(hashKey(fmt.Sprintf("user/%d/x", i))) {
					fp++
				}
			}
			rate := float64(fp) / probesN
			t.Logf("%d probes over %d bytes: %.3f%% false positives", f.k, len(f.bits), 100*rate)
			if rate > tc.maxFP {
				t.Errorf("%.3f%% false positives, want at most %.3f%%", 100*rate, 100*tc.maxFP)
			}
		})
	}
}
