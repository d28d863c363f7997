package partitionflow_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// state64 is a 64-byte state.
type state64 struct{ A, B, C, D, E, F, G, H int64 }

// countingFold folds into state64 and signals when target folds are done.
func countingFold(n *atomic.Int64, target int64, done chan struct{}) keyflow.FoldFunc[state64] {
	return func(_ *keyflow.Context, s *state64, _ *kgo.Record) (*state64, error) {
		if s == nil {
			s = &state64{}
		}
		s.A++
		if n.Add(1) == target {
			close(done)
		}
		return s, nil
	}
}

// discard is a store that persists nothing: benchmarks measure the actor
// tree, not a store.
type discard struct{}

func (discard) Recover(context.Context, func(snapshotstore.Snapshot) error) error { return nil }
func (discard) Commit(context.Context, snapshotstore.Batch) error                 { return nil }
func (discard) Close(context.Context) error                                       { return nil }
func (discard) CommitsOutputs() bool                                              { return false }

func spawnBench(b *testing.B, h any, persist time.Duration) (func() partitionflow.Status, func(*partitionflow.Records), func()) {
	b.Helper()
	var store snapshotstore.Partition = discard{}
	sys := actors.NewSystem(nil)
	stopped := make(chan error, 1)
	pid := sys.Root.Spawn(partitionflow.Props(partitionflow.Config{
		Topic: topic, Store: store, Handler: runtimeOf(h),
		PersistEvery: persist, CommitOffsetsInterval: persist,
		OnStopped: func(err error) { stopped <- err },
	}))
	send := func(r *partitionflow.Records) { sys.Root.Send(pid, r) }
	stop := func() {
		sys.Root.Send(pid, &partitionflow.Revoke{})
		<-stopped
	}
	status := func() partitionflow.Status {
		reply := make(chan partitionflow.Status, 1)
		sys.Root.Send(pid, &partitionflow.StatusRequest{Reply: reply})
		return <-reply
	}
	return status, send, stop
}

// BenchmarkThroughput measures events/s through the actor tree (partition
// actor → key actors → group commit → in-memory store): 10k keys, poll
// batches of 500, default persist and commit intervals (5 s).
//
//	go test ./partitionflow -run '^$' -bench Throughput -benchtime 2000000x
func BenchmarkThroughput(b *testing.B) {
	const keys, batch = 10_000, 500
	keyNames := make([][]byte, keys)
	for i := range keyNames {
		keyNames[i] = []byte("key-" + strconv.Itoa(i))
	}
	var n atomic.Int64
	done := make(chan struct{})
	_, send, stop := spawnBench(b, keyflow.New(countingFold(&n, int64(b.N), done)), 5*time.Second)
	defer stop()
	// Build the batches before timing.
	var batches []*partitionflow.Records
	for off := 0; off < b.N; off += batch {
		recs := make([]*kgo.Record, 0, batch)
		for i := off; i < min(off+batch, b.N); i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Offset: int64(i), Key: keyNames[i%keys]})
		}
		batches = append(batches, &partitionflow.Records{Records: recs})
	}
	b.ResetTimer()
	start := time.Now()
	for _, r := range batches {
		send(r)
	}
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkHeapPerKey measures the live heap per loaded key actor with a
// 64-byte state, beyond the state itself (actor, mailbox, partition entry).
//
//	go test ./partitionflow -run '^$' -bench HeapPerKey -benchtime 1x
//
// KEYS/ keeps every key loaded (WithMaxLiveKeys(0)): the heap of a loaded
// idle key actor. KEYS-budget/ runs with the default live-key budget: the
// heap per key when all but the budget's are unloaded to their snapshot's
// bytes.
func BenchmarkHeapPerKey(b *testing.B) {
	for _, tc := range []struct {
		keys   int
		name   string
		budget keyflow.Option
	}{
		{100_000, "100000", keyflow.WithMaxLiveKeys(0)},
		{1_000_000, "1000000", keyflow.WithMaxLiveKeys(0)},
		{100_000, "100000-budget", nil},
		{1_000_000, "1000000-budget", nil},
	} {
		keys := tc.keys
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				var n atomic.Int64
				done := make(chan struct{})
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				status, send, stop := spawnBench(b, keyflow.New(countingFold(&n, int64(keys), done), keyflow.WithMaxIdle(0), tc.budget), 100*time.Millisecond)
				for off := 0; off < keys; off += 500 {
					recs := make([]*kgo.Record, 0, 500)
					for i := off; i < min(off+500, keys); i++ {
						recs = append(recs, &kgo.Record{Topic: topic, Offset: int64(i), Key: []byte("key-" + strconv.Itoa(i))})
					}
					send(&partitionflow.Records{Records: recs})
				}
				<-done
				// Wait until every key is persisted (the committable offset
				// is past all records: holds released, dirty set cleared) and
				// the mailboxes are drained, then measure what stays: loaded
				// idle keys.
				for status().Committable < int64(keys) {
					time.Sleep(50 * time.Millisecond)
				}
				time.Sleep(200 * time.Millisecond)
				status()
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				perKey := float64(after.HeapAlloc-before.HeapAlloc) / float64(keys)
				b.ReportMetric(perKey, "B/key")
				b.ReportMetric(perKey-64-8, "B/key-beyond-state")
				stop()
			}
		})
	}
}

// pendingSizes are the backlogs the pure-logic benchmarks run at: a busy
// partition at 10k keys and at a million.
var pendingSizes = []struct {
	name string
	n    int
}{{"10k", 10_000}, {"1M", 1_000_000}}

// BenchmarkGroupCommit measures one transaction's decision (Next + Complete)
// with n writes queued behind it, in steady state: each op adds a cap's worth
// of writes and takes one flight, so the backlog stays at n. It must cost
// O(cap), not O(backlog). At 1M the first ops also pay the queue's one-time
// growth past the prefill (copying the backlog), which a short run does not
// amortize: -benchtime 100000x shows the steady state.
//
//	go test ./partitionflow -run '^$' -bench GroupCommit -benchmem
func BenchmarkGroupCommit(b *testing.B) {
	noop := func(error) {}
	w := partitionflow.Write{Snapshot: snapshotstore.Snapshot{Key: "key", Value: make([]byte, 64)}, Done: noop}
	for _, size := range pendingSizes {
		b.Run("pending="+size.name, func(b *testing.B) {
			max := partitionflow.DefaultMaxWritesPerTransaction
			g := partitionflow.NewGroupCommit(max, 0)
			for range size.n {
				g.Add(w)
			}
			b.ResetTimer()
			for range b.N {
				for range max {
					g.Add(w)
				}
				f, ok := g.Next()
				if !ok || len(f.Batch.Writes) != max {
					b.Fatalf("Next() = %v with %d writes, want a flight of %d", ok, len(f.Batch.Writes), max)
				}
				g.Complete(f, nil)
			}
			b.StopTimer()
			if p := g.Pending(); p != size.n {
				b.Fatalf("Pending() = %d, want the steady backlog %d", p, size.n)
			}
		})
	}
}

// BenchmarkOffsetTracker measures one key's settle-and-redispatch cycle
// followed by Committable, with n keys holding: the key holding the lowest
// offset settles (so the minimum moves every op) and is dispatched again
// above everything. It must cost O(log n), not O(n).
//
//	go test ./partitionflow -run '^$' -bench OffsetTracker -benchmem
func BenchmarkOffsetTracker(b *testing.B) {
	for _, size := range pendingSizes {
		b.Run("holds="+size.name, func(b *testing.B) {
			keys := make([]string, size.n)
			tr := partitionflow.NewOffsetTracker(0)
			for i := range keys {
				keys[i] = "key-" + strconv.Itoa(i)
				tr.Dispatched(keys[i], int64(i), int64(i))
			}
			next := int64(size.n)
			b.ResetTimer()
			for i := range b.N {
				k := keys[i%size.n]
				tr.Settled(k, next-int64(size.n))
				tr.Dispatched(k, next, next)
				next++
				if got, want := tr.Committable(), next-int64(size.n); got != want {
					b.Fatalf("Committable() = %d, want %d", got, want)
				}
			}
		})
	}
}

// BenchmarkFreshKeys measures the life of a key that is seen once (the E2E
// run at a million keys, where nearly every event meets a key not loaded):
// held, loaded, folded, persisted, evicted to its snapshot's bytes, with the
// default live-key budget, through a store that persists nothing. One op is
// one event of a new key; the clock stops when every one is committable.
// At most window records are sent ahead of the folds, as the consumer's
// in-flight budget would.
//
//	go test ./partitionflow -run '^$' -bench FreshKeys -benchtime 1000000x -count 5
func BenchmarkFreshKeys(b *testing.B) {
	const batch, window = 500, 20_000
	var n atomic.Int64
	done := make(chan struct{})
	folded := make(chan struct{}, window)
	fold := countingFold(&n, int64(b.N), done)
	paced := func(c *keyflow.Context, s *state64, r *kgo.Record) (*state64, error) {
		folded <- struct{}{}
		return fold(c, s, r)
	}
	status, send, stop := spawnBench(b, keyflow.New(paced, keyflow.WithMaxIdle(0)), 100*time.Millisecond)
	defer stop()
	var batches []*partitionflow.Records
	for off := 0; off < b.N; off += batch {
		recs := make([]*kgo.Record, 0, batch)
		for i := off; i < min(off+batch, b.N); i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Offset: int64(i), Key: []byte("key-" + strconv.Itoa(i))})
		}
		batches = append(batches, &partitionflow.Records{Records: recs})
	}
	runPaced(b, batches, window, folded, done, send, status)
}

// BenchmarkScatteredKeys measures the fold path when each key has several
// records in a poll batch, the 10k-key E2E run's common case: 1 250 keys
// (one partition's share of 10k) in batches of 8 192 records laid out as kgo
// decodes them (one []kgo.Record slab and one value buffer per batch, the
// keys interleaved), so a key's next record is far from its last; the fold
// reads the record's value, as a decoder does. Two batches in flight. It
// reports the process's CPU per record.
//
//	go test ./partitionflow -run '^$' -bench ScatteredKeys -benchtime 2000000x -count 5
func BenchmarkScatteredKeys(b *testing.B) {
	const keys, batch, valueLen = 1_250, 8_192, 100
	window := 2 * batch
	var n atomic.Int64
	done := make(chan struct{})
	folded := make(chan struct{}, window)
	fold := countingFold(&n, int64(b.N), done)
	var sink atomic.Int64
	reading := func(c *keyflow.Context, s *state64, r *kgo.Record) (*state64, error) {
		var sum int64
		for _, v := range r.Value {
			sum += int64(v)
		}
		sink.Add(sum + r.Offset)
		folded <- struct{}{}
		return fold(c, s, r)
	}
	status, send, stop := spawnBench(b, keyflow.New(reading), 100*time.Millisecond)
	defer stop()
	keyNames := make([][]byte, keys)
	for i := range keyNames {
		keyNames[i] = []byte("key-" + strconv.Itoa(i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var batches []*partitionflow.Records
	for off := 0; off < b.N; off += batch {
		m := min(batch, b.N-off)
		slab := make([]kgo.Record, m)
		values := make([]byte, m*valueLen)
		recs := make([]*kgo.Record, m)
		for i := range slab {
			slab[i] = kgo.Record{Topic: topic, Offset: int64(off + i), Key: keyNames[rng.IntN(keys)],
				Value: values[i*valueLen : (i+1)*valueLen]}
			recs[i] = &slab[i]
		}
		batches = append(batches, &partitionflow.Records{Records: recs})
	}
	runPaced(b, batches, window, folded, done, send, status)
}

// runPaced sends the batches with at most window records not yet folded
// (each fold receives from folded), waits for every fold (done) and their
// offsets to be committable, and reports the process's CPU per record
// (cpu-ns/op): steadier than the wall clock on a shared 2-core host.
func runPaced(b *testing.B, batches []*partitionflow.Records, window int, folded, done <-chan struct{},
	send func(*partitionflow.Records), status func() partitionflow.Status) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	sent := 0
	for _, r := range batches {
		for ; sent+len(r.Records) > window; sent-- {
			<-folded
		}
		send(r)
		sent += len(r.Records)
	}
	// No more receives: at most window folds were not received, and the
	// channel holds that many.
	<-done
	for status().Committable < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}
