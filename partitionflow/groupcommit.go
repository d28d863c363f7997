package partitionflow

import (
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMaxWritesPerTransaction bounds a group commit's records, and
// DefaultMaxTransactionBytes its bytes (keys, values and headers, plus a
// record's framing): whichever is reached first ends the transaction.
//
// Bytes bound what matters — a flight's memory (its records' encoded copies,
// per owned partition), its produce batches and its duration (commit within
// transaction.timeout.ms) — whatever the state's size; the record cap only
// stops a flood of tiny records. Larger transactions cost the broker less:
// each costs it a few ms of CPU whatever its size (AddPartitionsToTxn, the
// markers, the transaction log), and on a 2-core host running both, that is
// CPU the worker does not get. cmd/bench E2E on Kafka 4.4.0 (2026-12-03, 10k
// and 1M keys, txn and txn-out, 3 rounds each): a 2048-record cap (the
// earlier default) against 8192 and 16384 cost the broker 9.4–10.2 against
// 8.2–8.5 and 7.0–9.0 CPU s per round, drains within the host's noise.
// These defaults against the 2048-record cap, interleaved (3 rounds): txn-out
// at 10k keys 2.08–2.38 s against 2.43–3.88 s, txn at 1M keys 5.83–7.13 s
// against 6.33–8.65 s, peak RSS within 100 MiB (at a 1 MiB cap). 4 MiB,
// not 1: Experiment B's 10 KiB snapshots went 21 to a transaction under
// 1 MiB instead of 256 (1.93× the plain producer against 1.09×), and a
// state that size deserves hundreds per transaction too. The
// seed's cap was 256; with one output per event the cap bound throughput
// (txn-out at 10k keys drained in 12.1 s at 256 and 4.1 s at 2048), and
// output latency at 20 000 events/s did not change (p99 115.8 ms at 256 and
// 1024): a partition's transactions there are far below either bound.
//
// 65536 records, not 16384 (2026-12-04): with one ~100-byte output per event
// at 10k keys, 16384 records (~1.6 MB) ended every transaction while 500–900
// writes waited behind it, so a partition's commits ran a backlog behind its
// folds to the end of the input. At 65536 the byte cap ends them (at some
// 40 000 records) and the queue is empty after most of them: the drain's end
// after its last fold (cmd/bench E2E `tail`) took 0.13–0.35 s (median 0.26)
// against 0.25–0.50 (0.38), in 48–81 transactions per run against 80–92 (10
// interleaved pairs, txn-out against raw-out, 10k keys); on a 3-node cluster
// (RF 3) 0.68–2.88 s against 1.58–3.35 (4 pairs). Drains within the host's
// noise; 1M keys unchanged.
const (
	DefaultMaxWritesPerTransaction = 65536
	DefaultMaxTransactionBytes     = 4 << 20
)

// recordFraming approximates a record's bytes beyond its key, value and
// headers (batch framing, varints, a snapshot's offset and format headers).
const recordFraming = 48

// GroupCommit is the batching decision of the transaction actor, free of I/O
// and actors: writes queue while a transaction is in flight and go out
// together in the next one, up to the cap; offset commits ride along without
// counting against it. Not safe for concurrent use.
//
// The caps count records and bytes: a write costs one record (its
// snapshot) plus one per output it carries (Write.Outputs), and their
// bytes, since outputs make the transaction longer and larger just as
// snapshots do. A write and its outputs are never split (they must commit
// together), so a transaction takes queued writes in order while both
// totals stay within their caps, and always at least the first: a write
// over a cap goes alone.
type GroupCommit struct {
	max      int
	maxBytes int
	// queue[head:] are the queued writes. Next advances head instead of
	// re-copying the rest (that copy made each transaction O(backlog));
	// compact reclaims the consumed prefix.
	queue         []Write
	head          int
	offset        int64 // the offset every transaction commits
	committed     int64 // the offset of the last successful transaction
	offsetWaiters []func(error)
	inFlight      bool
	restate       bool // Restate: the next transaction is due, and says its offset again
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
	bytes   int // set by Add (size)
}

// cost is what a write counts against the record cap.
func (w *Write) cost() int { return 1 + len(w.Outputs) }

// size is what a write counts against the byte cap: its snapshot's record
// (its timers header too: a key's state may be mostly timers, which went
// uncounted and let a transaction grow many times the cap) and its
// outputs'.
func (w *Write) size() int {
	n := len(w.Snapshot.Key) + len(w.Snapshot.Value) + recordFraming
	if len(w.Snapshot.Timers) > 0 {
		n += snapshotstore.TimersHeaderBytes
		for _, t := range w.Snapshot.Timers {
			n += snapshotstore.TimerBytes(t.Name)
		}
	}
	for _, o := range w.Outputs {
		n += len(o.Key) + len(o.Value) + recordFraming
		for _, h := range o.Headers {
			n += len(h.Key) + len(h.Value)
		}
	}
	return n
}

// Flight is one transaction's content.
type Flight struct {
	Batch snapshotstore.Batch
	done  []func(error)
}

// NewGroupCommit seeds the offset with the assigned offset, so that even the
// first snapshot write carries an offset and is generation-gated.
// max ≤ 0 takes DefaultMaxWritesPerTransaction; the byte cap starts at
// DefaultMaxTransactionBytes (SetMaxBytes).
func NewGroupCommit(max int, seed int64) *GroupCommit {
	if max <= 0 {
		max = DefaultMaxWritesPerTransaction
	}
	return &GroupCommit{max: max, maxBytes: DefaultMaxTransactionBytes, offset: seed, committed: seed}
}

// SetMaxBytes sets the byte cap; n ≤ 0 takes DefaultMaxTransactionBytes.
func (g *GroupCommit) SetMaxBytes(n int) {
	if n <= 0 {
		n = DefaultMaxTransactionBytes
	}
	g.maxBytes = n
}

// Add queues a write.
func (g *GroupCommit) Add(w Write) {
	g.compact()
	w.bytes = w.size()
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

// Restate makes the next transaction due even with nothing to write and the
// offset committed, and marks its batch OffsetAdvanced so that the store
// writes its offset marker (snapshotstore.Restater: a recovery that started
// past a finding an option accepted).
func (g *GroupCommit) Restate() { g.restate = true }

// Pending reports queued writes and offset waiters.
func (g *GroupCommit) Pending() int { return len(g.queue) - g.head + len(g.offsetWaiters) }

// Next returns the next transaction, or false when one is in flight or
// nothing is due: no queued write, and the offset not advanced. Offset
// waiters with nothing to commit (the offset they asked for is committed
// and no write is queued) are answered at once, without a transaction: a
// revoke's or shutdown's final commit of a partition whose last
// transaction already committed everything cost a transaction that
// carried nothing (a few ms per partition, more on a loaded cluster).
func (g *GroupCommit) Next() (*Flight, bool) {
	if g.inFlight {
		return nil, false
	}
	q := g.queue[g.head:]
	if len(q) == 0 && g.offset == g.committed && !g.restate {
		w := g.offsetWaiters
		g.offsetWaiters = nil
		for _, d := range w {
			d(nil)
		}
		return nil, false
	}
	n, records, bytes := 0, 0, 0
	for n < len(q) && (n == 0 || records+q[n].cost() <= g.max && bytes+q[n].bytes <= g.maxBytes) {
		records += q[n].cost()
		bytes += q[n].bytes
		n++
	}
	f := &Flight{
		Batch: snapshotstore.Batch{Offset: g.offset, OffsetAdvanced: g.offset != g.committed || g.restate},
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
	g.inFlight, g.restate = true, false
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
