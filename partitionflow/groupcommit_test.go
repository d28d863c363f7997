package partitionflow_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// gcRecorder simulates the transaction actor's loop over a GroupCommit:
// Next → record the batch → Complete. It records every batch it committed
// and every outcome delivered to a waiter.
type gcRecorder struct {
	t       *testing.T
	g       *partitionflow.GroupCommit
	batches []snapshotstore.Batch
	// outcomes counts Done calls per write key / offset waiter name.
	outcomes map[string][]error
}

func newGCRecorder(t *testing.T, max int, seed int64) *gcRecorder {
	return &gcRecorder{t: t, g: partitionflow.NewGroupCommit(max, seed), outcomes: map[string][]error{}}
}

func (c *gcRecorder) done(name string) func(error) {
	return func(err error) { c.outcomes[name] = append(c.outcomes[name], err) }
}

// add queues a write of key with a value naming it.
func (c *gcRecorder) add(key string) {
	c.g.Add(partitionflow.Write{Snapshot: snapshotstore.Snapshot{Key: key, Value: []byte(key)}, Done: c.done(key)})
}

// commitOffset asks for an offset commit with a named waiter.
func (c *gcRecorder) commitOffset(name string, offset int64) {
	c.g.CommitOffset(offset, c.done(name))
}

// next takes the next flight and records its batch; it fails the test when
// none is due.
func (c *gcRecorder) next() *partitionflow.Flight {
	c.t.Helper()
	f, ok := c.g.Next()
	if !ok {
		c.t.Fatal("Next() = false, want a transaction")
	}
	c.batches = append(c.batches, f.Batch)
	return f
}

// drain runs transactions until none is due, each completing with err.
func (c *gcRecorder) drain(err error) {
	for {
		f, ok := c.g.Next()
		if !ok {
			return
		}
		c.batches = append(c.batches, f.Batch)
		c.g.Complete(f, err)
	}
}

func (c *gcRecorder) answeredOnce(name string, want error) {
	c.t.Helper()
	got := c.outcomes[name]
	if len(got) != 1 {
		c.t.Fatalf("%s answered %d times, want exactly once", name, len(got))
	}
	if !errors.Is(got[0], want) && got[0] != want {
		c.t.Fatalf("%s answered %v, want %v", name, got[0], want)
	}
}

func (c *gcRecorder) unanswered(name string) {
	c.t.Helper()
	if n := len(c.outcomes[name]); n != 0 {
		c.t.Fatalf("%s answered %d times (%v), want not yet", name, n, c.outcomes[name])
	}
}

func gcKeys(b snapshotstore.Batch) []string {
	out := make([]string, len(b.Writes))
	for i, w := range b.Writes {
		out[i] = w.Key
	}
	return out
}

func TestGroupCommitEveryWriteCommitsExactlyOnceWithTheOffset(t *testing.T) {
	c := newGCRecorder(t, 7, 3)
	const n = 100
	for i := range n {
		c.add(fmt.Sprintf("k%03d", i))
		if i%10 == 9 {
			c.commitOffset(fmt.Sprintf("off%d", i), int64(i))
			// Interleave: sometimes a transaction runs mid-stream.
			c.drain(nil)
		}
	}
	c.drain(nil)
	seen := map[string]int{}
	for _, b := range c.batches {
		for _, w := range b.Writes {
			seen[w.Key]++
			if string(w.Value) != w.Key {
				t.Fatalf("write %s carried value %q", w.Key, w.Value)
			}
		}
		if b.Offset < 3 {
			t.Fatalf("batch %v committed offset %d below the seed 3", gcKeys(b), b.Offset)
		}
	}
	for i := range n {
		k := fmt.Sprintf("k%03d", i)
		if seen[k] != 1 {
			t.Fatalf("write %s committed %d times, want exactly once", k, seen[k])
		}
		c.answeredOnce(k, nil)
	}
	for i := 9; i < n; i += 10 {
		c.answeredOnce(fmt.Sprintf("off%d", i), nil)
	}
	if p := c.g.Pending(); p != 0 {
		t.Fatalf("Pending() = %d after draining, want 0", p)
	}
}

func TestGroupCommitCapHoldsAndRemainderGoesToNextFlight(t *testing.T) {
	for _, tc := range []struct {
		max, writes int
		want        []int
	}{
		{max: 1, writes: 3, want: []int{1, 1, 1}},
		{max: 4, writes: 10, want: []int{4, 4, 2}},
		{max: 5, writes: 5, want: []int{5}},
		{max: 0, writes: partitionflow.DefaultMaxWritesPerTransaction + 1, want: []int{partitionflow.DefaultMaxWritesPerTransaction, 1}},
	} {
		t.Run(fmt.Sprintf("max=%d/writes=%d", tc.max, tc.writes), func(t *testing.T) {
			c := newGCRecorder(t, tc.max, 0)
			for i := range tc.writes {
				c.add(fmt.Sprintf("k%04d", i))
			}
			c.drain(nil)
			var sizes []int
			var order []string
			for _, b := range c.batches {
				sizes = append(sizes, len(b.Writes))
				order = append(order, gcKeys(b)...)
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tc.want) {
				t.Fatalf("batch sizes %v, want %v", sizes, tc.want)
			}
			for i, k := range order {
				if want := fmt.Sprintf("k%04d", i); k != want {
					t.Fatalf("write %d committed is %s, want %s (queue order)", i, k, want)
				}
			}
		})
	}
}

func TestGroupCommitOffsetOnlyCommitForcesTransactionWithoutWrites(t *testing.T) {
	c := newGCRecorder(t, 4, 10)
	if _, ok := c.g.Next(); ok {
		t.Fatal("Next() with nothing queued and the seed unchanged must not start a transaction")
	}
	c.commitOffset("adv", 15)
	f := c.next()
	if len(f.Batch.Writes) != 0 {
		t.Fatalf("offset-only transaction carries %d writes, want 0", len(f.Batch.Writes))
	}
	if f.Batch.Offset != 15 || !f.Batch.OffsetAdvanced {
		t.Fatalf("offset-only batch = {Offset %d, Advanced %v}, want {15, true}", f.Batch.Offset, f.Batch.OffsetAdvanced)
	}
	c.unanswered("adv")
	c.g.Complete(f, nil)
	c.answeredOnce("adv", nil)

	// The same offset again, awaited (a revoke's final commit): nothing to
	// commit, answered at once without a transaction.
	c.commitOffset("again", 15)
	if f, ok := c.g.Next(); ok {
		t.Fatalf("a transaction re-committing offset 15 alone: %+v", f.Batch)
	}
	c.answeredOnce("again", nil)

	// An advance with no waiter is still due.
	c.g.CommitOffset(20, nil)
	f = c.next()
	if f.Batch.Offset != 20 || !f.Batch.OffsetAdvanced {
		t.Fatalf("unawaited advance batch = %+v, want offset 20 advanced", f.Batch)
	}
	c.g.Complete(f, nil)
	if _, ok := c.g.Next(); ok {
		t.Fatal("Next() after everything committed must be false")
	}
}

// A restate (snapshotstore.Restater: a recovery started past a finding an
// option accepted) is one transaction with nothing new — the seed
// committed again, marked advanced so that the store writes its marker —
// and only one: the marker then records the count, and nothing else is due.
func TestGroupCommitRestateCommitsTheSeedOnce(t *testing.T) {
	c := newGCRecorder(t, 4, 10)
	c.g.Restate()
	f := c.next()
	if len(f.Batch.Writes) != 0 || f.Batch.Offset != 10 || !f.Batch.OffsetAdvanced {
		t.Fatalf("restate batch = {%d writes, Offset %d, Advanced %v}, want {0, 10, true}", len(f.Batch.Writes), f.Batch.Offset, f.Batch.OffsetAdvanced)
	}
	c.g.Complete(f, nil)
	if f, ok := c.g.Next(); ok {
		t.Fatalf("a second transaction after the restate: %+v", f.Batch)
	}
	// Writes queued behind a restate in flight go in the next transaction,
	// which is not marked advanced (the seed is committed).
	c.g.Restate()
	f = c.next()
	c.add("a")
	c.g.Complete(f, nil)
	f = c.next()
	if got := gcKeys(f.Batch); len(got) != 1 || got[0] != "a" || f.Batch.OffsetAdvanced {
		t.Fatalf("after the restate: %v advanced %v, want [a] not advanced", got, f.Batch.OffsetAdvanced)
	}
}

func TestGroupCommitOffsetCommitsDoNotConsumeTheCap(t *testing.T) {
	c := newGCRecorder(t, 2, 0)
	c.add("a")
	c.commitOffset("o1", 5)
	c.add("b")
	c.commitOffset("o2", 6)
	c.add("c")
	c.commitOffset("o3", 7)
	f := c.next()
	if got := gcKeys(f.Batch); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("first flight writes %v, want [a b] (cap 2, offset commits free)", got)
	}
	if f.Batch.Offset != 7 {
		t.Fatalf("first flight offset %d, want 7", f.Batch.Offset)
	}
	c.g.Complete(f, nil)
	for _, n := range []string{"a", "b", "o1", "o2", "o3"} {
		c.answeredOnce(n, nil)
	}
	c.unanswered("c")
	f = c.next()
	if got := gcKeys(f.Batch); fmt.Sprint(got) != "[c]" {
		t.Fatalf("second flight writes %v, want [c]", got)
	}
	if f.Batch.OffsetAdvanced {
		t.Fatal("second flight re-commits offset 7: OffsetAdvanced must be false")
	}
	c.g.Complete(f, nil)
	c.answeredOnce("c", nil)
}

func TestGroupCommitSeedGoesOutWithFirstWriteNotAsAnAdvance(t *testing.T) {
	c := newGCRecorder(t, 0, 42)
	c.add("first")
	f := c.next()
	if f.Batch.Offset != 42 {
		t.Fatalf("first write's batch offset %d, want the seeded assigned offset 42", f.Batch.Offset)
	}
	if f.Batch.OffsetAdvanced {
		t.Fatal("the seed is the already-committed position: OffsetAdvanced must be false")
	}
	c.g.Complete(f, nil)
	c.answeredOnce("first", nil)
}

func TestGroupCommitOffsetNeverGoesBackwards(t *testing.T) {
	c := newGCRecorder(t, 0, 0)
	c.commitOffset("o10", 10)
	c.commitOffset("o5", 5)
	f := c.next()
	if f.Batch.Offset != 10 {
		t.Fatalf("batch offset %d, want 10 (5 is behind)", f.Batch.Offset)
	}
	c.g.Complete(f, nil)
	c.answeredOnce("o10", nil)
	c.answeredOnce("o5", nil)

	c.commitOffset("o7", 7)
	c.add("w")
	f = c.next()
	if f.Batch.Offset != 10 || f.Batch.OffsetAdvanced {
		t.Fatalf("batch after a lower commit = {Offset %d, Advanced %v}, want {10, false}", f.Batch.Offset, f.Batch.OffsetAdvanced)
	}
	c.g.Complete(f, nil)

	// Below the seed, too: nothing to commit, answered at once.
	c2 := newGCRecorder(t, 0, 100)
	c2.commitOffset("low", 50)
	if f, ok := c2.g.Next(); ok {
		t.Fatalf("a transaction for an offset below the seed: %+v", f.Batch)
	}
	c2.answeredOnce("low", nil)
	c2.add("w")
	f = c2.next()
	if f.Batch.Offset != 100 {
		t.Fatalf("batch offset %d, want the seed 100", f.Batch.Offset)
	}
}

func TestGroupCommitLoneWriteGoesOutImmediately(t *testing.T) {
	c := newGCRecorder(t, 256, 0)
	c.add("lone")
	f, ok := c.g.Next()
	if !ok {
		t.Fatal("a lone write must be due at once: no batching delay")
	}
	if got := gcKeys(f.Batch); fmt.Sprint(got) != "[lone]" {
		t.Fatalf("flight writes %v, want [lone]", got)
	}
}

func TestGroupCommitWritesDuringFlightBatchIntoNext(t *testing.T) {
	c := newGCRecorder(t, 3, 0)
	c.add("w0")
	f1 := c.next()
	for i := 1; i <= 5; i++ {
		c.add(fmt.Sprintf("w%d", i))
		if _, ok := c.g.Next(); ok {
			t.Fatal("Next() while a transaction is in flight must be false")
		}
	}
	if p := c.g.Pending(); p != 5 {
		t.Fatalf("Pending() = %d during the flight, want 5", p)
	}
	c.g.Complete(f1, nil)
	c.answeredOnce("w0", nil)
	f2 := c.next()
	if got := gcKeys(f2.Batch); fmt.Sprint(got) != "[w1 w2 w3]" {
		t.Fatalf("second flight %v, want [w1 w2 w3] (batched, capped at 3)", got)
	}
	c.g.Complete(f2, nil)
	f3 := c.next()
	if got := gcKeys(f3.Batch); fmt.Sprint(got) != "[w4 w5]" {
		t.Fatalf("third flight %v, want [w4 w5]", got)
	}
	c.g.Complete(f3, nil)
	for i := 1; i <= 5; i++ {
		c.answeredOnce(fmt.Sprintf("w%d", i), nil)
	}
}

func TestGroupCommitFailureAnswersEveryWaiterOfThatFlight(t *testing.T) {
	boom := errors.New("boom: ILLEGAL_GENERATION")
	c := newGCRecorder(t, 2, 0)
	c.add("a")
	c.add("b")
	c.commitOffset("off", 9)
	c.add("c") // over the cap: not in this flight
	f := c.next()
	c.g.Complete(f, boom)
	for _, n := range []string{"a", "b", "off"} {
		c.answeredOnce(n, boom)
	}
	c.unanswered("c")

	// The failed offset was not committed: the next transaction still
	// reports it as an advance.
	f = c.next()
	if f.Batch.Offset != 9 || !f.Batch.OffsetAdvanced {
		t.Fatalf("after a failed commit, batch = {Offset %d, Advanced %v}, want {9, true}", f.Batch.Offset, f.Batch.OffsetAdvanced)
	}
}

func TestGroupCommitFailPendingAnswersQueuedWritesAndOffsetWaiters(t *testing.T) {
	stopped := errors.New("stopped")
	c := newGCRecorder(t, 1, 0)
	c.add("inflight")
	f := c.next()
	c.add("q1")
	c.add("q2")
	c.commitOffset("off", 3)
	c.g.FailPending(stopped)
	for _, n := range []string{"q1", "q2", "off"} {
		c.answeredOnce(n, stopped)
	}
	c.unanswered("inflight") // FailPending leaves the flight to Complete
	if p := c.g.Pending(); p != 0 {
		t.Fatalf("Pending() = %d after FailPending, want 0", p)
	}
	c.g.Complete(f, nil)
	c.answeredOnce("inflight", nil)
	for _, n := range []string{"q1", "q2", "off"} {
		c.answeredOnce(n, stopped) // still once: FailPending dropped them
	}
}

// The committed offset never leads the writes it covers: a flight's offset is
// exactly what CommitOffset set before Next took it; an offset requested
// while the flight is out goes with the next flight, not this one.
func TestGroupCommitOffsetInFlightIsFixedAtNext(t *testing.T) {
	c := newGCRecorder(t, 0, 0)
	c.add("covered")
	c.commitOffset("o4", 4)
	f1 := c.next()
	if f1.Batch.Offset != 4 {
		t.Fatalf("flight offset %d, want 4 (set before Next)", f1.Batch.Offset)
	}
	c.add("later")
	c.commitOffset("o100", 100) // requested while f1 is out
	if f1.Batch.Offset != 4 {
		t.Fatalf("flight offset changed to %d after Next, want it fixed at 4", f1.Batch.Offset)
	}
	if len(f1.Batch.Writes) != 1 {
		t.Fatalf("flight grew to %d writes after Next", len(f1.Batch.Writes))
	}
	c.g.Complete(f1, nil)
	c.answeredOnce("o4", nil)
	c.unanswered("o100") // its commit has not run yet
	f2 := c.next()
	if f2.Batch.Offset != 100 || fmt.Sprint(gcKeys(f2.Batch)) != "[later]" {
		t.Fatalf("second flight = %v @%d, want [later] @100", gcKeys(f2.Batch), f2.Batch.Offset)
	}
	c.g.Complete(f2, nil)
	c.answeredOnce("o100", nil)

	// Across the whole run, every committed offset is non-decreasing.
	var last int64 = -1
	for _, b := range c.batches {
		if b.Offset < last {
			t.Fatalf("committed offsets went backwards: %d after %d", b.Offset, last)
		}
		last = b.Offset
	}
}

func TestGroupCommitPending(t *testing.T) {
	c := newGCRecorder(t, 0, 0)
	if p := c.g.Pending(); p != 0 {
		t.Fatalf("Pending() = %d, want 0", p)
	}
	c.add("a")
	c.commitOffset("o", 1)
	c.g.CommitOffset(2, nil) // no waiter: not pending
	if p := c.g.Pending(); p != 2 {
		t.Fatalf("Pending() = %d, want 2 (one write, one offset waiter)", p)
	}
	c.next()
	if p := c.g.Pending(); p != 0 {
		t.Fatalf("Pending() = %d with everything in flight, want 0", p)
	}
}

// The cap counts records: a write costs its snapshot plus its outputs, a
// write is never split from its outputs, outputs keep their write order,
// and a write with more outputs than the cap goes alone.
func TestGroupCommitCapCountsOutputs(t *testing.T) {
	c := newGCRecorder(t, 4, 0)
	add := func(key string, outputs int) {
		w := partitionflow.Write{Snapshot: snapshotstore.Snapshot{Key: key}, Done: c.done(key)}
		for i := range outputs {
			w.Outputs = append(w.Outputs, &kgo.Record{Key: []byte(key), Value: fmt.Appendf(nil, "%s%d", key, i)})
		}
		c.g.Add(w)
	}
	add("a", 1) // 2 records
	add("b", 1) // 2: a+b fill the cap of 4
	add("c", 9) // 10: alone
	add("d", 0) // 1
	add("e", 2) // 3: d+e = 4
	c.drain(nil)
	var got []string
	for _, b := range c.batches {
		s := ""
		for _, w := range b.Writes {
			s += w.Key
		}
		s += ":"
		for _, o := range b.Outputs {
			s += string(o.Value) + ","
		}
		got = append(got, s)
	}
	want := []string{"ab:a0,b0,", "c:c0,c1,c2,c3,c4,c5,c6,c7,c8,", "de:e0,e1,"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transactions %q, want %q", got, want)
	}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		c.answeredOnce(k, nil)
	}
}

// A long random run of adds (with varied output counts), offset commits and
// flights, the backlog growing and shrinking, so the queue's consumed prefix
// is reclaimed many times, partly and fully: every flight must be exactly
// what a plain FIFO model with the record cap takes, in order, and every
// write answered once.
func TestGroupCommitMatchesFIFOModelAcrossManyFlights(t *testing.T) {
	const max = 8
	var seed uint64 = 0x2545f4914f6cdd1d
	rnd := func(n int) int {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int(seed % uint64(n))
	}
	type qw struct {
		key     string
		outputs int
	}
	c := newGCRecorder(t, max, 0)
	var model []qw
	var inFlight *partitionflow.Flight
	var want []qw // the writes of inFlight, per the model
	added, flights := 0, 0
	for step := 0; step < 20000; step++ {
		// Phases of filling and draining, so the backlog swings from empty
		// to a few hundred writes.
		filling := (step/500)%2 == 0
		switch op := rnd(10); {
		case op < 6 && (filling || op < 2):
			w := qw{key: fmt.Sprintf("k%05d", added), outputs: rnd(4)}
			if rnd(20) == 0 {
				w.outputs = max + 3 // larger than the cap: goes alone
			}
			added++
			pw := partitionflow.Write{Snapshot: snapshotstore.Snapshot{Key: w.key}, Done: c.done(w.key)}
			for i := range w.outputs {
				pw.Outputs = append(pw.Outputs, &kgo.Record{Value: fmt.Appendf(nil, "%s/%d", w.key, i)})
			}
			c.g.Add(pw)
			model = append(model, w)
		case op == 6:
			c.g.CommitOffset(int64(step), nil)
		default:
			if inFlight != nil {
				c.g.Complete(inFlight, nil)
				inFlight = nil
				continue
			}
			f, ok := c.g.Next()
			if len(model) == 0 {
				if ok && len(f.Batch.Writes) != 0 {
					t.Fatalf("step %d: flight with %d writes from an empty queue", step, len(f.Batch.Writes))
				}
				if ok {
					inFlight = f
				}
				continue
			}
			if !ok {
				t.Fatalf("step %d: Next() = false with %d writes queued and nothing in flight", step, len(model))
			}
			n, records := 0, 0
			for n < len(model) && (n == 0 || records+1+model[n].outputs <= max) {
				records += 1 + model[n].outputs
				n++
			}
			want, model = model[:n], model[n:]
			if len(f.Batch.Writes) != n {
				t.Fatalf("step %d: flight of %d writes, want %d", step, len(f.Batch.Writes), n)
			}
			var outs []string
			for i, w := range want {
				if got := f.Batch.Writes[i].Key; got != w.key {
					t.Fatalf("step %d: flight write %d is %s, want %s (queue order)", step, i, got, w.key)
				}
				for j := range w.outputs {
					outs = append(outs, fmt.Sprintf("%s/%d", w.key, j))
				}
			}
			var got []string
			for _, o := range f.Batch.Outputs {
				got = append(got, string(o.Value))
			}
			if fmt.Sprint(got) != fmt.Sprint(outs) {
				t.Fatalf("step %d: flight outputs %v, want %v", step, got, outs)
			}
			flights++
			inFlight = f
		}
		if p := c.g.Pending(); p != len(model) {
			t.Fatalf("step %d: Pending() = %d, want %d", step, p, len(model))
		}
	}
	if inFlight != nil {
		c.g.Complete(inFlight, nil)
	}
	c.drain(nil)
	for i := range added {
		c.answeredOnce(fmt.Sprintf("k%05d", i), nil)
	}
	if flights < 1000 {
		t.Fatalf("only %d flights: the run did not exercise the queue", flights)
	}
}

// A write taken by a flight is no longer referenced by the queue once the
// flight is done, even while the queue stays non-empty: a taken slot left
// set would pin the write's snapshot and outputs (GBs at a deep backlog).
func TestGroupCommitReleasesTakenWrites(t *testing.T) {
	g := partitionflow.NewGroupCommit(1, 0)
	rec := &kgo.Record{Value: make([]byte, 1<<20)}
	taken := weak.Make(rec)
	g.Add(partitionflow.Write{Outputs: []*kgo.Record{rec}, Done: func(error) {}})
	rec = nil
	// A backlog behind it that stays queued.
	for range 10 {
		g.Add(partitionflow.Write{Done: func(error) {}})
	}
	f, ok := g.Next()
	if !ok || len(f.Batch.Outputs) != 1 {
		t.Fatalf("Next() = %v with %d outputs, want the write with its output", ok, len(f.Batch.Outputs))
	}
	g.Complete(f, nil)
	f = nil
	runtime.GC()
	runtime.GC()
	if taken.Value() != nil {
		t.Fatal("a committed write's output is still reachable from the GroupCommit")
	}
	if p := g.Pending(); p != 10 {
		t.Fatalf("Pending() = %d, want the 10 queued behind", p)
	}
}

// The byte cap ends a transaction before the record cap when the records
// are large, and a write over it goes alone.
func TestGroupCommitByteCapHolds(t *testing.T) {
	c := newGCRecorder(t, 1000, 0)
	c.g.SetMaxBytes(10_000)
	value := make([]byte, 1000) // ~1 KiB per write with its key and framing
	for i := range 25 {
		k := fmt.Sprintf("k%04d", i)
		c.g.Add(partitionflow.Write{Snapshot: snapshotstore.Snapshot{Key: k, Value: value}, Done: c.done(k)})
	}
	big := make([]byte, 50_000)
	c.g.Add(partitionflow.Write{Snapshot: snapshotstore.Snapshot{Key: "big", Value: big}, Done: c.done("big")})
	c.add("after")
	c.drain(nil)
	var sizes []int
	for _, b := range c.batches {
		sizes = append(sizes, len(b.Writes))
	}
	// 9 writes of 1000+5+48 B fit in 10 000 B; the big one goes alone.
	if want := []int{9, 9, 7, 1, 1}; fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
}

// The byte cap counts a snapshot's timers header: 100 writes of a 1-byte
// state with 40 timers each (~1.6 KB records) were charged 53 bytes each,
// so one transaction took all of them, 16 times the cap. Found by a review.
func TestGroupCommitByteCapCountsTimers(t *testing.T) {
	c := newGCRecorder(t, 1000, 0)
	c.g.SetMaxBytes(10_000)
	var ts []snapshotstore.Timer
	for i := range 40 {
		ts = append(ts, snapshotstore.Timer{Name: fmt.Sprintf("timer-%03d", i), At: time.Unix(1_800_000_000, 0)})
	}
	record := 0
	for i := range 100 {
		k := fmt.Sprintf("k%03d", i)
		s := snapshotstore.Snapshot{Key: k, Value: []byte("v"), Timers: ts}
		if i == 0 {
			record = recbytes.Of(snapshotstore.EncodeRecord("snap", 0, s))
		}
		c.g.Add(partitionflow.Write{Snapshot: s, Done: c.done(k)})
	}
	c.drain(nil)
	for _, b := range c.batches {
		if n := len(b.Writes) * record; n > 10_000 {
			t.Fatalf("a transaction of %d writes of %d-byte records: %d bytes against a 10 000-byte cap", len(b.Writes), record, n)
		}
	}
}

// An offset waiter behind a queued write waits for that write's
// transaction, even when its offset is committed already.
func TestOffsetWaiterBehindAWriteWaitsForItsTransaction(t *testing.T) {
	c := newGCRecorder(t, 0, 5)
	c.add("a")
	c.commitOffset("after a write", 5)
	f := c.next()
	if len(f.Batch.Writes) != 1 {
		t.Fatalf("%d writes, want a's", len(f.Batch.Writes))
	}
	c.unanswered("after a write")
	c.g.Complete(f, nil)
	c.answeredOnce("after a write", nil)
}
