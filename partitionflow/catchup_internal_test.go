package partitionflow

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A commit tick that fires while the persist tick's flushes are still in
// their transaction commits what was persisted before them; the rest is
// committed as soon as it is persisted (catchUpCommit), not a whole
// CommitOffsetsInterval later. The ticks are sent by hand (the intervals
// are an hour): commit first, then persist, the order in which the E2E
// drain lost an interval. Without the catch-up, nothing is committed.
func TestCommitCatchesUpOnceTheTickedRecordsArePersisted(t *testing.T) {
	h := newTickHarness(t, 0) // no live-key budget
	h.open()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "in", Offset: int64(i), Key: []byte(fmt.Sprint("k", i%4))})
	}
	h.sys.Root.Send(h.pid, &Records{Records: recs})
	// Every record dispatched (the keys are loaded); the ticks then reach
	// the keys after their records.
	h.await("records dispatched", func(st Status) bool { return st.KeysLoaded == 4 })
	h.sys.Root.Send(h.pid, &tick{tickCommit})
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	timeout := time.After(10 * time.Second)
	for {
		select {
		case off := <-h.committed:
			if off == 20 {
				return
			}
		case <-timeout:
			t.Fatalf("offset 20 not committed after the commit and persist ticks (at %d)", h.mem.Committed("in", 0))
		}
	}
}

// A commit tick that finds records consumed but not persisted — their keys'
// writes on their way — advances the offset for the next transaction that
// writes to carry, instead of committing it alone first: at 10k keys those
// offset-only transactions were a third of all, each a few ms of the
// broker's CPU, and the writes waited behind them. Without the ride, the
// second transaction carries no write (offset 10 alone).
func TestCommitTickOffsetRidesWithTheWritesOnTheirWay(t *testing.T) {
	h := newTickHarness(t, 0)
	h.open()
	h.sendKeyed(0, 10)
	h.await("first records dispatched", func(st Status) bool { return st.KeysLoaded == 4 })
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	h.await("first records persisted", func(st Status) bool { return st.Committable == 10 })
	h.drainBatches()
	h.sendKeyed(10, 20)                       // dispatched (their keys dirty) before the ticks arrive
	h.sys.Root.Send(h.pid, &tick{tickCommit}) // offset 10 committable, records 10..19 not persisted
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	// The tick's offset goes with the writes (the first may go alone: the
	// transaction actor was idle), then the catch-up commits the rest.
	writes := 0
	for first := true; ; first = false {
		b := h.nextBatch()
		if first && b.offset != 10 {
			t.Fatalf("first transaction after the ticks %+v, want offset 10 with writes", b)
		}
		if b.offset == 20 {
			break
		}
		if b.writes == 0 {
			t.Fatalf("offset-only transaction %+v while the writes were on their way", b)
		}
		writes += b.writes
	}
	if writes != 4 {
		t.Fatalf("%d writes before the catch-up commit, want 4", writes)
	}
}

// An offset left riding — no write came by the next commit tick — is
// committed by that tick in a transaction of its own: riding delays a
// commit by one interval at most.
func TestRidingOffsetIsCommittedByTheNextTick(t *testing.T) {
	h := newTickHarness(t, 0)
	h.open()
	h.sendKeyed(0, 10)
	h.await("first records dispatched", func(st Status) bool { return st.KeysLoaded == 4 })
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	h.await("first records persisted", func(st Status) bool { return st.Committable == 10 })
	h.drainBatches()
	h.sendKeyed(10, 20)                       // dispatched (their keys dirty) before the ticks arrive
	h.sys.Root.Send(h.pid, &tick{tickCommit}) // rides: no transaction
	h.sys.Root.Send(h.pid, &tick{tickCommit}) // still riding: committed alone
	h.expectBatch(committedBatch{writes: 0, offset: 10})
}

// sendKeyed sends one record at each offset in [from, to), of key
// "k<offset mod 4>".
func (h *tickHarness) sendKeyed(from, to int64) {
	var recs []*kgo.Record
	for off := from; off < to; off++ {
		recs = append(recs, &kgo.Record{Topic: "in", Offset: off, Key: []byte(fmt.Sprint("k", off%4))})
	}
	h.sys.Root.Send(h.pid, &Records{Records: recs})
}

// nextBatch returns the next committed transaction.
func (h *tickHarness) nextBatch() committedBatch {
	h.t.Helper()
	select {
	case b := <-h.batches:
		return b
	case <-time.After(10 * time.Second):
		h.t.Fatalf("no transaction committed (status %+v)", h.status())
		return committedBatch{}
	}
}

// expectBatch fails unless the next committed transaction is want.
func (h *tickHarness) expectBatch(want committedBatch) {
	h.t.Helper()
	if got := h.nextBatch(); got != want {
		h.t.Fatalf("committed transaction %+v, want %+v", got, want)
	}
}

// drainBatches forgets the transactions committed so far.
func (h *tickHarness) drainBatches() {
	for {
		select {
		case <-h.batches:
		default:
			return
		}
	}
}
