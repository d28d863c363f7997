package snapshotstore

import "strconv"

// SnapshotRecordBytes is at least the bytes of s's snapshot record's key,
// value and headers (EncodeRecord): exactly them without timers, and with
// timers a bound of their header (TimersHeaderBytes and TimerBytes: up to 6
// times a name's length), which only encoding them measures exactly. The producer's
// record batch limit (SnapshotLimiter) applies to this plus the batch's
// framing; a caller near the limit measures EncodeRecord's record itself.
func SnapshotRecordBytes(s Snapshot) int {
	var offset [20]byte // the offset header's decimal, as encodeInto writes it
	n := len(s.Key) + len(s.Value) + len(HeaderOffset) + len(strconv.AppendInt(offset[:0], s.Offset, 10)) + len(HeaderFormat) + len(formatVersion)
	if len(s.Timers) > 0 {
		n += TimersHeaderBytes
		for _, t := range s.Timers {
			n += TimerBytes(t.Name)
		}
		if s.Value == nil {
			n += DeletedHeaderBytes // a deleted key's record with timers
		}
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

// DeletedHeaderBytes is the bytes HeaderDeleted adds to a deleted key's
// record with timers (its key and value).
const DeletedHeaderBytes = len(HeaderDeleted) + 1
