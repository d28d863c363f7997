package latency

import (
	"github.com/actorflow/actorflow/internal/ledger"

	"testing"
	"time"
)

// Outputs are matched to inputs by (account, seq): the first output of an
// input counts, a second is a duplicate, one naming no input sent is stray,
// an input without output is missing, and only the window's inputs give a
// latency.
func TestTrackerMatchesOutputsToInputs(t *testing.T) {
	tr := NewTracker(2) // inputs: 0 acct-0/1, 1 acct-1/1, 2 acct-0/2, 3 acct-1/2
	t0 := time.Unix(100, 0)
	tr.Sent(t0, false) // warm-up
	tr.Sent(t0.Add(1*time.Millisecond), true)
	tr.Sent(t0.Add(2*time.Millisecond), true)
	tr.Sent(t0.Add(3*time.Millisecond), true)

	tr.Output("acct-0", 1, t0.Add(50*time.Millisecond)) // warm-up input: matched, not measured
	tr.Output("acct-1", 1, t0.Add(11*time.Millisecond)) // 10 ms
	tr.Output("acct-0", 2, t0.Add(32*time.Millisecond)) // 30 ms
	tr.Output("acct-0", 2, t0.Add(40*time.Millisecond)) // duplicate
	tr.Output("acct-0", 3, t0.Add(40*time.Millisecond)) // not sent: stray
	tr.Output("acct-7", 1, t0.Add(40*time.Millisecond)) // unknown account: stray
	tr.Output("", 0, t0.Add(40*time.Millisecond))       // undecodable: stray
	if tr.Complete() {
		t.Fatal("complete with acct-1/2 missing")
	}
	r := tr.Result()
	if r.Produced != 4 || r.Outputs != 7 || r.Missing != 1 || r.Duplicates != 1 || r.Stray != 3 || r.Measured != 2 {
		t.Fatalf("%+v: want 4 produced, 7 outputs, 1 missing, 1 duplicate, 3 stray, 2 measured", r)
	}
	if r.P50 != 10*time.Millisecond || r.Max != 30*time.Millisecond || r.Complete() {
		t.Fatalf("p50 %s max %s complete %v: want 10 ms, 30 ms, incomplete", r.P50, r.Max, r.Complete())
	}
	tr.Output("acct-1", 2, t0.Add(4*time.Millisecond))
	if !tr.Complete() || tr.Result().Missing != 0 {
		t.Fatalf("not complete after the last output: %+v", tr.Result())
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50}, {0.9, 90}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("p%v of 1..100 = %d, want %d", c.p*100, got, c.want)
		}
	}
	if got := Percentile(s[:1], 0.99); got != 1 {
		t.Errorf("p99 of one = %d, want 1", got)
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// A stamped output splits its latency into input → fold → produced →
// visible; an output without stamps counts in the total only, and a
// warm-up input in neither.
func TestTrackerSplitsStampedOutputsIntoStages(t *testing.T) {
	tr := NewTracker(3)
	t0 := time.Unix(100, 0)
	tr.Sent(t0, false)
	tr.Sent(t0, true)
	tr.Sent(t0, true)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tr.OutputStamped("acct-0", 1, ms(90), Stamps{Fold: ms(1), Produced: ms(2), Partition: -1}) // warm-up
	tr.OutputStamped("acct-1", 1, ms(20), Stamps{Fold: ms(3), Produced: ms(12), Partition: -1})
	tr.Output("acct-2", 1, ms(30))
	r := tr.Result()
	want := [3]time.Duration{3 * time.Millisecond, 9 * time.Millisecond, 8 * time.Millisecond}
	for i, w := range want {
		if s := r.Stages[i]; s.N != 1 || s.P50 != w || s.Max != w {
			t.Errorf("stage %d: %+v, want one sample of %s", i, s, w)
		}
	}
	if r.Measured != 2 || r.Max != 30*time.Millisecond {
		t.Errorf("measured %d max %s: want 2, 30 ms (the unstamped output counts in the total)", r.Measured, r.Max)
	}
}

// Stopped is the longest gap between two arrivals on one partition over
// the window's inputs: a warm-up output and another partition's arrivals
// do not close a partition's gap.
func TestTrackerStoppedIsTheLongestGapOfOnePartition(t *testing.T) {
	tr := NewTracker(4)
	t0 := time.Unix(100, 0)
	for i := 0; i < 8; i++ {
		tr.Sent(t0, i >= 4) // inputs 4..7 (acct-0..3, seq 2) are measured
	}
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tr.OutputStamped("acct-0", 1, ms(50), Stamps{Partition: 0}) // warm-up: not an arrival
	tr.OutputStamped("acct-0", 2, ms(10), Stamps{Partition: 0})
	tr.OutputStamped("acct-1", 2, ms(40), Stamps{Partition: 1})
	tr.OutputStamped("acct-2", 2, ms(45), Stamps{Partition: 1})
	tr.OutputStamped("acct-3", 2, ms(210), Stamps{Partition: 0})
	r := tr.Result()
	if r.Stopped != 200*time.Millisecond || r.StoppedPartition != 0 || !r.StoppedAt.Equal(ms(10)) {
		t.Fatalf("stopped %s on %d at %v: want 200 ms on partition 0 from +10 ms", r.Stopped, r.StoppedPartition, r.StoppedAt)
	}
	if g, p, at := tr.LongestGap(ms(20), time.Time{}); g != 5*time.Millisecond || p != 1 || !at.Equal(ms(40)) {
		t.Fatalf("longest gap from +20 ms: %s on %d at %v, want 5 ms on partition 1 from +40 ms", g, p, at)
	}
	if g, p, _ := tr.LongestGap(ms(50), ms(60)); g != 0 || p != -1 {
		t.Fatalf("longest gap in [+50, +60) ms: %s on %d, want none", g, p)
	}
}

// An output's balance is checked against the fold of its account's inputs
// through it: a pipe that restarted an account from an empty state (a
// rebalance without recovery) emits the right sequence numbers with wrong
// balances, and its run is not complete.
func TestTrackerCountsWrongBalances(t *testing.T) {
	tr := NewTracker(2)
	gen := &ledger.Generator{Accounts: 2}
	balance := map[string]int64{}
	t0 := time.Unix(100, 0)
	for range 6 {
		ev := gen.Next()
		balance[ev.Account] += ev.Amount
		tr.Sent(t0, true)
		b := balance[ev.Account]
		if ev.Account == "acct-1" && ev.Seq == 3 {
			b = ev.Amount // folded from nothing: the earlier two lost
		}
		tr.OutputStamped(ev.Account, ev.Seq, t0, Stamps{Partition: -1, Balance: b, HasBalance: true})
	}
	r := tr.Result()
	if r.WrongBalance != 1 || r.Complete() || r.Missing != 0 {
		t.Fatalf("%+v: want 1 wrong balance (acct-1 seq 3), incomplete, nothing missing", r)
	}
}
