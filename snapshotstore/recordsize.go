package snapshotstore

import (
	"iter"
	"strconv"
)

// SnapshotRecordBytes is at least the bytes of s's snapshot record's key,
// value and headers (EncodeRecord): exactly them without timers, and with
// timers a bound of their header (TimersHeaderBytes and TimerBytes: up to 6
// times a name's length), which only encoding them measures exactly. The producer's
// record batch limit (SnapshotLimiter) applies to this plus the batch's
// framing; a caller near the limit measures EncodeRecord's record itself.
func SnapshotRecordBytes(s Snapshot) int {
	var offset [20]byte // the offset header's decimal, as encodeInto writes it
	n := len(s.Key) + len(s.Value) + len(HeaderOffset) + len(strconv.AppendInt(offset[:0], s.Offset, 10)) + len(HeaderFormat) + len(formatVersion)
	return n + TimersBytes(s.Value == nil, func(yield func(string) bool) {
		for _, t := range s.Timers {
			if !yield(t.Name) {
				return
			}
		}
	})
}

// TimersBytes bounds what the timers named by names add to a snapshot
// record (nothing without timers): their header (TimersHeaderBytes and
// TimerBytes each), and for a deleted state (deleted) HeaderDeleted, which
// keeps the record from being a tombstone. Every name is counted: a
// caller passing a name twice gets a looser bound.
func TimersBytes(deleted bool, names iter.Seq[string]) int {
	n := 0
	for name := range names {
		n += TimerBytes(name)
	}
	if n == 0 {
		return 0
	}
	n += TimersHeaderBytes
	if deleted {
		n += len(HeaderDeleted) + len(deletedBytes)
	}
	return n
}

// TimersHeaderBytes is the timers header's bytes beyond its timers' own
// (TimerBytes): its key and the JSON array's brackets.
const TimersHeaderBytes = len(HeaderTimers) + 2

// TimerBytes bounds one timer's bytes in the timers header: a JSON object
// with its escaped name (at most 6 bytes per byte of it, as \u00XX), a Unix
// millisecond time (at most 20 bytes) and a separating comma.
func TimerBytes(name string) int { return len(`{"name":"","at":},`) + 6*len(name) + 20 }
