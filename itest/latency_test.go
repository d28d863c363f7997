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

// TestOutputLatencyOnRealBroker runs `demo latency` (built without -race,
// like a user's binary) against the suite's broker, in the transactional
// mode (outputs in the partitions' transactions, exactly-once) and the plain
// mode, and logs the latency of an output from its input's produce to its
// visibility read_committed. It measures, it asserts nothing about time:
// opt in with ACTORFLOW_ITEST_LATENCY=1; ACTORFLOW_ITEST_LATENCY_ARGS adds
// flags (e.g. "--rate 2000 --warmup 20s --duration 40s").
func TestOutputLatencyOnRealBroker(t *testing.T) {
	if os.Getenv("ACTORFLOW_ITEST_LATENCY") != "1" {
		t.Skip("set ACTORFLOW_ITEST_LATENCY=1 to measure output latency on the real broker")
	}
	b := Brokers(t)
	bin := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/demo").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/demo: %v\n%s", err, out)
	}
	for _, mode := range []string{"transactional", "plain"} {
		args := append([]string{"latency", "--brokers", strings.Join(b, ","), "--mode", mode},
			strings.Fields(os.Getenv("ACTORFLOW_ITEST_LATENCY_ARGS"))...)
		var out bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout = io.MultiWriter(&out, os.Stderr)
		cmd.Stderr = os.Stderr
		err := cmd.Run()
		t.Logf("demo %s\n%s", strings.Join(args, " "), out.String())
		if err != nil {
			t.Fatalf("demo %s: %v", strings.Join(args, " "), err)
		}
	}
}
