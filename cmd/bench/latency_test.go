package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	c := latConfig{rates: []int{200}, warmup: 200 * time.Millisecond, window: time.Second, drain: 30 * time.Second,
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
	if len(lines) != 1+2*len(rows) || !strings.Contains(lines[0], "p99 ms") {
		t.Fatalf("report:\n%s\nwant a header, a table row and a JSON line per system", out.String())
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
