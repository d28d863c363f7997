package snapshotstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A transaction's records share arrays (encodeBatch): each must still
// decode to its own snapshot, and a timers header appended to one record
// must not overwrite its neighbour's key or headers.
func TestEncodeBatchRecordsAreIndependent(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	ws := []Snapshot{
		{Key: "a", Value: []byte(`{"n":1}`), Offset: 7, Timers: []Timer{{Name: "t", At: at}}},
		{Key: "bb", Value: []byte(`{"n":2}`), Offset: 12345678901},
		{Key: "ccc", Value: nil, Offset: 0, Timers: []Timer{{Name: "u", At: at}}},
		{Key: "", Value: []byte(`{}`), Offset: 3},
	}
	out := &kgo.Record{Topic: "out", Key: []byte("k"), Value: []byte("v")}
	recs := encodeBatch("snaps", 2, ws, []*kgo.Record{out}, 1, false)
	if len(recs) != len(ws)+1 || cap(recs) < len(ws)+2 {
		t.Fatalf("len %d cap %d, want %d and room for the marker", len(recs), cap(recs), len(ws)+1)
	}
	for i, w := range ws {
		// The same record alone, as EncodeRecord makes it, is the reference.
		if !reflect.DeepEqual(*recs[i], *EncodeRecord("snaps", 2, w)) {
			t.Errorf("record %d: %+v, want %+v", i, *recs[i], *EncodeRecord("snaps", 2, w))
		}
		s, ok, err := DecodeRecord(recs[i])
		if err != nil || !ok {
			t.Fatalf("record %d: decode: ok %v, %v", i, ok, err)
		}
		if s.Key != w.Key || s.Offset != w.Offset || string(s.Value) != string(w.Value) || len(s.Timers) != len(w.Timers) {
			t.Errorf("record %d decodes to %+v, want %+v", i, s, w)
		}
	}
	if o := recs[len(ws)]; o != out || o.Context != nil || o.Topic != "out" || string(o.Key) != "k" || string(o.Value) != "v" {
		t.Errorf("output: %+v (the same pointer: %v), want the emitted record, its context cleared", o, o == out)
	}
}

// A retried transaction produces its outputs again: each attempt clears
// the context kgo kept from the previous one (kgo sets a record's Context
// only when it is nil, and fails a record whose context is done).
func TestEncodeBatchClearsAnOutputsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the previous attempt's, ended
	out := &kgo.Record{Topic: "out", Key: []byte("k"), Context: ctx}
	recs := encodeBatch("snaps", 0, nil, []*kgo.Record{out}, 1, false)
	if len(recs) != 1 || recs[0] != out || out.Context != nil {
		t.Fatalf("records %v, context %v: want the output itself with no context", recs, out.Context)
	}
}
