package itest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchOnRealBroker runs cmd/bench against the suite's broker: the seed's
// Experiments A and B, then the E2E benchmark, then Experiment L (output
// latency), then L through a join and a SIGKILL (--lat-rebalance), and logs
// their tables. It measures, it asserts nothing about time: opt in with
// ACTORFLOW_ITEST_BENCH=1 (make bench-real). ACTORFLOW_ITEST_BENCH_ARGS,
// ACTORFLOW_ITEST_E2E_ARGS, ACTORFLOW_ITEST_LAT_ARGS and
// ACTORFLOW_ITEST_LAT_REBALANCE_ARGS add flags to the four runs. Progress streams to stderr while it runs.
func TestBenchOnRealBroker(t *testing.T) {
	if os.Getenv("ACTORFLOW_ITEST_BENCH") != "1" {
		t.Skip("set ACTORFLOW_ITEST_BENCH=1 to run cmd/bench against the real broker (make bench-real)")
	}
	b := Brokers(t)
	// One build, run four times; not under -race (the suite's flag), like a user's binary.
	bin := filepath.Join(t.TempDir(), "bench")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/bench").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/bench: %v\n%s", err, out)
	}
	for _, run := range []struct{ extra, env string }{
		{"", "ACTORFLOW_ITEST_BENCH_ARGS"},
		{"--experiment E2E", "ACTORFLOW_ITEST_E2E_ARGS"},
		{"--experiment L", "ACTORFLOW_ITEST_LAT_ARGS"},
		{"--experiment L --lat-rate 2000 --lat-duration 30s --lat-warmup 10s --lat-systems gts,txn --lat-rebalance --lat-session-timeout 6s",
			"ACTORFLOW_ITEST_LAT_REBALANCE_ARGS"},
	} {
		args := append([]string{"--brokers", strings.Join(b, ",")}, strings.Fields(run.extra)...)
		args = append(args, strings.Fields(os.Getenv(run.env))...)
		var out bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout = io.MultiWriter(&out, os.Stderr)
		cmd.Stderr = os.Stderr
		err := cmd.Run()
		t.Logf("cmd/bench %s\n%s", strings.Join(args, " "), out.String())
		if err != nil {
			t.Fatalf("cmd/bench %s: %v", strings.Join(args, " "), err)
		}
	}
}
