package partitionflow_test

import (
	"fmt"
	"testing"

	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// addRound queues a write of key answering round id (0: none), with outputs
// outputs.
func (c *gcRecorder) addRound(key string, id uint64, outputs int) {
	w := partitionflow.Write{Snapshot: snapshotstore.Snapshot{Key: key, Value: []byte(key)}, Done: c.done(key), Round: id}
	for i := range outputs {
		w.Outputs = append(w.Outputs, &kgo.Record{Key: []byte(key), Value: fmt.Appendf(nil, "%s%d", key, i)})
	}
	c.g.Add(w)
}

// held fails the test if a transaction is due.
func (c *gcRecorder) held(why string) {
	c.t.Helper()
	if f, ok := c.g.Next(); ok {
		c.t.Fatalf("%s: Next() gave a transaction of %v, want the round held", why, gcKeys(f.Batch))
	}
}

// A round of three writes goes out as one transaction, with the offset
// commit and a write of no round that came meanwhile; without the hold the
// first write went alone.
func TestGroupCommitRoundGoesOutAsOneTransaction(t *testing.T) {
	c := newGCRecorder(t, 256, 0)
	c.g.ExpectRound(7, 3)
	c.addRound("a", 7, 0)
	c.held("one write of three")
	c.commitOffset("off", 10)
	c.addRound("evicted", 0, 0)
	c.addRound("b", 7, 0)
	c.held("two writes of three")
	c.addRound("c", 7, 0)
	f := c.next()
	if got := gcKeys(f.Batch); fmt.Sprint(got) != "[a evicted b c]" || f.Batch.Offset != 10 {
		t.Fatalf("transaction %v at offset %d, want [a evicted b c] at 10", got, f.Batch.Offset)
	}
	c.g.Complete(f, nil)
	c.answeredOnce("off", nil)
	// The round is complete: the next write goes at once.
	c.addRound("d", 0, 0)
	if got := gcKeys(c.next().Batch); fmt.Sprint(got) != "[d]" {
		t.Fatalf("after the round: %v, want [d]", got)
	}
}

// Only the expected round's writes count: a late write of an earlier round
// (its key's previous write was in flight at the flush) does not end the
// hold.
func TestGroupCommitRoundCountsOnlyItsOwnWrites(t *testing.T) {
	c := newGCRecorder(t, 256, 0)
	c.g.ExpectRound(2, 1)
	c.addRound("late", 1, 0)
	c.held("a write of round 1 while round 2 is expected")
	c.addRound("x", 2, 0)
	if got := gcKeys(c.next().Batch); fmt.Sprint(got) != "[late x]" {
		t.Fatalf("transaction %v, want [late x]", got)
	}
}

// Outputs never wait for a round: their transaction's commit is their
// visibility.
func TestGroupCommitWriteWithOutputsEndsTheHold(t *testing.T) {
	c := newGCRecorder(t, 256, 0)
	c.g.ExpectRound(1, 5)
	c.addRound("a", 1, 0)
	c.held("one write of five")
	c.addRound("out", 0, 2)
	if got := gcKeys(c.next().Batch); fmt.Sprint(got) != "[a out]" {
		t.Fatalf("transaction %v, want [a out]", got)
	}
}

// A round whose queued writes fill a transaction lets it go, and holds the
// rest for the round's remaining writes.
func TestGroupCommitFullTransactionLeavesTheHold(t *testing.T) {
	c := newGCRecorder(t, 2, 0)
	c.g.ExpectRound(1, 4)
	c.addRound("a", 1, 0)
	c.held("one write, cap two")
	c.addRound("b", 1, 0)
	f := c.next()
	if got := gcKeys(f.Batch); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("first transaction %v, want [a b] (the cap)", got)
	}
	c.g.Complete(f, nil)
	c.addRound("c", 1, 0)
	c.held("one write of the two left")
	c.addRound("d", 1, 0)
	if got := gcKeys(c.next().Batch); fmt.Sprint(got) != "[c d]" {
		t.Fatalf("second transaction %v, want [c d]", got)
	}
}

// A key flushed with nothing left to write never answers: the deadline
// (ReleaseRound) lets the round's transaction go; a stale deadline (an
// earlier round's) does not.
func TestGroupCommitReleaseRoundEndsTheHoldOfThatRoundOnly(t *testing.T) {
	c := newGCRecorder(t, 256, 0)
	c.g.ExpectRound(1, 3)
	c.g.ExpectRound(2, 3) // the next tick came first
	c.addRound("a", 2, 0)
	if c.g.ReleaseRound(1) {
		t.Fatal("ReleaseRound(1) ended round 2's hold")
	}
	c.held("round 1's deadline")
	if !c.g.ReleaseRound(2) {
		t.Fatal("ReleaseRound(2) = false while round 2 held")
	}
	if got := gcKeys(c.next().Batch); fmt.Sprint(got) != "[a]" {
		t.Fatalf("transaction %v, want [a]", got)
	}
	if c.g.ReleaseRound(2) {
		t.Fatal("ReleaseRound(2) = true with nothing held")
	}
}

// A round holds even an offset-only commit: it rides with the round's
// writes.
func TestGroupCommitRoundHoldsAnOffsetOnlyCommit(t *testing.T) {
	c := newGCRecorder(t, 256, 0)
	c.g.ExpectRound(1, 1)
	c.commitOffset("off", 5)
	c.held("an offset commit while the round's write is due")
	c.addRound("a", 1, 0)
	f := c.next()
	if got := gcKeys(f.Batch); fmt.Sprint(got) != "[a]" || f.Batch.Offset != 5 {
		t.Fatalf("transaction %v at %d, want [a] at 5", got, f.Batch.Offset)
	}
}
