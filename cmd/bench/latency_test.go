package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"go.uber.org/zap"
)

// Experiment L, briefly, on kfake: every system, the GroupTransactSession
// reference too, produces one output per input, each matched by the
// read_committed consumer, and the report carries the figures. kfake is no
// performance reference: completeness only, no timing is asserted.
func TestLatencyExperimentMatchesEveryOutputOnKfake(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	c := latConfig{rates: []int{200}, maxInputLag: time.Second, warmup: 200 * time.Millisecond, window: time.Second, drain: 30 * time.Second,
		keys: 50, partitions: 2, systems: latAllSystems, rf: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := runLatencyExperiment(ctx, brokers, c, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(latAllSystems) {
		t.Fatalf("%d rows, want one per system (%v)", len(rows), latAllSystems)
	}
	for i, r := range rows {
		if r.System != latAllSystems[i] || r.Rate != 200 || r.Experiment != "L" {
			t.Errorf("row %d: system %q rate %d experiment %q, want %q 200 L", i, r.System, r.Rate, r.Experiment, latAllSystems[i])
		}
		if !r.Valid || r.Missing != 0 || r.Duplicates != 0 || r.Stray != 0 || r.Produced == 0 || r.Outputs != r.Produced {
			t.Errorf("%s: valid %v, %d produced, %d outputs, %d missing, %d duplicates, %d stray (%s): want every input's output once",
				r.System, r.Valid, r.Produced, r.Outputs, r.Missing, r.Duplicates, r.Stray, r.Note)
		}
		if r.Measured == 0 || r.Measured > r.Produced || r.MaxMS < r.P99MS || r.P99MS < r.P90MS || r.P90MS < r.P50MS {
			t.Errorf("%s: %d measured of %d, p50 %v p90 %v p99 %v max %v: want a sample and ordered percentiles",
				r.System, r.Measured, r.Produced, r.P50MS, r.P90MS, r.P99MS, r.MaxMS)
		}
		if r.P99Ratio == 0 {
			t.Errorf("%s: no p99 ratio to the valid gts reference", r.System)
		}
	}
	var out bytes.Buffer
	printLatency(&out, rows)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3+3*len(rows) || !strings.Contains(lines[0], "p99 ms") || !strings.Contains(lines[2+len(rows)], "to visible") {
		t.Fatalf("report:\n%s\nwant a header, a table row per system, the stages' two headers and a row per system, and a JSON line per system", out.String())
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &obj); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	for _, k := range []string{"system", "rate", "p50_ms", "p90_ms", "p99_ms", "max_ms", "missing", "duplicates", "valid", "p99_ratio_to_gts"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON line %q lacks %q", lines[len(lines)-1], k)
		}
	}
}

// TestMain lets the test binary run as a member process of a rebalance run
// (latency_rebalance.go re-executes os.Executable with latChildCommand).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == latChildCommand {
		os.Exit(latChildMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// Experiment L through a rebalance, on kfake: member processes, a third
// joining and the first SIGKILLed in the window; the transactional mode
// still delivers every input's output exactly once, and the report names
// both events and the output gaps after them.
func TestLatencyRebalanceDeliversEveryOutputOnce(t *testing.T) {
	c, rows := kfakeRebalanceRun(t, latTxn)
	for _, r := range rows {
		if !r.Valid || r.Missing != 0 || r.Duplicates != 0 || r.Outputs != r.Produced {
			t.Errorf("%s: valid %v, %d produced, %d outputs, %d missing, %d duplicates (%s): want every output once through the join and the kill",
				r.System, r.Valid, r.Produced, r.Outputs, r.Missing, r.Duplicates, r.Note)
		}
		if !r.Rebalance || r.JoinS <= 0 || r.KillS <= r.JoinS || r.KillS >= c.window.Seconds() {
			t.Errorf("%s: rebalance %v, join at %v s, kill at %v s: want both inside the %s window, join first", r.System, r.Rebalance, r.JoinS, r.KillS, c.window)
		}
		if r.StoppedMS < r.KillStoppedMS || r.StoppedMS < r.JoinStoppedMS {
			t.Errorf("%s: stopped %v ms, below the gap after the join (%v) or the kill (%v)", r.System, r.StoppedMS, r.JoinStoppedMS, r.KillStoppedMS)
		}
	}
	var out bytes.Buffer
	printLatency(&out, rows)
	if n := strings.Count(out.String(), "SIGKILLed"); n != len(rows) {
		t.Errorf("report:\n%s\nwant one rebalance line per system", out.String())
	}
}

// The GroupTransactSession reference keeps its state in memory only: a
// partition that moves to the joining member is folded there from nothing,
// so its outputs carry wrong balances and the run is not valid — its
// figures through a rebalance are no reference for a pipe that recovers.
func TestLatencyRebalanceFindsTheReferencesWrongBalances(t *testing.T) {
	_, rows := kfakeRebalanceRun(t, latGTS)
	if len(rows) != 1 || rows[0].WrongBalance == 0 || rows[0].Valid {
		t.Fatalf("rows %+v: want one, invalid, with wrong balances", rows)
	}
}

// kfakeRebalanceRun runs experiment L through a rebalance on kfake for one
// system, briefly, and returns its config and rows.
func kfakeRebalanceRun(t *testing.T, system string) (latConfig, []latRow) {
	t.Helper()
	_, brokers := testkit.Kfake(t)
	// kfake's group.min.session.timeout.ms is 6 s.
	c := latConfig{rates: []int{200}, maxInputLag: time.Second, warmup: 500 * time.Millisecond, window: 6 * time.Second, drain: time.Minute,
		keys: 50, partitions: 4, systems: []string{system}, rf: 1, rebalance: true, sessionTimeout: 6 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, err := runLatencyExperiment(ctx, brokers, c, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return c, rows
}
