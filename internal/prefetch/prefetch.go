// Package prefetch asks the CPU to bring memory into its cache before it is
// read, without waiting for it.
//
// A key actor folds its records in offset order, but a poll batch's records
// sit in kgo's decode slab in the partition's order: a key's next record is
// a whole batch's worth of other keys' records further on, far past what the
// hardware prefetcher follows, and reading it waited on main memory (the
// first read of a record's Offset was ~6 % of the worker's CPU at 10k keys,
// issue 11). A plain Go read of the next record would wait just the same:
// loads retire in order. A prefetch instruction does not block.
package prefetch

import "unsafe"

// Line prefetches the cache line holding p. On architectures without an
// implementation (neither amd64 nor arm64) it does nothing. p need not be
// valid memory: a prefetch never faults.
func Line(p unsafe.Pointer) { line(p) }

// Bytes prefetches b's first maxBytes bytes (a record value's start is what
// a decoder reads first; the hardware prefetcher follows from there).
func Bytes(b []byte, maxBytes int) {
	n := min(len(b), maxBytes)
	for off := 0; off < n; off += 64 {
		line(unsafe.Pointer(&b[off]))
	}
}
