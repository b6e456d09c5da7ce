package groupcommit

// Next splits queue into the next batch and what is left of the queue:
// the oldest write, then every small write queued (of size at most small),
// then bigger writes in queue order while the batch stays within max
// bytes. So a small write (a lease renewal, an actor's head) waits for at
// most the batch running when it queued, never behind a queue of big ones
// (runs, merge parts), and the oldest write, whatever its size, is always
// in the next batch. Taking writes out of their queue order is sound:
// every write queued is concurrent with every other (none has been
// answered), and the conditions are checked in the batch's order.
func Next[W any](queue []W, size func(W) int, small, max int) (batch, left []W) {
	if len(queue) == 0 {
		return nil, nil
	}
	batch, left = queue[:1:1], queue[1:1]
	bytes := size(batch[0])
	// Small writes first, then big ones until the first that does not fit.
	var big []W
	for _, w := range queue[1:] {
		switch n := size(w); {
		case n > small:
			big = append(big, w)
		case bytes+n <= max:
			batch = append(batch, w)
			bytes += n
		default:
			left = append(left, w)
		}
	}
	for i, w := range big {
		if bytes+size(w) > max {
			left = append(left, big[i:]...)
			break
		}
		batch = append(batch, w)
		bytes += size(w)
	}
	return batch, left
}
