package itest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBenchOnRealBroker runs cmd/bench (the seed's Experiments A and B)
// against the suite's broker and logs its table. It measures, it asserts
// nothing about time: opt in with ACTORFLOW_ITEST_BENCH=1 (make bench-real).
func TestBenchOnRealBroker(t *testing.T) {
	if os.Getenv("ACTORFLOW_ITEST_BENCH") != "1" {
		t.Skip("set ACTORFLOW_ITEST_BENCH=1 to run cmd/bench against the real broker (make bench-real)")
	}
	b := Brokers(t)
	args := []string{"run", "../cmd/bench", "--brokers", strings.Join(b, ",")}
	if e := os.Getenv("ACTORFLOW_ITEST_BENCH_ARGS"); e != "" {
		args = append(args, strings.Fields(e)...)
	}
	cmd := exec.Command("go", args...)
	out, err := cmd.CombinedOutput()
	t.Logf("go %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("cmd/bench: %v", err)
	}
}
