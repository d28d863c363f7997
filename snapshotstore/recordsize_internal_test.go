package snapshotstore

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/recbytes"
)

// SnapshotRecordBytes is the snapshot record's size exactly without
// timers, and never below it with them (names that JSON escapes included).
func TestSnapshotRecordBytes(t *testing.T) {
	at := time.UnixMilli(math.MaxInt64 / 2)
	for _, s := range []Snapshot{
		{Key: "k", Value: []byte("v"), Offset: 0},
		{Key: "", Value: nil, Offset: 9},
		{Key: "acct-1", Value: []byte(strings.Repeat("x", 1000)), Offset: math.MaxInt64},
		{Key: "k", Value: []byte("v"), Offset: 12, Timers: []Timer{{Name: "t", At: at}}},
		{Key: "k", Value: []byte("v"), Offset: 12, Timers: []Timer{{Name: "a\"<>&\x01é", At: at}, {Name: "", At: time.UnixMilli(-1)}}},
	} {
		got, real := SnapshotRecordBytes(s), recbytes.Of(EncodeRecord("snaps", 0, s))
		if len(s.Timers) == 0 && got != real || got < real {
			t.Errorf("SnapshotRecordBytes(%+v) = %d, the record has %d", s, got, real)
		}
	}
}
