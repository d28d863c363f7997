package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/latency"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
)

// Experiment L: output latency at a steady input rate (issue 14). For each
// rate and each system, in one invocation: fresh input, output (and
// snapshot) topics and a fresh group; the system started and assigned;
// ledger events produced at the rate for warm-up + window; an independent
// read_committed consumer matching every output to its input by account and
// sequence (internal/latency). Latency: input CreateTime → output read,
// over the window's inputs. A system's figures count only if every input
// had its output (and, for the exactly-once systems, none twice): the
// reference is held to the same rule.
//
// Systems: gts (franz-go GroupTransactSession, one transaction per poll:
// the hand-written exactly-once reference, latency_gtspipe.go), txn
// (actorflow transactional, outputs in the partitions' transactions) and
// plain (actorflow plain, outputs through a producer, at-least-once). All
// emit one output per input.
type latConfig struct {
	rates                 []int
	warmup, window, drain time.Duration
	keys, partitions      int
	systems               []string
	persist               time.Duration // actorflow's persist and commit interval; 0 keeps its defaults
	rf                    int16
}

// experiment L systems.
const (
	latGTS   = "gts"
	latTxn   = "txn"
	latPlain = "plain"
)

var latAllSystems = []string{latGTS, latTxn, latPlain}

// exactlyOnce: a duplicate output disqualifies the system's figures.
func exactlyOnce(sys string) bool { return sys != latPlain }

// latRow is one (rate, system) line of the table and one JSON object.
type latRow struct {
	Experiment string  `json:"experiment"`
	System     string  `json:"system"`
	Rate       int     `json:"rate"`
	Achieved   float64 `json:"achieved_per_s"`
	Keys       int     `json:"keys"`
	Partitions int     `json:"partitions"`
	WarmupS    float64 `json:"warmup_s"`
	WindowS    float64 `json:"window_s"`
	Produced   int     `json:"produced"`
	Outputs    int     `json:"outputs"`
	Measured   int     `json:"measured"`
	Missing    int     `json:"missing"`
	Duplicates int     `json:"duplicates"`
	Stray      int     `json:"stray"`
	Valid      bool    `json:"valid"` // every output there (exactly-once systems: none twice)
	P50MS      float64 `json:"p50_ms"`
	P90MS      float64 `json:"p90_ms"`
	P99MS      float64 `json:"p99_ms"`
	MaxMS      float64 `json:"max_ms"`
	// P99Ratio is this p99 over the gts reference's at the same rate; 0
	// unless both are valid.
	P99Ratio float64 `json:"p99_ratio_to_gts"`
	// Stages split the latency where the outputs carry the stamps
	// (latency.Stamps): [p50, p99] ms of input → fold, fold → output
	// produced (the wait for its transaction), produced → visible.
	FoldMS    [2]float64 `json:"fold_ms,omitempty"`
	CommitMS  [2]float64 `json:"commit_wait_ms,omitempty"`
	VisibleMS [2]float64 `json:"visible_ms,omitempty"`
	Note      string     `json:"note,omitempty"`
}

func runLatencyExperiment(ctx context.Context, brokers []string, c latConfig, log *zap.Logger) ([]latRow, error) {
	adm, err := newAdmin(brokers)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	var rows []latRow
	for _, rate := range c.rates {
		var ref *latRow
		first := len(rows)
		for _, sys := range c.systems {
			r, err := runLatencySystem(ctx, brokers, adm, c, fmt.Sprintf("actorflow-lat-%s-%d-%s", stamp, rate, sys), sys, rate, log)
			if err != nil {
				return rows, fmt.Errorf("%s at %d/s: %w", sys, rate, err)
			}
			log.Info("latency run", zap.String("system", sys), zap.Int("rate", rate), zap.Bool("valid", r.Valid),
				zap.Float64("p50_ms", r.P50MS), zap.Float64("p99_ms", r.P99MS), zap.Int("missing", r.Missing))
			rows = append(rows, r)
		}
		for i := first; i < len(rows); i++ {
			if rows[i].System == latGTS && rows[i].Valid {
				ref = &rows[i]
			}
		}
		for i := first; ref != nil && i < len(rows); i++ {
			if rows[i].Valid && ref.P99MS > 0 {
				rows[i].P99Ratio = round3(rows[i].P99MS / ref.P99MS)
			}
		}
	}
	return rows, nil
}

// runLatencySystem measures one system at one rate on fresh topics named
// after name, and removes them afterwards.
func runLatencySystem(ctx context.Context, brokers []string, adm *kadm.Client, c latConfig, name, sys string, rate int, log *zap.Logger) (latRow, error) {
	input, output, snaps, group := name+"-in", name+"-out", name+"-snap", name
	topics := []string{input, output}
	if sys != latGTS {
		topics = append(topics, snaps)
	}
	defer func() { removeRun(ctx, adm, group, topics...) }()
	for _, t := range topics {
		var cfg map[string]*string
		if t == snaps {
			cfg = map[string]*string{"cleanup.policy": new("compact")}
		}
		if err := createTopicN(ctx, adm, t, int32(c.partitions), c.rf, cfg); err != nil {
			return latRow{}, err
		}
	}

	var stop func() error
	switch sys {
	case latGTS:
		p, err := newGTSPipe(brokers, group, input, output, c.partitions)
		if err != nil {
			return latRow{}, err
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.run(pctx) }()
		stop = func() error { cancel(); return <-done }
		select {
		case <-p.ready:
		case err := <-done:
			return latRow{}, fmt.Errorf("stopped before its assignment: %w", err)
		case <-ctx.Done():
			_ = stop()
			return latRow{}, ctx.Err()
		}
	case latTxn, latPlain:
		mode := snapshotstore.Transactional
		if sys == latPlain {
			mode = snapshotstore.Plain
		}
		opts := []actorflow.Option{actorflow.WithLogger(log)}
		if c.persist > 0 {
			opts = append(opts, actorflow.WithPersistEvery(c.persist), actorflow.WithCommitOffsetsInterval(c.persist))
		}
		w, err := latency.StartWorker(ctx, brokers, mode, group, input, snaps, output, c.partitions, opts...)
		if err != nil {
			return latRow{}, err
		}
		stop = w.Stop
	default:
		return latRow{}, fmt.Errorf("unknown system %q (want %v)", sys, latAllSystems)
	}

	res, err := latency.Run(ctx, latency.Load{Brokers: brokers, Input: input, Output: output, Rate: rate,
		Accounts: c.keys, Warmup: c.warmup, Window: c.window, Drain: c.drain})
	if serr := stop(); serr != nil && err == nil {
		err = fmt.Errorf("%s stopped with: %w", sys, serr)
	}
	if err != nil {
		return latRow{}, err
	}
	r := latRow{Experiment: "L", System: sys, Rate: rate, Achieved: round3(res.Achieved), Keys: c.keys, Partitions: c.partitions,
		WarmupS: c.warmup.Seconds(), WindowS: c.window.Seconds(), Produced: res.Produced, Outputs: res.Outputs,
		Measured: res.Measured, Missing: res.Missing, Duplicates: res.Duplicates, Stray: res.Stray,
		P50MS: ms(res.P50), P90MS: ms(res.P90), P99MS: ms(res.P99), MaxMS: ms(res.Max),
		FoldMS:    stageMS(res.Stages[latency.StageFold]),
		CommitMS:  stageMS(res.Stages[latency.StageCommit]),
		VisibleMS: stageMS(res.Stages[latency.StageVisible])}
	var notes []string
	if !res.Complete() {
		notes = append(notes, fmt.Sprintf("%d inputs without output, %d stray outputs", res.Missing, res.Stray))
	}
	if exactlyOnce(sys) && res.Duplicates > 0 {
		notes = append(notes, fmt.Sprintf("%d duplicate outputs from an exactly-once system", res.Duplicates))
	}
	r.Valid = len(notes) == 0
	r.Note = strings.Join(notes, "; ")
	return r, nil
}

func printLatency(w io.Writer, rows []latRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tsystem\tachieved/s\tinputs\tmissing\tdups\tstray\tvalid\tp50 ms\tp90 ms\tp99 ms\tmax ms\tp99/gts\t")
	for _, r := range rows {
		ratio := "-"
		if r.P99Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", r.P99Ratio)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%d\t%d\t%d\t%d\t%v\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", r.Rate, r.System, r.Achieved, r.Produced,
			r.Missing, r.Duplicates, r.Stray, r.Valid, r.P50MS, r.P90MS, r.P99MS, r.MaxMS, ratio)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "stages (p50/p99 ms; '-' where the outputs carry no stamp): input → fold, fold → output produced, produced → visible read_committed")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tsystem\tto fold\tto produce\tto visible\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t\n", r.Rate, r.System, stageCell(r.FoldMS), stageCell(r.CommitMS), stageCell(r.VisibleMS))
	}
	_ = tw.Flush()
	enc := json.NewEncoder(w)
	for _, r := range rows {
		_ = enc.Encode(r)
	}
}

func stageMS(s latency.StageStats) [2]float64 {
	if s.N == 0 {
		return [2]float64{}
	}
	return [2]float64{ms(s.P50), ms(s.P99)}
}

func stageCell(v [2]float64) string {
	if v == [2]float64{} {
		return "-"
	}
	return fmt.Sprintf("%.1f/%.1f", v[0], v[1])
}
