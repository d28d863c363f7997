package coordinator

import (
	"testing"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A start forgets the partition's catch-up target; the first fetch after
// it sets it to the partition's end (its last stable offset when below the
// high watermark: an open transaction's records are not read_committed's
// to fold), later fetches do not move it; a target listed by a caller
// counts only for the start it was listed after.
func TestCatchUpTarget(t *testing.T) {
	c := &Consumer{started: map[TopicPartition]started{}}
	tp := TopicPartition{"in", 0}
	if _, known, _ := c.CatchUpTarget(tp); known {
		t.Fatal("a partition never started has a target")
	}
	c.newStart([]TopicPartition{tp}, nil)
	if _, known, _ := c.CatchUpTarget(tp); known {
		t.Fatal("a target before any fetch")
	}
	c.noteFetchEnd(tp, kgo.FetchTopicPartition{FetchPartition: kgo.FetchPartition{HighWatermark: 100, LastStableOffset: 90}})
	c.noteFetchEnd(tp, kgo.FetchTopicPartition{FetchPartition: kgo.FetchPartition{HighWatermark: 200, LastStableOffset: 200}})
	if target, known, _ := c.CatchUpTarget(tp); !known || target != 90 {
		t.Fatalf("target %d (known %v), want 90: the first fetch's last stable offset", target, known)
	}
	c.noteFetchEnd(TopicPartition{"in", 1}, kgo.FetchTopicPartition{FetchPartition: kgo.FetchPartition{HighWatermark: 5}})
	if _, known, _ := c.CatchUpTarget(TopicPartition{"in", 1}); known {
		t.Fatal("a fetch of a partition not started here set its target")
	}

	c.newStart([]TopicPartition{tp}, nil) // started again
	_, _, old := c.CatchUpTarget(tp)
	c.newStart([]TopicPartition{tp}, nil) // and again, before the caller's listing lands
	c.SetCatchUpTarget(tp, 7, old)
	if _, known, tok := c.CatchUpTarget(tp); known {
		t.Fatal("a target listed for an earlier start was taken")
	} else {
		c.SetCatchUpTarget(tp, 8, tok)
	}
	if target, known, _ := c.CatchUpTarget(tp); !known || target != 8 {
		t.Fatalf("target %d (known %v), want 8: listed for this start", target, known)
	}
	c.noteFetchEnd(tp, kgo.FetchTopicPartition{FetchPartition: kgo.FetchPartition{HighWatermark: 50, LastStableOffset: -1}})
	if target, _, _ := c.CatchUpTarget(tp); target != 8 {
		t.Fatalf("a fetch moved a known target to %d", target)
	}
}

// A partition's committed offsets are noted per start: a late commit of an
// earlier copy (a revoked one outliving its teardown bound while the
// partition is assigned here again) does not raise the new copy's, nor
// does any call after the partition is no longer owned.
func TestCommitNoterPerStart(t *testing.T) {
	tp := TopicPartition{"in", 0}
	c := &Consumer{owned: map[TopicPartition]bool{tp: true}}
	c.newStart([]TopicPartition{tp}, nil)
	old := c.CommitNoter(tp)
	old(7)
	c.newStart([]TopicPartition{tp}, nil) // assigned again
	c.noteAssigned(map[TopicPartition]snapshotstore.Assignment{tp: {Offset: 10}})
	cur := c.CommitNoter(tp)
	old(50)
	if got := c.started[tp].committed; got != 10 {
		t.Fatalf("committed %d after an earlier copy's late commit, want 10 (the new start's)", got)
	}
	cur(12)
	cur(11) // never backwards
	if got := c.started[tp].committed; got != 12 {
		t.Fatalf("committed %d, want 12", got)
	}
	delete(c.owned, tp)
	cur(20)
	if got := c.started[tp].committed; got != 12 {
		t.Fatalf("committed %d after the partition left, want 12", got)
	}
}
