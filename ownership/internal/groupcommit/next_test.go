package groupcommit

import (
	"slices"
	"testing"
)

// TestNext: the oldest write first whatever its size, the small ones
// ahead of big ones queued before them, big ones in order while they fit,
// and the rest left in queue order.
func TestNext(t *testing.T) {
	id := func(n int) int { return n }
	// Sizes double as names: small is <= 10, the batch bound 100.
	batch, left := Next([]int{50, 60, 5, 40, 7, 30, 9}, id, 10, 100)
	if want := []int{50, 5, 7, 9}; !slices.Equal(batch, want) {
		t.Errorf("batch %v, want %v", batch, want)
	}
	if want := []int{60, 40, 30}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	batch, left = Next([]int{500, 1, 2}, id, 10, 100)
	if !slices.Equal(batch, []int{500}) || !slices.Equal(left, []int{1, 2}) {
		t.Errorf("an oversized oldest write is a batch of its own: batch %v, left %v", batch, left)
	}
	if batch, left = Next[int](nil, id, 10, 100); batch != nil || left != nil {
		t.Errorf("an empty queue: %v, %v", batch, left)
	}
}
