package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/latency"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
)

// runLatency measures output latency: ledger events produced at a steady
// rate, one worker in this process emitting one output per event, and an
// independent read_committed consumer of the output topic (internal/latency).
// Latency is from the input's CreateTime to the output's arrival at that
// consumer, for inputs produced during the measured window (after the
// warm-up). It measures; it asserts nothing. cmd/bench's experiment L runs
// the same measurement beside its references.
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
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": kfakeNoCleaner}))
		if err != nil {
			fmt.Fprintln(os.Stderr, "latency:", err)
			return 2
		}
		defer c.Close()
		brokers = c.ListenAddrs()
	}
	run := fmt.Sprintf("lat-%d", time.Now().UnixNano()%1e9)
	log, _ := zap.NewProduction(zap.IncreaseLevel(zap.WarnLevel))
	w, err := latency.StartWorker(ctx, brokers, mode, run, run+"-in", run+"-snaps", run+"-out", *partitions,
		actorflow.WithCreateTopics(int32(*partitions), -1),
		actorflow.WithPersistEvery(*persist), actorflow.WithCommitOffsetsInterval(*persist),
		actorflow.WithLogger(log))
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		return 2
	}
	r, err := latency.Run(ctx, latency.Load{Brokers: brokers, Input: run + "-in", Output: run + "-out",
		Rate: *rate, Accounts: *accounts, Warmup: *warmup, Window: *duration})
	if serr := w.Stop(); err == nil && serr != nil {
		err = fmt.Errorf("worker: %w", serr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		return 2
	}
	fmt.Printf("mode %s, %d events/s, %d accounts, %d partitions, persist-every %s, window %s after %s warm-up\n%s\n",
		mode, *rate, *accounts, *partitions, *persist, *duration, *warmup, r)
	return 0
}
