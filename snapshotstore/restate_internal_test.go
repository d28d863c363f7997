package snapshotstore

import (
	"slices"
	"testing"

	"go.uber.org/zap"
)

// The keys WithDropUndecodableSnapshots dropped — those with an earlier
// valid snapshot and those without — get tombstones covering no input,
// before the first commit's writes, so that a write of such a key in the
// same batch supersedes its tombstone; a restatement that succeeded adds
// nothing more.
func TestRestatementTombstonesTheDroppedKeysFirst(t *testing.T) {
	c := newRecoveryCheck("snaps[0]", IntegrityOptions{DropUndecodable: true}, zap.NewNop())
	c.add(snapRec("b", 3, "v"))
	c.add(foreignRec("b"))
	c.add(foreignRec("a"))
	drop, err := c.finish("in[0]", nil, -1, 0, recordedCount{})
	if err != nil || !slices.Equal(drop, []string{"b"}) || !slices.Equal(c.dropped, []string{"a", "b"}) {
		t.Fatalf("finish: drop %v, dropped %v, err %v; want [b], [a b], nil", drop, c.dropped, err)
	}
	r := restatement{dropped: c.dropped}
	if !r.NeedsRestate() {
		t.Fatal("dropped keys, no restate")
	}
	b := r.restated(Batch{Offset: 7, Writes: []Snapshot{{Key: "b", Value: []byte("new"), Offset: 5}}})
	var got []string
	for _, w := range b.Writes {
		got = append(got, w.Key)
		if w.Key != "b" || w.Value == nil {
			if w.Value != nil || w.Offset != -1 {
				t.Errorf("tombstone of %q = %+v, want nil value at offset -1", w.Key, w)
			}
		}
	}
	if !slices.Equal(got, []string{"a", "b", "b"}) || string(b.Writes[2].Value) != "new" || b.Offset != 7 {
		t.Fatalf("restated batch %+v: want the tombstones of a and b, then b's write, at offset 7", b)
	}
	if (&restatement{}).NeedsRestate() {
		t.Fatal("an empty restatement needs a restate")
	}
}
