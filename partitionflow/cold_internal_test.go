package partitionflow

import (
	"reflect"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
)

// A cold key's snapshot comes back whole: value (a tombstone's nil kept
// apart from an empty value), offset, timers, and the source it was
// recovered from; one an actor handed back names the snapshot partition
// with offset -1 (not read from the log).
func TestColdSnapshotKeepsWhatALoadNeeds(t *testing.T) {
	src := snapshotstore.Position{Topic: "snaps", Partition: 3}
	at := time.UnixMilli(1_700_000_000_000)
	recovered := map[string]snapshotstore.Snapshot{
		"a": {Key: "a", Value: []byte(`{"n":1}`), Offset: 41, Timers: []snapshotstore.Timer{{Name: "t", At: at}},
			Source: snapshotstore.Position{Topic: "snaps", Partition: 3, Offset: 977}},
		"gone": {Key: "gone", Value: nil, Offset: 7, Source: snapshotstore.Position{Topic: "snaps", Partition: 3, Offset: 12}},
	}
	r := newColdRecovery()
	for _, s := range recovered {
		r.add(s)
	}
	if got := r.source(snapshotstore.Position{}); got != src {
		t.Fatalf("recovery's source = %+v, want %+v", got, src)
	}
	if def := (snapshotstore.Position{Topic: "snaps", Partition: 3}); newColdRecovery().source(def) != def {
		t.Fatalf("source of no snapshot = %+v, want the configured %+v", newColdRecovery().source(def), def)
	}
	for k, s := range recovered {
		if got := r.snaps[k].snapshot(k, src); !reflect.DeepEqual(got, s) {
			t.Errorf("recovered %q: %+v back as %+v", k, s, got)
		}
		if s.Value != nil && &r.snaps[k].value[0] == &s.Value[0] {
			t.Errorf("recovered %q: its value shares the record's bytes (kgo's batch, kept alive by it)", k)
		}
	}
	unloaded := snapshotstore.Snapshot{Key: "b", Value: []byte{}, Offset: 5}
	c := toCold(unloaded, src)
	unloaded.Source = snapshotstore.Position{Topic: "snaps", Partition: 3, Offset: -1}
	if got := c.snapshot("b", src); !reflect.DeepEqual(got, unloaded) || got.Tombstone() {
		t.Errorf("unloaded: %+v back as %+v (an empty value is not a tombstone)", unloaded, got)
	}
	if _, ok := c.nextTimer(); ok {
		t.Error("a snapshot without timers has a next timer")
	}
	if next, ok := toCold(recovered["a"], src).nextTimer(); !ok || !next.Equal(at) {
		t.Errorf("nextTimer = %v %v, want %v", next, ok, at)
	}
}
