package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
)

// The demo worker serves its runtime metrics at /metrics on its HTTP
// listener.
func TestWorkerServesMetrics(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	common := []string{"--brokers", brokers[0], "--input", "in", "--partitions", "2"}
	if rc := produceCmd(context.Background(), append(common, "--events", "200", "--rate", "100000", "--accounts", "20")); rc != 0 {
		t.Fatalf("produce exited %d", rc)
	}
	// A free port for the worker's listener (it takes an address, not a
	// listener).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- worker(ctx, append(common, "--group", "g", "--snapshots", "snaps", "--http", addr, "--persist-every", "50ms"))
	}()
	want := []string{"actorflow_commit_seconds_count", "actorflow_records_processed_total", "actorflow_lag", "actorflow_kafka_consumer_", "go_goroutines"}
	testkit.Eventually(t, 60*time.Second, "/metrics listing the runtime metrics", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				return false, "missing " + w
			}
		}
		return true, ""
	})
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("worker exited %d", rc)
	}
}
