package snapshotstore

// SnapshotRecordBytes is at least the bytes of s's snapshot record's key,
// value and headers (EncodeRecord): exactly them without timers, and with
// timers a bound of their header (TimersHeaderBytes: up to 6 times a name's
// length), which only encoding them measures exactly. The producer's
// record batch limit (SnapshotLimiter) applies to this plus the batch's
// framing; a caller near the limit measures EncodeRecord's record itself.
func SnapshotRecordBytes(s Snapshot) int {
	n := len(s.Key) + len(s.Value) + len(HeaderOffset) + digits(s.Offset) + len(HeaderFormat) + len(formatVersion)
	if len(s.Timers) > 0 {
		n += len(HeaderTimers) + TimersHeaderBytes(len(s.Timers), func(yield func(string) bool) {
			for _, t := range s.Timers {
				if !yield(t.Name) {
					return
				}
			}
		})
	}
	return n
}

// TimersHeaderBytes bounds the value of the timers header of n timers
// whose names names yields: each is a JSON object with its escaped name
// (at most 6 bytes per byte of it, as \u00XX) and a Unix millisecond time
// (at most 20 bytes), in a JSON array.
func TimersHeaderBytes(n int, names func(yield func(string) bool)) int {
	b := 2 + max(n-1, 0) // [ ] and the commas
	for name := range names {
		b += len(`{"name":"","at":}`) + 6*len(name) + 20
	}
	return b
}

// digits is the length of n in decimal.
func digits(n int64) int {
	d := 1
	if n < 0 {
		d, n = 2, -n
	}
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}
