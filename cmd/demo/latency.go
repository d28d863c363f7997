package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// runLatency measures output latency: ledger events produced at a steady
// rate, one worker in this process emitting one output per event, and an
// independent read_committed consumer of the output topic. Latency is from
// the input's produce call to the output's arrival at that consumer, for
// inputs produced during the measured window (after the warm-up). It
// measures; it asserts nothing.
//
//	go run ./cmd/demo latency --brokers localhost:9092 --rate 2000 --warmup 20s --duration 40s
func runLatency(args []string) int {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	brokersF := fs.String("brokers", "", "seed brokers (default: an embedded kfake cluster)")
	modeF := fs.String("mode", "transactional", "plain | transactional")
	rate := fs.Int("rate", 2000, "input events per second")
	accounts := fs.Int("accounts", 10000, "accounts (keys)")
	partitions := fs.Int("partitions", 8, "partitions of the fresh topics")
	warmup := fs.Duration("warmup", 20*time.Second, "produced but not measured")
	duration := fs.Duration("duration", 40*time.Second, "the measured window")
	persist := fs.Duration("persist-every", 5*time.Second, "WithPersistEvery and WithCommitOffsetsInterval")
	_ = fs.Parse(args)
	mode, err := parseMode(*modeF)
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	brokers := splitBrokers(*brokersF)
	if len(brokers) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			fmt.Fprintln(os.Stderr, "latency:", err)
			return 2
		}
		defer c.Close()
		brokers = c.ListenAddrs()
	}
	r, err := measureLatency(ctx, brokers, mode, *rate, *accounts, int32(*partitions), *warmup, *duration, *persist)
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		return 2
	}
	fmt.Println(r)
	return 0
}

type latencyResult struct {
	Mode                    string
	Rate, Measured, Missing int
	Achieved                float64 // input events/s actually produced
	P50, P90, P99, Max      time.Duration
	Outputs, Dups           int
	Produced                int
	Window, Warmup, Persist time.Duration
	Partitions, Accounts    int
}

func (r latencyResult) String() string {
	return fmt.Sprintf("mode %s, %d events/s (%.0f produced), %d accounts, %d partitions, persist-every %s: %d outputs measured (window %s after %s warm-up), %d missing, %d duplicates read_committed\n"+
		"latency input produce -> output visible read_committed: p50 %s  p90 %s  p99 %s  max %s",
		r.Mode, r.Rate, r.Achieved, r.Accounts, r.Partitions, r.Persist, r.Measured, r.Window, r.Warmup, r.Missing, r.Dups,
		ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func measureLatency(ctx context.Context, brokers []string, mode snapshotstore.Mode, rate, accounts int, partitions int32,
	warmup, window, persist time.Duration) (*latencyResult, error) {
	run := fmt.Sprintf("lat-%d", time.Now().UnixNano()%1e9)
	input, snaps, out, group := run+"-in", run+"-snaps", run+"-out", run
	log, _ := zap.NewProduction(zap.IncreaseLevel(zap.WarnLevel))
	var folds atomic.Int64
	var producer *kgo.Client
	if mode == snapshotstore.Plain {
		var err error
		if producer, err = kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0)); err != nil {
			return nil, err
		}
		defer producer.Close()
	}
	w, err := actorflow.NewWorker(ledger.FlowWithOutput(producer, out, &folds),
		actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithMode(mode), actorflow.WithTransactionalIDPrefix(group),
		actorflow.WithCreateTopics(partitions, -1),
		actorflow.WithPersistEvery(persist), actorflow.WithCommitOffsetsInterval(persist),
		actorflow.WithLogger(log))
	if err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() { wcancel(); <-wdone }()
	// Wait for the topics and the assignment.
	for st := w.Status(ctx); len(st.Partitions) < int(partitions); st = w.Status(ctx) {
		select {
		case err := <-wdone:
			return nil, fmt.Errorf("worker: %w", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}

	// sent: account/seq → produce time of inputs in the window.
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lats []time.Duration
	dups, outputs := 0, 0
	seen := map[string]bool{}
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	cdone := make(chan struct{})
	go func() {
		defer close(cdone)
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				var o ledger.Output
				if json.Unmarshal(r.Value, &o) != nil {
					return
				}
				outputs++
				id := fmt.Sprintf("%s/%d", o.Account, o.Seq)
				if seen[id] {
					dups++
					return
				}
				seen[id] = true
				if at, ok := sent[id]; ok {
					lats = append(lats, now.Sub(at))
					delete(sent, id)
				}
			})
			mu.Unlock()
		}
	}()

	pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(input), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer pcl.Close()
	gen := &ledger.Generator{Accounts: accounts}
	const tick = 5 * time.Millisecond
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+window)
	t := time.NewTicker(tick)
	produced := 0
	var perr atomic.Value
	for now := start; now.Before(end); now = <-t.C {
		// From the time elapsed, not the ticks: a slow tick (a busy
		// machine drops them) does not lower the rate.
		due := float64(rate) * now.Sub(start).Seconds()
		for float64(produced) < due {
			ev := gen.Next()
			rec := ledger.Record(input, ev)
			if ts := time.Now(); !ts.Before(measureFrom) {
				mu.Lock()
				sent[fmt.Sprintf("%s/%d", ev.Account, ev.Seq)] = ts
				mu.Unlock()
			}
			pcl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.Store(err)
				}
			})
			produced++
		}
	}
	t.Stop()
	if err := pcl.Flush(ctx); err != nil {
		return nil, err
	}
	if e, ok := perr.Load().(error); ok {
		return nil, fmt.Errorf("produce: %w", e)
	}
	// Wait (bounded) for the window's outputs.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		left := len(sent)
		mu.Unlock()
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ccancel()
	<-cdone
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lats)
	pct := func(p float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(len(lats)-1, int(p*float64(len(lats))))]
	}
	r := &latencyResult{Mode: mode.String(), Rate: rate, Achieved: float64(produced) / (warmup + window).Seconds(), Measured: len(lats), Missing: len(sent), Dups: dups, Outputs: outputs,
		Produced: produced, Window: window, Warmup: warmup, Persist: persist, Partitions: int(partitions), Accounts: accounts,
		P50: pct(0.50), P90: pct(0.90), P99: pct(0.99)}
	if len(lats) > 0 {
		r.Max = lats[len(lats)-1]
	}
	return r, nil
}
