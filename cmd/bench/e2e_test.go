package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSummarizeCountsOnlyValidRunsAndRatesAgainstTheCeiling(t *testing.T) {
	c := e2eConfig{events: 1_000_000, systems: []string{sysRaw, sysTxn, sysRawOut, sysTxnOut}}
	run := func(drainS float64, valid bool, note string) e2eRun {
		return e2eRun{childResult: childResult{DrainMS: drainS * 1000, LastFoldMS: drainS * 900, CPUSeconds: 2, HostCPUSeconds: 3, Allocs: 17_500_000, Drained: valid, Commits: int64(drainS * 10)}, RSSKiB: 100 << 10, Valid: valid, Note: note}
	}
	rows := summarize(10000, c, map[string][]e2eRun{
		sysRaw:    {run(3, true, ""), run(5, true, ""), run(4, true, "")},
		sysTxn:    {run(4, true, ""), run(99, false, "folded 5 of 1000000 records"), run(6, true, "")},
		sysRawOut: {run(2, true, "")},
		sysTxnOut: {run(1, false, "not drained")},
	})
	byName := map[string]e2eRow{}
	for _, r := range rows {
		byName[r.System] = r
	}
	raw, txn, out := byName[sysRaw], byName[sysTxn], byName[sysTxnOut]
	if raw.DrainS != 4 || raw.DrainMinS != 3 || raw.DrainMaxS != 5 || raw.Rounds != 3 {
		t.Errorf("raw: median %v [%v–%v] over %d rounds, want 4 [3–5] over 3", raw.DrainS, raw.DrainMinS, raw.DrainMaxS, raw.Rounds)
	}
	if txn.Rounds != 2 || txn.DrainS != 5 || len(txn.Notes) != 1 || !strings.Contains(txn.Notes[0], "folded 5") {
		t.Errorf("txn: %d rounds, median %v, notes %q; want the invalid run left out (2 rounds, median 5) and noted", txn.Rounds, txn.DrainS, txn.Notes)
	}
	if txn.Ratio != 0.8 || txn.RatioBest != 0.75 || txn.Ceiling != sysRaw {
		t.Errorf("txn ratio %v (fastest %v) to %s, want 0.8 (4 s / 5 s) and 0.75 (3 s / 4 s) to raw", txn.Ratio, txn.RatioBest, txn.Ceiling)
	}
	if txn.CPUPerM != 2 || txn.HostCPUPerM != 3 || txn.RSSMiB != 100 || txn.EventsPerS != 200_000 || txn.AllocsPerE != 17.5 {
		t.Errorf("txn: %v CPU s per 1M (host %v), %v MiB, %v events/s, %v allocations per event; want 2 (3), 100, 200000, 17.5", txn.CPUPerM, txn.HostCPUPerM, txn.RSSMiB, txn.EventsPerS, txn.AllocsPerE)
	}
	if txn.TailS != 0.5 || txn.LastFoldS != 4.5 {
		t.Errorf("txn: tail %v s after the last fold at %v s, want 0.5 (the median of the valid runs' 0.4 and 0.6) and 4.5", txn.TailS, txn.LastFoldS)
	}
	if txn.Commits != 50 {
		t.Errorf("txn: %v commits, want 50 (the median of the valid runs' 40 and 60)", txn.Commits)
	}
	// Paired by round: 3/4 in round 1, round 2's txn invalid, 4/6 in round 3.
	if txn.PairedRounds != 2 || txn.RatioPaired != round3((0.75+4.0/6)/2) || txn.RatioPairedMin != round3(4.0/6) || txn.RatioPairedMax != 0.75 {
		t.Errorf("txn paired: %v [%v–%v] over %d rounds, want the median of 0.75 and 0.667 over 2", txn.RatioPaired, txn.RatioPairedMin, txn.RatioPairedMax, txn.PairedRounds)
	}
	if raw.PairedRounds != 0 {
		t.Errorf("the ceiling paired with itself: %d rounds", raw.PairedRounds)
	}
	if out.Rounds != 0 || out.Ratio != 0 || out.Ceiling != sysRawOut {
		t.Errorf("txn-out without a valid run: %d rounds, ratio %v, ceiling %s", out.Rounds, out.Ratio, out.Ceiling)
	}
}

// The recoveries (--e2e-recovery) are summarized over the valid ones, an
// invalid one noted.
func TestSummarizeRecoveries(t *testing.T) {
	c := e2eConfig{events: 1_000_000, systems: []string{sysTxn}}
	rec := func(s float64, rssMiB, liveMiB int64, note string) *e2eRun {
		return &e2eRun{childResult: childResult{RecoverMS: s * 1000, LiveAfterHeap: liveMiB << 20, Drained: note == ""}, RSSKiB: rssMiB << 10, Valid: note == "", Note: note}
	}
	drained := func(r *e2eRun) e2eRun {
		return e2eRun{childResult: childResult{DrainMS: 1000, Drained: true}, Valid: true, Recovery: r}
	}
	rows := summarize(10000, c, map[string][]e2eRun{
		sysTxn: {drained(rec(2, 900, 200, "")), drained(rec(9, 5000, 900, "recovery: context deadline exceeded")), drained(rec(4, 1100, 220, "")), drained(nil)},
	})
	r := rows[0]
	if r.RecoverRuns != 2 || r.RecoverS != 3 || r.RecoverMinS != 2 || r.RecoverMaxS != 4 || r.RecoverRSS != 1000 || r.RecoverLive != 210 {
		t.Errorf("recovery %v s [%v–%v], %v MiB RSS, %v MiB live over %d runs; want 3 [2–4], 1000, 210 over the 2 valid ones", r.RecoverS, r.RecoverMinS, r.RecoverMaxS, r.RecoverRSS, r.RecoverLive, r.RecoverRuns)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "deadline") {
		t.Errorf("notes %q, want the invalid recovery's", r.Notes)
	}
}

func TestParseOrderings(t *testing.T) {
	if o, err := parseOrderings("all"); err != nil || len(o) != len(allOrderings) {
		t.Errorf("all: %v %v", o, err)
	}
	if o, err := parseOrderings("commit-first, concurrent"); err != nil || len(o) != 2 || o[0] != orderCommitFirst || o[1] != orderConcurrent {
		t.Errorf("two: %v %v", o, err)
	}
	if _, err := parseOrderings("sideways"); err == nil {
		t.Error("an unknown ordering was accepted")
	}
}

func TestWatchFoldsTimesTheFirstAndTheLastFold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var processed atomic.Int64
	start := time.Now()
	folds := watchFolds(ctx, &processed, 3, start)
	if first, last := folds(); first != 0 || last != 0 {
		t.Fatalf("before any fold: first %v, last %v ms; want 0, 0", first, last)
	}
	processed.Add(1)
	waitFor(t, func() bool { first, _ := folds(); return first > 0 })
	if _, last := folds(); last != 0 {
		t.Fatalf("1 of 3 folded: last %v ms, want 0 (not all folded)", last)
	}
	processed.Add(2)
	waitFor(t, func() bool { _, last := folds(); return last > 0 })
	if first, last := folds(); last < first {
		t.Fatalf("first fold at %v ms after the last at %v ms", first, last)
	}
}

// waitFor polls cond (the watcher samples every millisecond: nothing to
// await but its result).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// The machine's busy CPU grows with work done, by about what this process
// did (its own CPU is part of it).
func TestHostCPUCountsThisProcessesWork(t *testing.T) {
	h0, c0 := hostCPU(), cpuTime()
	if h0 == 0 {
		t.Skip("no /proc/stat")
	}
	for cpuTime()-c0 < 300*time.Millisecond {
	}
	if d := hostCPU() - h0; d < 200*time.Millisecond {
		t.Fatalf("host CPU grew by %v while this process spun for 300 ms", d)
	}
}

// A process's CPU from /proc/<pid>/stat grows by what it spent: this
// process's own, read the way the broker's is.
func TestProcsCPUReadsAProcessesCPU(t *testing.T) {
	self := []int{os.Getpid()}
	p0, ok := procsCPU(self)
	if !ok {
		t.Skip("no /proc/<pid>/stat")
	}
	c0 := cpuTime()
	for cpuTime()-c0 < 300*time.Millisecond {
	}
	p1, _ := procsCPU(self)
	if d := p1 - p0; d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("/proc/self/stat CPU grew by %v while this process spun for 300 ms", d)
	}
	if _, ok := procsCPU(nil); ok {
		t.Fatal("no processes read as measured")
	}
	if got, err := parsePIDs(joinPIDs([]int{12, 345})); err != nil || len(got) != 2 || got[0] != 12 || got[1] != 345 {
		t.Fatalf("pid list round trip: %v, %v", got, err)
	}
	if got, err := parsePIDs(""); err != nil || got != nil {
		t.Fatalf("empty pid list: %v, %v", got, err)
	}
	if _, err := parsePIDs("12,kafka"); err == nil {
		t.Fatal("a pid list with a word in it parsed")
	}
}

var sink []string

// Allocations per event count tiny allocations too (short strings, as a
// key made of a record's bytes): the runtime's heap object count alone
// missed three in four of them.
func TestHeapAllocsCountsTinyAllocations(t *testing.T) {
	const n = 100_000
	b := []byte("abcd")
	sink = make([]string, 0, n)
	before := heapAllocs()
	for range n {
		sink = append(sink, string(b))
	}
	if got := heapAllocs() - before; got < n {
		t.Fatalf("%d allocations counted for %d four-byte strings", got, n)
	}
}

// countOutputs reads the output topic read_committed to its end: records
// and distinct outputs, an aborted transaction's left out.
func TestCountOutputsCountsCommittedRecordsAndDistinctOutputs(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	ctx := context.Background()
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic("out"), kgo.TransactionalID("t"))
	if err := createTopicN(ctx, kadm.NewClient(cl), "out", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(commit bool, outs ...ledger.Output) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for _, o := range outs {
			b, _ := json.Marshal(o)
			r := &kgo.Record{Key: []byte(o.Account), Value: b}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		if err := kgotxn.EndTransaction(ctx, cl, kgo.TransactionEndTry(commit), 10*time.Second, recs...); err != nil {
			t.Fatal(err)
		}
	}
	produce(true, ledger.Output{Account: "a", Seq: 1}, ledger.Output{Account: "b", Seq: 1}, ledger.Output{Account: "a", Seq: 1})
	produce(false, ledger.Output{Account: "c", Seq: 1})
	total, distinct, err := countOutputs(ctx, brokers, "out")
	if err != nil || total != 3 || distinct != 2 {
		t.Fatalf("countOutputs = %d, %d, %v; want 3 records, 2 distinct, the aborted one left out", total, distinct, err)
	}
}
