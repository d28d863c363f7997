package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runProduce produces ledger events at a rate, until --events are sent or
// SIGTERM. The verifier folds the input topic itself, so a restarted
// producer (which restarts the sequences) shows up as repeats on both sides.
func runProduce(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return produceCmd(ctx, args)
}

func produceCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	brokers := fs.String("brokers", env("ACTORFLOW_BROKERS", "localhost:9092"), "seed brokers (ACTORFLOW_BROKERS)")
	input := fs.String("input", env("ACTORFLOW_INPUT", "ledger"), "input topic (ACTORFLOW_INPUT)")
	accounts := fs.Int("accounts", envInt("ACTORFLOW_ACCOUNTS", 1000), "accounts (ACTORFLOW_ACCOUNTS)")
	events := fs.Int("events", envInt("ACTORFLOW_EVENTS", 0), "events to produce, 0 until SIGTERM (ACTORFLOW_EVENTS)")
	rate := fs.Int("rate", envInt("ACTORFLOW_RATE", 2000), "events per second (ACTORFLOW_RATE); 0 or less: as fast as possible, in batches of 1000")
	parts := fs.Int("partitions", envInt("ACTORFLOW_PARTITIONS", 6), "partitions of the input topic if created (ACTORFLOW_PARTITIONS)")
	_ = fs.Parse(args)
	if *accounts < 1 {
		fmt.Fprintln(os.Stderr, "produce: --accounts must be at least 1")
		return 2
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(splitBrokers(*brokers)...), kgo.DefaultProduceTopic(*input))
	if err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		return 2
	}
	defer cl.Close()
	if err := waitCreate(ctx, cl, *input, int32(*parts)); err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		return 2
	}
	gen := &ledger.Generator{Accounts: *accounts}
	batch := max(*rate/10, 1)
	if *rate <= 0 {
		batch = 1000 // unthrottled (a duration of sent/0 was undefined)
	}
	start, last := time.Now(), time.Now()
	sent := 0
	for *events == 0 || sent < *events {
		k := batch
		if *events > 0 {
			k = min(k, *events-sent)
		}
		recs := make([]*kgo.Record, k)
		for i := range recs {
			recs[i] = ledger.Record(*input, gen.Next())
		}
		// Produce until acknowledged, through broker restarts: an
		// unacknowledged batch would make the generator's sequence skip.
		for {
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				fmt.Printf("produce: stopped after %d events\n", sent)
				return 0
			}
			fmt.Fprintln(os.Stderr, "produce: retrying batch:", err)
			time.Sleep(time.Second)
		}
		sent += k
		if time.Since(last) >= 5*time.Second {
			fmt.Printf("produce: %d events\n", sent)
			last = time.Now()
		}
		if *rate <= 0 {
			if ctx.Err() != nil {
				fmt.Printf("produce: stopped after %d events\n", sent)
				return 0
			}
			continue
		}
		due := start.Add(time.Duration(float64(sent) / float64(*rate) * float64(time.Second)))
		select {
		case <-ctx.Done():
			fmt.Printf("produce: stopped after %d events\n", sent)
			return 0
		case <-time.After(time.Until(due)):
		}
	}
	fmt.Printf("produce: done, %d events\n", sent)
	return 0
}

// waitCreate creates the topic, retrying while the broker starts.
func waitCreate(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := createTopic(ctx, cl, topic, partitions)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}
