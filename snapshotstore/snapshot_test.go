package snapshotstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// asRead makes an encoded record look read back from the log at offset.
func asRead(r *kgo.Record, offset int64) *kgo.Record {
	r.Offset = offset
	return r
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Snapshot
	}{
		{"state", Snapshot{Key: "acct-1", Value: []byte(`{"balance":10}`), Offset: 41}},
		{"tombstone carries its offset", Snapshot{Key: "acct-2", Value: nil, Offset: 7}},
		{"empty non-nil value is state, not a tombstone", Snapshot{Key: "acct-3", Value: []byte{}, Offset: 0}},
		{"binary key and value", Snapshot{Key: "\x00\xff k", Value: []byte{0, 1, 2, 255}, Offset: 1}},
		{"large offset", Snapshot{Key: "k", Value: []byte("v"), Offset: 1<<62 + 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := EncodeRecord("snaps", 4, tc.s)
			if rec.Topic != "snaps" || rec.Partition != 4 || string(rec.Key) != tc.s.Key {
				t.Fatalf("EncodeRecord addressed %s[%d] key %q", rec.Topic, rec.Partition, rec.Key)
			}
			got, ok, err := DecodeRecord(asRead(rec, 99))
			if err != nil || !ok {
				t.Fatalf("DecodeRecord = ok %v, err %v", ok, err)
			}
			if got.Key != tc.s.Key || got.Offset != tc.s.Offset || !bytes.Equal(got.Value, tc.s.Value) {
				t.Fatalf("round trip = %+v, want %+v", got, tc.s)
			}
			if got.Tombstone() != tc.s.Tombstone() || (got.Value == nil) != (tc.s.Value == nil) {
				t.Fatalf("round trip Tombstone() = %v (value nil %v), want %v", got.Tombstone(), got.Value == nil, tc.s.Tombstone())
			}
			if want := (Position{"snaps", 4, 99}); got.Source != want {
				t.Fatalf("Source = %v, want %v (the record's position)", got.Source, want)
			}
		})
	}
}

func TestTombstone(t *testing.T) {
	if !(Snapshot{Value: nil}).Tombstone() {
		t.Error("nil value must be a tombstone")
	}
	if (Snapshot{Value: []byte{}}).Tombstone() {
		t.Error("empty non-nil value must not be a tombstone")
	}
}

func TestEncodeRecordHeaders(t *testing.T) {
	rec := EncodeRecord("snaps", 0, Snapshot{Key: "k", Value: []byte("v"), Offset: 12})
	hs := map[string]string{}
	for _, h := range rec.Headers {
		if _, dup := hs[h.Key]; dup {
			t.Fatalf("header %s written twice", h.Key)
		}
		hs[h.Key] = string(h.Value)
	}
	if hs[HeaderOffset] != "12" || hs[HeaderFormat] != "2" {
		t.Fatalf("headers %v, want %s=12 and %s=2", hs, HeaderOffset, HeaderFormat)
	}
	if _, ok := hs[HeaderTimers]; ok {
		t.Fatalf("a snapshot without timers carries %s", HeaderTimers)
	}
	if _, ok := hs[HeaderKind]; ok {
		t.Fatalf("a snapshot record carries %s", HeaderKind)
	}
}

func TestDecodeRecordSkipsMarkers(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *kgo.Record
	}{
		{"the marker the transactional mode writes", markerRecord("snaps", 2, 500, markerMeta{})},
		{"marker kind header", &kgo.Record{Key: []byte("any"), Headers: []kgo.RecordHeader{{Key: HeaderKind, Value: []byte("offset-marker")}}}},
		{"marker key, no headers", &kgo.Record{Key: []byte(MarkerKey), Value: []byte("500")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok, err := DecodeRecord(tc.rec)
			if err != nil || ok {
				t.Fatalf("DecodeRecord(marker) = %+v, ok %v, err %v; want skipped (ok false, no error)", s, ok, err)
			}
		})
	}
}

func TestMarkerRecordShape(t *testing.T) {
	m := markerRecord("snaps", 2, 500, markerMeta{})
	if m.Topic != "snaps" || m.Partition != 2 || string(m.Key) != MarkerKey || string(m.Value) != "500" {
		t.Fatalf("marker = %s[%d] key %q value %q", m.Topic, m.Partition, m.Key, m.Value)
	}
}

func TestDecodeRecordErrorsNameTheRecord(t *testing.T) {
	base := func(headers ...kgo.RecordHeader) *kgo.Record {
		return &kgo.Record{Topic: "snaps", Partition: 3, Offset: 17, Key: []byte("acct-9"), Value: []byte("x"), Headers: headers}
	}
	format := kgo.RecordHeader{Key: HeaderFormat, Value: []byte("1")}
	for _, tc := range []struct {
		name    string
		rec     *kgo.Record
		mention string
		wrapped any
	}{
		{"missing offset header", base(format), "missing header " + HeaderOffset, nil},
		{"non-numeric offset", base(format, kgo.RecordHeader{Key: HeaderOffset, Value: []byte("abc")}), "bad header " + HeaderOffset, new(*strconv.NumError)},
		{"empty offset", base(format, kgo.RecordHeader{Key: HeaderOffset, Value: nil}), "bad header " + HeaderOffset, new(*strconv.NumError)},
		{"fractional offset", base(format, kgo.RecordHeader{Key: HeaderOffset, Value: []byte("1.5")}), "bad header " + HeaderOffset, new(*strconv.NumError)},
		{"unsupported format", base(kgo.RecordHeader{Key: HeaderFormat, Value: []byte("4")}, kgo.RecordHeader{Key: HeaderOffset, Value: []byte("1")}), `unsupported format "4"`, nil},
		{"bad timers header", base(format, kgo.RecordHeader{Key: HeaderOffset, Value: []byte("1")}, kgo.RecordHeader{Key: HeaderTimers, Value: []byte("{")}), "bad header " + HeaderTimers, new(*json.SyntaxError)},
		{"empty format", base(kgo.RecordHeader{Key: HeaderOffset, Value: []byte("1")}, kgo.RecordHeader{Key: HeaderFormat, Value: nil}), "unsupported format", nil},
		{"deleted header on format 2", base(format, kgo.RecordHeader{Key: HeaderOffset, Value: []byte("1")}, kgo.RecordHeader{Key: HeaderDeleted, Value: []byte("1")}), "a deleted key's record needs format 3", nil},
		{"format 3 without the deleted header", base(kgo.RecordHeader{Key: HeaderFormat, Value: []byte("3")}, kgo.RecordHeader{Key: HeaderOffset, Value: []byte("1")}), "a deleted key's record needs format 3", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok, err := DecodeRecord(tc.rec)
			if err == nil {
				t.Fatalf("DecodeRecord = %+v, ok %v; want an error", s, ok)
			}
			if ok {
				t.Fatal("ok must be false with an error")
			}
			msg := err.Error()
			for _, want := range []string{"snaps[3]@17", `"acct-9"`, tc.mention} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q (topic, partition, offset, key and cause)", msg, want)
				}
			}
			if tc.wrapped != nil && !errors.As(err, tc.wrapped) {
				t.Errorf("error %q does not wrap the parse error", msg)
			}
		})
	}
}

// Durable timers: a snapshot's pending timers round-trip through the
// timers header (millisecond precision), sorted by due time, and leave the
// value untouched.
func TestTimersRoundTrip(t *testing.T) {
	at1 := time.UnixMilli(1_700_000_000_123)
	at2 := at1.Add(-time.Hour)
	in := Snapshot{Key: "u1", Value: []byte(`{"open":true}`), Offset: 5,
		Timers: []Timer{{Name: "close \"quoted\"", At: at1.Add(456 * time.Microsecond)}, {Name: "", At: at2}}}
	rec := EncodeRecord("snaps", 0, in)
	if string(rec.Value) != `{"open":true}` {
		t.Fatalf("value %q: the timers must not touch the codec's value", rec.Value)
	}
	got, ok, err := DecodeRecord(asRead(rec, 3))
	if err != nil || !ok {
		t.Fatalf("DecodeRecord = ok %v, err %v", ok, err)
	}
	want := []Timer{{Name: "", At: at2}, {Name: "close \"quoted\"", At: at1}}
	if len(got.Timers) != len(want) {
		t.Fatalf("timers %+v, want %+v", got.Timers, want)
	}
	for i := range want {
		if got.Timers[i].Name != want[i].Name || !got.Timers[i].At.Equal(want[i].At) {
			t.Fatalf("timer %d = %+v, want %+v", i, got.Timers[i], want[i])
		}
	}
	if next, ok := got.NextTimer(); !ok || !next.Equal(at2) {
		t.Fatalf("NextTimer = %v %v, want %v", next, ok, at2)
	}
	if _, ok := (Snapshot{}).NextTimer(); ok {
		t.Fatal("NextTimer of a snapshot without timers")
	}
}

// A format-1 record (written before durable timers) is still read, with
// no timers.
func TestDecodeFormat1(t *testing.T) {
	rec := &kgo.Record{Topic: "snaps", Offset: 9, Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: HeaderOffset, Value: []byte("41")}, {Key: HeaderFormat, Value: []byte("1")},
	}}
	s, ok, err := DecodeRecord(rec)
	if err != nil || !ok || s.Offset != 41 || string(s.Value) != "v" || len(s.Timers) != 0 {
		t.Fatalf("DecodeRecord(format 1) = %+v, ok %v, err %v", s, ok, err)
	}
}

// A deleted key with timers pending is written as no tombstone (an empty
// value, format 3, HeaderDeleted): compaction drops a tombstone after the
// topic's delete.retention.ms, and its timers with it. Read back, it is a
// tombstone with its timers; without timers a deleted key is a tombstone.
// In a batch its extra header does not spill into the next record's.
func TestADeletedKeyWithTimersIsNoTombstone(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	del := Snapshot{Key: "gone", Offset: 7, Timers: []Timer{{Name: "goodbye", At: at}}}
	next := Snapshot{Key: "next", Value: []byte(`1`), Offset: 8, Timers: []Timer{{Name: "t", At: at}}}
	recs := encodeBatch("snaps", 0, []Snapshot{del, next}, nil, 0, false)
	for i, rec := range []*kgo.Record{EncodeRecord("snaps", 0, del), recs[0]} {
		if rec.Value == nil || len(rec.Value) != 0 {
			t.Fatalf("record %d: value %v, want empty, not null (a tombstone)", i, rec.Value)
		}
		hs := map[string]string{}
		for _, h := range rec.Headers {
			hs[h.Key] = string(h.Value)
		}
		if hs[HeaderFormat] != "3" || hs[HeaderDeleted] != "1" || hs[HeaderTimers] == "" {
			t.Fatalf("record %d: headers %v, want format 3, %s and the timers", i, hs, HeaderDeleted)
		}
		if n := SnapshotRecordBytes(del); n < len(rec.Key)+len(rec.Value)+headerBytes(rec) {
			t.Fatalf("record %d: SnapshotRecordBytes %d below the record's %d bytes", i, n, len(rec.Key)+len(rec.Value)+headerBytes(rec))
		}
		got, ok, err := DecodeRecord(asRead(rec, 3))
		if err != nil || !ok || !got.Tombstone() || len(got.Timers) != 1 || got.Timers[0].Name != "goodbye" || got.Offset != 7 {
			t.Fatalf("record %d read back: %+v ok %v err %v; want a tombstone at offset 7 with its timer", i, got, ok, err)
		}
	}
	if got, _, err := DecodeRecord(asRead(recs[1], 4)); err != nil || string(got.Value) != "1" || len(got.Timers) != 1 || len(recs[1].Headers) != 3 {
		t.Fatalf("the next record in the batch: %+v (%d headers), err %v", got, len(recs[1].Headers), err)
	}
	if rec := EncodeRecord("snaps", 0, Snapshot{Key: "gone", Offset: 9}); rec.Value != nil {
		t.Fatalf("a deleted key without timers: value %v, want a tombstone", rec.Value)
	}
	// KafkaConfig.SnapshotFormat 2 (a rolling upgrade from a reader of
	// format 2): a tombstone carrying the timers, format 2, as before.
	old := encodeBatch("snaps", 0, []Snapshot{del}, nil, 0, true)[0]
	for _, h := range old.Headers {
		if h.Key == HeaderDeleted || h.Key == HeaderFormat && string(h.Value) != "2" {
			t.Fatalf("format 2: header %s=%s, want none of format 3", h.Key, h.Value)
		}
	}
	if got, _, err := DecodeRecord(asRead(old, 5)); old.Value != nil || err != nil || !got.Tombstone() || len(got.Timers) != 1 {
		t.Fatalf("format 2: value %v, read back %+v, err %v; want a tombstone with its timer", old.Value, got, err)
	}
	if _, err := (KafkaConfig{SnapshotFormat: 1}).resolve("snaps"); err == nil {
		t.Fatal("SnapshotFormat 1 taken")
	}
}

func headerBytes(r *kgo.Record) int {
	n := 0
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
