package actorhost

import (
	"context"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Test hooks for the external tests of the storage layout.

// EncodeFormat1 is a state object's payload as actors stored it before
// runs (format 1): the pairs alone.
func EncodeFormat1(kv map[string][]byte) []byte { return encodePairs(kv) }

// Head is what a state object's head lists.
type Head struct {
	Format    int      // 1 (pairs alone) or 2 (runs)
	Runs      int      // the runs it lists
	Listed    []string // the keys of the run objects it lists: parts and manifests
	Manifests []string // those of the manifests alone
	Garbage   []string // those of the garbage it lists
}

// HeadOf reads a state object, and the manifests it lists from b.
func HeadOf(ctx context.Context, b ownership.Bucket, a ownership.Actor, body []byte) (Head, error) {
	s, p, err := decodeStateObject(body)
	if err != nil {
		return Head{}, err
	}
	if err := s.loadManifests(ctx, a, runOpener{b: b, timeout: time.Minute, reads: &storageReads{}}); err != nil {
		return Head{}, err
	}
	h := Head{Format: 1, Runs: len(s.runs)}
	if string(p[:min(len(p), len(headMagic))]) == headMagic {
		h.Format = 2
	}
	for _, r := range s.runs {
		for _, pt := range r.parts {
			h.Listed = append(h.Listed, ownership.RunKey(a, pt.gen, pt.n))
		}
		if r.man != nil {
			key := ownership.RunKey(a, r.man.gen, r.man.n)
			h.Listed, h.Manifests = append(h.Listed, key), append(h.Manifests, key)
		}
	}
	for _, g := range s.garbage {
		h.Garbage = append(h.Garbage, ownership.RunKey(a, g.gen, g.n))
	}
	return h, nil
}
