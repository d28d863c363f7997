package snapshotstore

import (
	"slices"
	"testing"

	"go.uber.org/zap"
)

// The keys WithDropUndecodableSnapshots dropped — those with an earlier
// valid snapshot and those without — are the restate's tombstones (the
// partition queues them before any write of its keys).
func TestRestatementTombstonesTheDroppedKeysFirst(t *testing.T) {
	c := newRecoveryCheck("snaps[0]", IntegrityOptions{DropUndecodable: true}, zap.NewNop())
	c.add(snapRec("b", 3, "v"))
	c.add(foreignRec("b"))
	c.add(foreignRec("a"))
	drop, err := c.finish("in[0]", "g", 0, nil, -1, 0, recordedCount{})
	if err != nil || !slices.Equal(drop, []string{"b"}) || !slices.Equal(c.dropped, []string{"a", "b"}) {
		t.Fatalf("finish: drop %v, dropped %v, err %v; want [b], [a b], nil", drop, c.dropped, err)
	}
	r := restatement{dropped: c.dropped}
	if !r.NeedsRestate() || !slices.Equal(r.RestateTombstones(), []string{"a", "b"}) {
		t.Fatalf("dropped keys: restate %v, tombstones %v; want a restate with a and b", r.NeedsRestate(), r.RestateTombstones())
	}
	if (&restatement{}).NeedsRestate() {
		t.Fatal("an empty restatement needs a restate")
	}
}
