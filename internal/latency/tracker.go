// Package latency measures output latency of a ledger pipe: ledger events
// produced at a steady rate to an input topic, and an independent
// read_committed consumer of the output topic that matches every output
// (one ledger.Output per input event) to its input by content: the account
// and its per-account sequence. Shared by `cmd/demo latency` and
// cmd/bench's experiment L. It measures; it asserts nothing.
package latency

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
)

// Tracker matches outputs to inputs. Inputs come from a ledger.Generator:
// round-robin over accounts, so input n is account n%accounts with sequence
// n/accounts+1, and an output (account, seq) names its input's index
// without a map. Safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	accounts int
	sent     []time.Time // produce time (the record's CreateTime) of input n
	measured []bool      // input n was produced in the measured window
	seen     []uint16    // outputs matched to input n
	// balance[n] is the account's balance after input n (the generator's
	// amounts are a function of account and sequence), and running the
	// latest per account: an output whose balance differs was folded from
	// a wrong state (one lost or double-counted through a rebalance).
	balance []int64
	running []int64
	wrong   int
	lats    []time.Duration
	// stage latencies of the measured inputs whose output carries the
	// stamps (Stamps): input → fold, fold → output produced, output
	// produced → visible.
	stages   [3][]time.Duration
	arrivals map[int32][]time.Time // per output partition: the measured inputs' first outputs
	outputs  int
	dups     int
	stray    int
	matched  int
	changed  chan struct{}
}

// NewTracker tracks the inputs of a generator over accounts (> 0).
func NewTracker(accounts int) *Tracker {
	return &Tracker{accounts: accounts, changed: make(chan struct{}, 1)}
}

// Sent records the next input's produce time; measure says whether its
// output's latency counts (it was produced after the warm-up).
func (t *Tracker) Sent(at time.Time, measure bool) {
	t.mu.Lock()
	if t.running == nil {
		t.running = make([]int64, t.accounts)
	}
	// Input n is ledger.Generator's: account i = n % accounts, its seq-th.
	n := len(t.sent)
	i, seq := n%t.accounts, int64(n/t.accounts+1)
	t.running[i] += ledger.Amount(i, seq)
	t.balance = append(t.balance, t.running[i])
	t.sent = append(t.sent, at)
	t.measured = append(t.measured, measure)
	t.seen = append(t.seen, 0)
	t.mu.Unlock()
}

// Stamps are an output's times along the pipe, where the pipe records
// them (zero: not known): Fold, when the fold that emitted it ran (a header
// of the ledger flow, HeaderFold); Produced, the output's CreateTime (the
// producer's Produce call: in a transactional pipe, the transaction's
// produce step).
// Partition is the output's partition (arrivals per partition give
// Result.Stopped); -1 when not known.
type Stamps struct {
	Fold, Produced time.Time
	Partition      int32
	// Balance is the output's balance, checked against the fold of the
	// inputs when HasBalance.
	Balance    int64
	HasBalance bool
}

// Output records an output of account and seq seen at. The first output of
// an input counts; a later one is a duplicate; one that names no input
// produced so far (an unknown account, a sequence not sent) is stray.
func (t *Tracker) Output(account string, seq int64, at time.Time) {
	t.OutputStamped(account, seq, at, Stamps{})
}

// OutputStamped is Output with the output's stage stamps: the latency of
// each stage is kept where both of its ends are known.
func (t *Tracker) OutputStamped(account string, seq int64, at time.Time, st Stamps) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outputs++
	n, ok := t.index(account, seq)
	switch {
	case !ok || n >= len(t.sent):
		t.stray++
	case t.seen[n] > 0:
		t.dups++
		t.seen[n]++
	default:
		t.seen[n] = 1
		t.matched++
		if st.HasBalance && st.Balance != t.balance[n] {
			t.wrong++
		}
		if t.measured[n] {
			t.lats = append(t.lats, at.Sub(t.sent[n]))
			if !st.Fold.IsZero() {
				t.stages[0] = append(t.stages[0], st.Fold.Sub(t.sent[n]))
				if !st.Produced.IsZero() {
					t.stages[1] = append(t.stages[1], st.Produced.Sub(st.Fold))
				}
			}
			if !st.Produced.IsZero() {
				t.stages[2] = append(t.stages[2], at.Sub(st.Produced))
			}
			if st.Partition >= 0 {
				if t.arrivals == nil {
					t.arrivals = map[int32][]time.Time{}
				}
				t.arrivals[st.Partition] = append(t.arrivals[st.Partition], at)
			}
		}
	}
}

// Notify wakes Changed's waiter (non-blocking): call it after a batch of
// Output calls.
func (t *Tracker) Notify() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Changed receives after Notify.
func (t *Tracker) Changed() <-chan struct{} { return t.changed }

// Complete reports whether every input sent so far has an output.
func (t *Tracker) Complete() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.matched == len(t.sent)
}

// index is input n of ledger.AccountKey(i) with seq.
func (t *Tracker) index(account string, seq int64) (int, bool) {
	i, ok := ledger.AccountIndex(account)
	if !ok || i >= t.accounts || seq < 1 {
		return 0, false
	}
	return int(seq-1)*t.accounts + i, true
}

// Result is one measurement. Latencies are over the measured window's
// inputs; the counts are over every input (the warm-up's too).
type Result struct {
	Produced   int // inputs produced
	Measured   int // the window's inputs whose output was seen (the latency sample)
	Missing    int // inputs without an output
	Duplicates int // outputs beyond the first of their input
	Stray      int // outputs that name no input produced
	// WrongBalance counts inputs whose first output carries a balance other
	// than the fold of the account's inputs through it (a pipe that lost
	// or double-counted state).
	WrongBalance int
	Outputs      int     // outputs read
	Achieved     float64 // inputs produced per second, over warm-up and window
	// InputLagP99 and InputLagMax: how late inputs were sent against their
	// schedule (the generator fell behind; their latency leaves that out).
	InputLagP99, InputLagMax time.Duration
	// ReadToEnd: after the last input's output the outputs were read on to
	// their last stable offsets (a late duplicate would have been seen).
	ReadToEnd bool
	P50, P90  time.Duration // input CreateTime → output read read_committed
	P99, Max  time.Duration
	// Stages are the latency's parts, where the outputs carry the stamps
	// (Stamps; zero otherwise): StageFold (input CreateTime → the fold
	// that emitted), StageCommit (fold → output produced: the wait for the
	// transaction that carries it), StageVisible (output produced →
	// read read_committed).
	Stages [3]StageStats
	// Stopped is the longest time no output arrived on one output
	// partition between two outputs of the window's inputs (outputs
	// stopped there, e.g. through a rebalance), StoppedPartition that
	// partition (-1: no partitions known), StoppedAt when the gap began.
	Stopped time.Duration
	// Start is when the load began (the warm-up's start; set by Run).
	Start            time.Time
	StoppedPartition int32
	StoppedAt        time.Time
}

// Stage indices of Result.Stages.
const (
	StageFold = iota
	StageCommit
	StageVisible
)

// StageStats is one stage's sample.
type StageStats struct {
	N             int
	P50, P99, Max time.Duration
}

func stageStats(lats []time.Duration) StageStats {
	lats = slices.Clone(lats)
	slices.Sort(lats)
	s := StageStats{N: len(lats), P50: Percentile(lats, 0.50), P99: Percentile(lats, 0.99)}
	if len(lats) > 0 {
		s.Max = lats[len(lats)-1]
	}
	return s
}

// Complete reports whether every input had an output, no output was stray
// and none carried a wrong balance: only then does a latency figure count.
func (r *Result) Complete() bool { return r.Missing == 0 && r.Stray == 0 && r.WrongBalance == 0 }

// Result sums up what was tracked.
func (t *Tracker) Result() *Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	lats := slices.Clone(t.lats)
	slices.Sort(lats)
	r := &Result{Produced: len(t.sent), Measured: len(lats), Missing: len(t.sent) - t.matched,
		Duplicates: t.dups, Stray: t.stray, Outputs: t.outputs, WrongBalance: t.wrong,
		P50: Percentile(lats, 0.50), P90: Percentile(lats, 0.90), P99: Percentile(lats, 0.99)}
	if len(lats) > 0 {
		r.Max = lats[len(lats)-1]
	}
	for i, st := range t.stages {
		r.Stages[i] = stageStats(st)
	}
	r.Stopped, r.StoppedPartition, r.StoppedAt = t.longestGap(time.Time{}, time.Time{})
	return r
}

// LongestGap is the longest time one output partition went without an
// output between two outputs of the window's inputs, among the gaps that
// begin in [from, to) (a zero bound is open): the partition and the gap's
// start; partition -1 when there is none.
func (t *Tracker) LongestGap(from, to time.Time) (time.Duration, int32, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.longestGap(from, to)
}

func (t *Tracker) longestGap(from, to time.Time) (gap time.Duration, partition int32, at time.Time) {
	partition = -1
	for p, as := range t.arrivals {
		as = slices.Clone(as)
		slices.SortFunc(as, time.Time.Compare)
		for i := 1; i < len(as); i++ {
			if as[i-1].Before(from) || (!to.IsZero() && !as[i-1].Before(to)) {
				continue
			}
			if g := as[i].Sub(as[i-1]); g > gap {
				gap, partition, at = g, p, as[i-1]
			}
		}
	}
	return gap, partition, at
}

// Percentile is the p-quantile (0 ≤ p ≤ 1) of sorted by the nearest-rank
// method: the smallest value with at least p of the sample at or below it;
// 0 for an empty sample.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))+0.999999999) - 1 // ceil(p·n) − 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func (r *Result) String() string {
	return fmt.Sprintf("%d inputs (%.0f/s), %d outputs: %d missing, %d duplicates, %d stray, %d with a wrong balance; latency over %d: p50 %s p90 %s p99 %s max %s",
		r.Produced, r.Achieved, r.Outputs, r.Missing, r.Duplicates, r.Stray, r.WrongBalance, r.Measured, MS(r.P50), MS(r.P90), MS(r.P99), MS(r.Max))
}

// MS formats d in milliseconds with one decimal.
func MS(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
