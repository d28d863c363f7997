package latency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultDrain is Load.Drain's default.
const DefaultDrain = 2 * time.Minute

// Load is one measurement's input and output.
type Load struct {
	Brokers       []string
	Input, Output string
	Rate          int           // input events per second (> 0)
	Accounts      int           // keys (> 0)
	Warmup        time.Duration // produced, not measured
	Window        time.Duration // produced and measured
	// Drain bounds the wait for the last outputs after the input ends
	// (default DefaultDrain); what has no output by then is Missing.
	Drain time.Duration
	// Opts are added to the load's producer and consumer clients.
	Opts []kgo.Opt
	// Tracker, when set, is the run's tracker (a fresh one, over
	// Accounts): the caller can read it afterwards (LongestGap).
	Tracker *Tracker
}

// Run produces ledger events to l.Input at l.Rate for l.Warmup+l.Window
// while an independent read_committed consumer reads l.Output from its
// start, then waits (up to l.Drain) until every input has an output. The
// pipe under test must already be consuming l.Input. Latency is from an
// input's CreateTime (set by the bench at its produce call, this process's
// clock) to its output's arrival at the consumer. It fails only when the
// load cannot run (a client, a produce); outputs that do not come show as
// Result.Missing.
func Run(ctx context.Context, l Load) (*Result, error) {
	if l.Rate <= 0 || l.Accounts <= 0 || l.Window <= 0 {
		return nil, fmt.Errorf("latency load: rate %d, accounts %d, window %s: all must be positive", l.Rate, l.Accounts, l.Window)
	}
	if l.Drain <= 0 {
		l.Drain = DefaultDrain
	}
	tr := l.Tracker
	if tr == nil {
		tr = NewTracker(l.Accounts)
	}
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(l.Brokers...), kgo.ConsumeTopics(l.Output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A short long-poll so an empty read_committed fetch (the LSO not
		// yet past new records) is retried soon.
		kgo.FetchMaxWait(50 * time.Millisecond), kgo.KeepControlRecords()}, l.Opts...)...)
	if err != nil {
		return nil, fmt.Errorf("latency consumer: %w", err)
	}
	defer cons.Close()
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	cdone := make(chan struct{})
	var posMu sync.Mutex
	read := map[int32]int64{} // per output partition, the offset after the last record read (markers too)
	go func() {
		defer close(cdone)
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			now := time.Now()
			posMu.Lock()
			fs.EachRecord(func(r *kgo.Record) { read[r.Partition] = max(read[r.Partition], r.Offset+1) })
			posMu.Unlock()
			fs.EachRecord(func(r *kgo.Record) {
				if r.Attrs.IsControl() {
					return // kept only to move read past a transaction's end
				}
				var o ledger.Output
				if json.Unmarshal(r.Value, &o) != nil {
					o = ledger.Output{} // counted as stray
				}
				tr.OutputStamped(o.Account, o.Seq, now, Stamps{Fold: ledger.FoldTime(r), Produced: r.Timestamp, Partition: r.Partition,
					Balance: o.Balance, HasBalance: true})
			})
			tr.Notify()
		}
	}()

	pcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(l.Brokers...), kgo.DefaultProduceTopic(l.Input),
		kgo.ProducerLinger(0)}, l.Opts...)...)
	if err != nil {
		return nil, fmt.Errorf("latency producer: %w", err)
	}
	defer pcl.Close()
	var perr atomic.Pointer[error]
	start := time.Now()
	produced, lags, err := produce(ctx, pcl, l, tr, func(_ *kgo.Record, err error) {
		if err != nil {
			perr.CompareAndSwap(nil, &err)
		}
	})
	if err == nil {
		err = pcl.Flush(ctx)
	}
	if e := perr.Load(); e != nil && err == nil {
		err = *e
	}
	if err != nil {
		return nil, fmt.Errorf("produce to %s: %w", l.Input, err)
	}

	drain := time.NewTimer(l.Drain)
	defer drain.Stop()
wait:
	for !tr.Complete() {
		select {
		case <-tr.Changed():
		case <-drain.C:
			break wait // what has no output now is missing
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	readEnd := false
	if tr.Complete() {
		// Every input has an output; a duplicate committed since would be
		// missed: read on to the output's last stable offsets now (the
		// read_committed end), waiting at most a few seconds.
		readEnd = readToEnd(ctx, cons, l.Output, tr, func(p int32) int64 { posMu.Lock(); defer posMu.Unlock(); return read[p] })
	}
	ccancel()
	<-cdone
	r := tr.Result()
	r.Start = start
	r.Achieved = float64(produced) / (l.Warmup + l.Window).Seconds()
	r.ReadToEnd = readEnd
	if len(lags) > 0 { // produce fails when it sent nothing
		slices.Sort(lags)
		r.InputLagP99, r.InputLagMax = Percentile(lags, 0.99), lags[len(lags)-1]
	}
	return r, nil
}

// readToEnd waits until read(p) reaches topic's last stable offset of each
// partition p (as listed now), or 10 s pass; it reports whether it did.
func readToEnd(ctx context.Context, cl *kgo.Client, topic string, tr *Tracker, read func(int32) int64) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return false
	}
	for {
		behind := false
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil && read(o.Partition) < o.Offset {
				behind = true
			}
		})
		if !behind {
			return true
		}
		select {
		case <-tr.Changed():
		case <-ctx.Done():
			return false
		}
	}
}

// produce sends l.Rate events per second until warm-up and window have
// passed, recording each in tr, and returns how many it sent and how late
// each was sent against its schedule (input n at n/rate from the start):
// the generator shares the CPU with the system under test, and an input
// sent late is stamped late, which leaves the wait out of its latency.
func produce(ctx context.Context, pcl *kgo.Client, l Load, tr *Tracker, promise func(*kgo.Record, error)) (int, []time.Duration, error) {
	gen := &ledger.Generator{Accounts: l.Accounts}
	const tick = 5 * time.Millisecond
	start := time.Now()
	measureFrom, end := start.Add(l.Warmup), start.Add(l.Warmup+l.Window)
	t := time.NewTicker(tick)
	defer t.Stop()
	produced := 0
	var lags []time.Duration
	for now := start; now.Before(end); {
		// From the time elapsed, not the ticks: a slow tick (a busy
		// machine drops them) does not lower the rate.
		due := float64(l.Rate) * now.Sub(start).Seconds()
		for float64(produced) < due {
			rec := ledger.Record(l.Input, gen.Next())
			rec.Timestamp = time.Now() // the CreateTime the latency starts from
			lags = append(lags, max(rec.Timestamp.Sub(start.Add(time.Duration(float64(produced)/float64(l.Rate)*float64(time.Second)))), 0))
			tr.Sent(rec.Timestamp, !rec.Timestamp.Before(measureFrom))
			pcl.Produce(ctx, rec, promise)
			produced++
		}
		select {
		case now = <-t.C:
		case <-ctx.Done():
			return produced, lags, ctx.Err()
		}
	}
	if produced == 0 {
		return 0, nil, errors.New("no input produced")
	}
	return produced, lags, nil
}
