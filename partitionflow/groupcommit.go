package partitionflow

import (
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMaxWritesPerTransaction bounds a group commit's records:
// transaction duration (commit within transaction.timeout.ms) and bytes
// (≈ cap × record size: 2048 records of ~200 B are ~400 KiB, within kgo's
// 1 MB produce batches per partition). The seed's cap was 256, measured
// only ~7% slower than uncapped at its broker's 1.8 ms per transaction; on
// KIP-890 brokers (Kafka 4.x) a transaction costs 4–13 ms, whatever its
// size, so with one output per event the cap bound throughput: cmd/bench
// E2E txn-out (10k keys, 1M events) drained in 12.1 s at 256 and 4.1 s at
// 2048 (8192: no better) on Kafka 4.4.0, and output latency at 20 000
// events/s did not change (p99 115.8 ms at 256 and 1024). Re-measured on
// 2026-12-03 (E2E txn and txn-out at 10k and 1M keys, 3 rounds each): 8192
// and 16384 cut the broker's CPU by 10–25 % (fewer transactions, each
// costing the broker a few ms of CPU), with drains within the host's
// noise; kept at 2048 for the memory a flight holds (its records'
// encoded copies, per owned partition).
const DefaultMaxWritesPerTransaction = 2048

// GroupCommit is the batching decision of the transaction actor, free of I/O
// and actors: writes queue while a transaction is in flight and go out
// together in the next one, up to the cap; offset commits ride along without
// counting against it. Not safe for concurrent use.
//
// The cap counts records: a write costs one (its snapshot) plus one per
// output it carries (Write.Outputs), since outputs make the transaction
// longer and larger just as snapshots do. A write and its outputs are never
// split (they must commit together), so a transaction takes queued writes
// in order while the total stays within the cap, and always at least the
// first: a write carrying more outputs than the cap goes alone.
type GroupCommit struct {
	max int
	// queue[head:] are the queued writes. Next advances head instead of
	// re-copying the rest (that copy made each transaction O(backlog));
	// compact reclaims the consumed prefix.
	queue         []Write
	head          int
	offset        int64 // the offset every transaction commits
	committed     int64 // the offset of the last successful transaction
	offsetWaiters []func(error)
	inFlight      bool
}

// Write is one queued snapshot write; Done is called exactly once with the
// outcome of the transaction that carried it.
type Write struct {
	Snapshot snapshotstore.Snapshot
	// Outputs are emitted by the folds (and timers) the snapshot covers:
	// produced in the snapshot's transaction, so that a committed output is
	// never emitted again (a replay skips records at or below the
	// snapshot's offset) and an aborted one is emitted again exactly once.
	Outputs []*kgo.Record
	Done    func(error)
}

// cost is what a write counts against the cap.
func (w *Write) cost() int { return 1 + len(w.Outputs) }

// Flight is one transaction's content.
type Flight struct {
	Batch snapshotstore.Batch
	done  []func(error)
}

// NewGroupCommit seeds the offset with the assigned offset, so that even the
// first snapshot write carries an offset and is generation-gated.
func NewGroupCommit(max int, seed int64) *GroupCommit {
	if max <= 0 {
		max = DefaultMaxWritesPerTransaction
	}
	return &GroupCommit{max: max, offset: seed, committed: seed}
}

// Add queues a write.
func (g *GroupCommit) Add(w Write) {
	g.compact()
	g.queue = append(g.queue, w)
}

// compact drops the consumed prefix once it is at least as long as the live
// part, so each queued write is moved at most once more on average (O(1)
// amortized). It moves the live part to the front of the same array, unless
// that array is far larger than the backlog (a burst drained): then the live
// part goes to a fresh array of half the size, releasing the large one —
// half, not the backlog's size, so that a backlog that swings (a million
// keys' writes) does not regrow the array from small each time.
func (g *GroupCommit) compact() {
	live := len(g.queue) - g.head
	if g.head == 0 || g.head < live {
		return
	}
	if c := cap(g.queue); c > 4*g.max && c > 4*live {
		q := make([]Write, live, c/2)
		copy(q, g.queue[g.head:])
		g.queue, g.head = q, 0
		return
	}
	g.queue, g.head = shiftOut(g.queue, g.head), 0
}

// CommitOffset advances the offset to commit (never backwards) and forces a
// transaction even with no writes; done (may be nil) gets its outcome.
func (g *GroupCommit) CommitOffset(offset int64, done func(error)) {
	if offset > g.offset {
		g.offset = offset
	}
	if done != nil {
		g.offsetWaiters = append(g.offsetWaiters, done)
	}
}

// Pending reports queued writes and offset waiters.
func (g *GroupCommit) Pending() int { return len(g.queue) - g.head + len(g.offsetWaiters) }

// Next returns the next transaction, or false when one is in flight or
// nothing is due: no queued write, and the offset neither advanced nor
// awaited.
func (g *GroupCommit) Next() (*Flight, bool) {
	if g.inFlight {
		return nil, false
	}
	q := g.queue[g.head:]
	if len(q) == 0 && len(g.offsetWaiters) == 0 && g.offset == g.committed {
		return nil, false
	}
	n, records := 0, 0
	for n < len(q) && (n == 0 || records+q[n].cost() <= g.max) {
		records += q[n].cost()
		n++
	}
	f := &Flight{
		Batch: snapshotstore.Batch{Offset: g.offset, OffsetAdvanced: g.offset != g.committed},
		done:  make([]func(error), 0, n+len(g.offsetWaiters)),
	}
	if n > 0 {
		f.Batch.Writes = make([]snapshotstore.Snapshot, n)
		if outputs := records - n; outputs > 0 {
			f.Batch.Outputs = make([]*kgo.Record, 0, outputs)
		}
		for i, w := range q[:n] {
			f.Batch.Writes[i] = w.Snapshot
			f.Batch.Outputs = append(f.Batch.Outputs, w.Outputs...)
			f.done = append(f.done, w.Done)
		}
		// Zero the taken slots: the flight owns them now, and a slot left
		// set would pin its snapshot, outputs and waiter until compaction.
		clear(q[:n])
		g.head += n
		g.compact()
	}
	f.done = append(f.done, g.offsetWaiters...)
	g.offsetWaiters = nil
	g.inFlight = true
	return f, true
}

// Complete delivers a flight's outcome to each of its waiters.
func (g *GroupCommit) Complete(f *Flight, err error) {
	g.inFlight = false
	if err == nil && f.Batch.Offset > g.committed {
		g.committed = f.Batch.Offset
	}
	for _, d := range f.done {
		if d != nil {
			d(err)
		}
	}
}

// FailPending answers every queued write and offset waiter with err.
func (g *GroupCommit) FailPending(err error) {
	q, w := g.queue[g.head:], g.offsetWaiters
	g.queue, g.head, g.offsetWaiters = nil, 0, nil
	for _, x := range q {
		x.Done(err)
	}
	for _, d := range w {
		d(err)
	}
}
