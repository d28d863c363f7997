package partitionflow

// The partition's FIFOs (held keys, the tracker's holds, the group commit's
// writes) are slices with a moving head; these reclaim the consumed prefix
// in place: a fresh array per compaction cost ~100 bytes per entry at a
// million keys.

// reclaim returns q and head with the consumed prefix q[:head] reclaimed,
// once the queue is empty or the prefix is over half of it (and past 1024
// entries): each entry moves O(1) times on average.
func reclaim[T any](q []T, head int) ([]T, int) {
	switch {
	case head == len(q):
		return q[:0], 0
	case head > 1024 && head*2 > len(q):
		return shiftOut(q, head), 0
	}
	return q, head
}

// shiftOut moves q[head:] to the front of q and clears the slots it leaves
// (no pinned entry).
func shiftOut[T any](q []T, head int) []T {
	n := copy(q, q[head:])
	clear(q[n:])
	return q[:n]
}
