package main

import (
	"context"
	"testing"

	"github.com/actorflow/actorflow/internal/testkit"
)

// The cluster pieces (produce, worker, verify) against an embedded broker.
func TestProduceWorkerVerify(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	b := brokers[0]
	common := []string{"--brokers", b, "--input", "in", "--partitions", "3"}
	if rc := produceCmd(context.Background(), append(common, "--events", "3000", "--rate", "100000", "--accounts", "50")); rc != 0 {
		t.Fatalf("produce exited %d", rc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- worker(ctx, append(common, "--group", "g", "--snapshots", "snaps", "--output", "out",
			"--http", "127.0.0.1:0", "--persist-every", "50ms"))
	}()
	if rc := runVerify([]string{"--brokers", b, "--group", "g", "--input", "in", "--snapshots", "snaps", "--output", "out", "--timeout", "1m"}); rc != 0 {
		t.Fatalf("verify exited %d", rc)
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("worker exited %d", rc)
	}
}
