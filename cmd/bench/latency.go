package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/twmb/franz-go/pkg/kgo"
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
	// rebalance runs each system as member processes of one group through
	// a join and a SIGKILL in the window (latency_rebalance.go).
	rebalance bool
	// sessionTimeout is the members' group session timeout in a rebalance
	// run (0: the client's default, 45 s): after a SIGKILL, the floor of
	// the stop of the dead member's partitions.
	sessionTimeout time.Duration
	// maxInputLag: a run whose inputs' p99 lateness against their schedule
	// is above it is not counted (0: defaultMaxInputLag).
	maxInputLag time.Duration
	// rounds runs every system this many times per rate, each round one
	// system later (no system always first), each ratio against the same
	// round's reference: the host's speed drifts between runs minutes apart.
	rounds int
}

// defaultMaxInputLag is latConfig.maxInputLag's default: well below the
// p99 latencies measured (tens of ms), a few of the generator's 5 ms ticks.
const defaultMaxInputLag = 20 * time.Millisecond

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
	Round      int     `json:"round"`
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
	// WrongBalance counts outputs folded from a wrong state (latency.Result).
	WrongBalance int `json:"wrong_balance"`
	// InputLagP99MS: how late the inputs were sent against their schedule.
	InputLagP99MS float64 `json:"input_lag_p99_ms"`
	Valid         bool    `json:"valid"` // every output there, each with its right balance (exactly-once systems: none twice), the inputs on schedule, no member exited during the run, outputs read to their end
	P50MS         float64 `json:"p50_ms"`
	P90MS         float64 `json:"p90_ms"`
	P99MS         float64 `json:"p99_ms"`
	MaxMS         float64 `json:"max_ms"`
	// P99Ratio is this p99 over the gts reference's at the same rate; 0
	// unless both are valid.
	P99Ratio float64 `json:"p99_ratio_to_gts"`
	// Stages split the latency where the outputs carry the stamps
	// (latency.Stamps): [p50, p99] ms of input → fold, fold → output
	// produced (the wait for its transaction), produced → visible.
	FoldMS    [2]float64 `json:"fold_ms,omitempty"`
	CommitMS  [2]float64 `json:"commit_wait_ms,omitempty"`
	VisibleMS [2]float64 `json:"visible_ms,omitempty"`
	// StoppedMS is the longest time one output partition went without an
	// output over the window (StoppedPartition); JoinS and KillS are the
	// rebalance run's events, in seconds from the window's start.
	StoppedMS        float64 `json:"stopped_ms"`
	StoppedPartition int32   `json:"stopped_partition"`
	StoppedFromS     float64 `json:"stopped_from_s"`
	Rebalance        bool    `json:"rebalance,omitempty"`
	JoinS            float64 `json:"join_s,omitempty"`
	KillS            float64 `json:"kill_s,omitempty"`
	// JoinStoppedMS / KillStoppedMS: the longest output gap beginning
	// after the join (before the kill), after the kill; on which partition.
	JoinStoppedMS        float64 `json:"join_stopped_ms,omitempty"`
	JoinStoppedPartition int32   `json:"join_stopped_partition,omitempty"`
	JoinStoppedFromS     float64 `json:"join_stopped_from_s,omitempty"`
	KillStoppedFromS     float64 `json:"kill_stopped_from_s,omitempty"`
	KillStoppedMS        float64 `json:"kill_stopped_ms,omitempty"`
	KillStoppedPartition int32   `json:"kill_stopped_partition,omitempty"`
	SessionTimeoutS      float64 `json:"session_timeout_s,omitempty"`
	Note                 string  `json:"note,omitempty"`
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
		for round := range max(c.rounds, 1) {
			var ref *latRow
			first := len(rows)
			for i := range c.systems {
				sys := c.systems[(i+round)%len(c.systems)]
				r, err := runLatencySystem(ctx, brokers, adm, c, fmt.Sprintf("actorflow-lat-%s-%d-%s-%d", stamp, rate, sys, round+1), sys, rate, log)
				if err != nil {
					return rows, fmt.Errorf("%s at %d/s: %w", sys, rate, err)
				}
				r.Round = round + 1
				log.Info("latency run", zap.String("system", sys), zap.Int("rate", rate), zap.Int("round", round+1), zap.Bool("valid", r.Valid),
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

	load := latency.Load{Brokers: brokers, Input: input, Output: output, Rate: rate,
		Accounts: c.keys, Warmup: c.warmup, Window: c.window, Drain: c.drain, Tracker: latency.NewTracker(c.keys)}
	var (
		res        *latency.Result
		ev         latRebalanceEvents
		err        error
		memberNote string // a member process that failed: the row is not counted
	)
	if c.rebalance {
		res, ev, err = runLatencyRebalance(ctx, adm, c, sys, brokers, group, input, output, snaps, load, log)
		if mf := (*memberFailure)(nil); errors.As(err, &mf) {
			memberNote, err = mf.Error(), nil
		}
	} else {
		res, err = runLatencyInProcess(ctx, brokers, c, sys, group, input, output, snaps, load, log)
	}
	if err != nil {
		return latRow{}, err
	}
	r := latRow{Experiment: "L", System: sys, Rate: rate, Achieved: round3(res.Achieved), Keys: c.keys, Partitions: c.partitions,
		WarmupS: c.warmup.Seconds(), WindowS: c.window.Seconds(), Produced: res.Produced, Outputs: res.Outputs,
		Measured: res.Measured, Missing: res.Missing, Duplicates: res.Duplicates, Stray: res.Stray, WrongBalance: res.WrongBalance, InputLagP99MS: ms(res.InputLagP99),
		P50MS: ms(res.P50), P90MS: ms(res.P90), P99MS: ms(res.P99), MaxMS: ms(res.Max),
		FoldMS:    stageMS(res.Stages[latency.StageFold]),
		CommitMS:  stageMS(res.Stages[latency.StageCommit]),
		VisibleMS: stageMS(res.Stages[latency.StageVisible]),
		StoppedMS: ms(res.Stopped), StoppedPartition: res.StoppedPartition, Rebalance: c.rebalance,
		SessionTimeoutS: c.sessionTimeout.Seconds()}
	windowStart := res.Start.Add(c.warmup)
	if !res.StoppedAt.IsZero() {
		r.StoppedFromS = round3(res.StoppedAt.Sub(windowStart).Seconds())
	}
	if c.rebalance {
		r.JoinS, r.KillS = round3(ev.JoinAt.Sub(windowStart).Seconds()), round3(ev.KillAt.Sub(windowStart).Seconds())
		// A gap the kill caused begins at the dead member's last output,
		// just before the kill (outputs arrive every few ms on a partition
		// at this load): gaps from a second before it on are the kill's.
		killFrom := ev.KillAt.Add(-killGapSlack)
		g, p, at := load.Tracker.LongestGap(ev.JoinAt, killFrom)
		r.JoinStoppedMS, r.JoinStoppedPartition, r.JoinStoppedFromS = ms(g), p, round3(at.Sub(windowStart).Seconds())
		g, p, at = load.Tracker.LongestGap(killFrom, time.Time{})
		r.KillStoppedMS, r.KillStoppedPartition, r.KillStoppedFromS = ms(g), p, round3(at.Sub(windowStart).Seconds())
	}
	var notes []string
	if memberNote != "" {
		notes = append(notes, memberNote)
	}
	if !res.Complete() {
		notes = append(notes, fmt.Sprintf("%d inputs without output, %d stray outputs, %d outputs with a wrong balance", res.Missing, res.Stray, res.WrongBalance))
	}
	// The load shares this process's CPU with the system under test: a
	// generator that fell behind its schedule sent (and stamped) inputs
	// late, and the latency it measures leaves that wait out.
	if maxLag := cmp.Or(c.maxInputLag, defaultMaxInputLag); res.InputLagP99 > maxLag {
		notes = append(notes, fmt.Sprintf("inputs sent up to %s late (p99 %s, over %s): the load generator fell behind", res.InputLagMax, res.InputLagP99, maxLag))
	}
	if exactlyOnce(sys) && res.Complete() && !res.ReadToEnd {
		notes = append(notes, "outputs not read to their last stable offsets after the last input's: duplicates not ruled out")
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
	fmt.Fprintln(tw, "rate/s\tround\tsystem\tachieved/s\tinput lag p99 ms\tinputs\tmissing\tdups\tstray\twrong balance\tvalid\tp50 ms\tp90 ms\tp99 ms\tmax ms\tp99/gts\tstopped ms\t")
	for _, r := range rows {
		ratio := "-"
		if r.P99Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", r.P99Ratio)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%v\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%.0f\t\n", r.Rate, r.Round, r.System, r.Achieved, r.InputLagP99MS, r.Produced,
			r.Missing, r.Duplicates, r.Stray, r.WrongBalance, r.Valid, r.P50MS, r.P90MS, r.P99MS, r.MaxMS, ratio, r.StoppedMS)
	}
	_ = tw.Flush()
	for _, r := range rows {
		if r.Rebalance {
			st := "the group's default"
			if r.SessionTimeoutS > 0 {
				st = fmt.Sprintf("%.0f s", r.SessionTimeoutS)
			}
			fmt.Fprintf(w, "rebalance %s at %d/s, round %d (session timeout %s, valid %v): third member joined at %.1f s, first SIGKILLed at %.1f s into the window; longest output stop after the join %.0f ms (partition %d, from %.1f s), after the kill %.0f ms (partition %d, from %.1f s)\n",
				r.System, r.Rate, r.Round, st, r.Valid, r.JoinS, r.KillS, r.JoinStoppedMS, r.JoinStoppedPartition, r.JoinStoppedFromS,
				r.KillStoppedMS, r.KillStoppedPartition, r.KillStoppedFromS)
		}
	}
	fmt.Fprintln(w, "stages (p50/p99 ms; '-' where the outputs carry no stamp): input → fold, fold → output produced, produced → visible read_committed")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tround\tsystem\tto fold\tto produce\tto visible\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t\n", r.Rate, r.Round, r.System, stageCell(r.FoldMS), stageCell(r.CommitMS), stageCell(r.VisibleMS))
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

// runLatencyInProcess runs sys in this process under the load l.
func runLatencyInProcess(ctx context.Context, brokers []string, c latConfig, sys, group, input, output, snaps string,
	load latency.Load, log *zap.Logger) (*latency.Result, error) {
	var stop func() error
	switch sys {
	case latGTS:
		p, err := newGTSPipe(brokers, group, group, input, output, c.partitions)
		if err != nil {
			return nil, err
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.run(pctx) }()
		stop = func() error { cancel(); return <-done }
		select {
		case <-p.ready:
		case err := <-done:
			return nil, fmt.Errorf("stopped before its assignment: %w", err)
		case <-ctx.Done():
			_ = stop()
			return nil, ctx.Err()
		}
	case latTxn, latPlain:
		mode := snapshotstore.Transactional
		if sys == latPlain {
			mode = snapshotstore.Plain
		}
		w, err := latency.StartWorker(ctx, brokers, mode, group, input, snaps, output, c.partitions, latWorkerOpts(log, c.persist, 0)...)
		if err != nil {
			return nil, err
		}
		stop = w.Stop
	default:
		return nil, fmt.Errorf("unknown system %q (want %v)", sys, latAllSystems)
	}

	res, err := latency.Run(ctx, load)
	if serr := stop(); serr != nil && err == nil {
		err = fmt.Errorf("%s stopped with: %w", sys, serr)
	}
	return res, err
}

// latWorkerOpts are the actorflow systems' options beyond latency.StartWorker's.
func latWorkerOpts(log *zap.Logger, persist, sessionTimeout time.Duration) []actorflow.Option {
	opts := []actorflow.Option{actorflow.WithLogger(log)}
	if sessionTimeout > 0 {
		// kgo refuses a heartbeat interval (default 3 s) above the session
		// timeout; a third of it is Kafka's guidance.
		opts = append(opts, actorflow.WithSessionTimeout(sessionTimeout),
			actorflow.WithClientOpts(kgo.HeartbeatInterval(sessionTimeout/3)))
	}
	if persist > 0 {
		opts = append(opts, actorflow.WithPersistEvery(persist), actorflow.WithCommitOffsetsInterval(persist))
	}
	return opts
}

// killGapSlack: an output gap beginning this long before the kill, or
// later, is counted as the kill's, an earlier one as the join's.
const killGapSlack = time.Second
