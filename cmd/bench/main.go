// Command bench measures the transactional write path's group commit against
// the plain batched producer: the design seed's Experiments A and B (its
// "Write path: group-committed transactions" and "Measurements"), run against
// the project's real write path: snapshotstore.Kafka in both modes, and
// partitionflow's transaction actor (through TxnHandle) for the group commit.
//
//   - Experiment A: --keys-a keys (500) with ~100-byte snapshots, one
//     partition, cap 256. Plain producer one write at a time (the reference),
//     then group-committed transactions issued one at a time and all at once.
//   - Experiment B: --keys-b keys (2000) with --size-b snapshots (10 KiB),
//     flushed concurrently. Plain batched producer (the baseline), then
//     transactions with caps 1, 16, 256, uncapped (cap = --keys-b), and the
//     runtime's default caps (DefaultMaxWritesPerTransaction and
//     DefaultMaxTransactionBytes).
//   - Experiment L (--experiment L, latency.go): output latency at steady
//     input rates (--lat-rate, 2000 and 20000 events/s), input CreateTime →
//     output visible read_committed, p50/p90/p99/max, for the franz-go
//     GroupTransactSession reference, actorflow transactional and plain, in
//     one run on fresh topics; a system's figures count only if every input
//     had its output.
//
// Every transactional commit is a real one: snapshot records, the offset
// marker and a TxnOffsetCommit carrying the group metadata of a live consumer
// group member, which the bench keeps in its group for the whole run.
//
// Each number is the minimum over --runs runs (3), after --warmup unmeasured
// ones (1: a broker just started is slower until its JIT warms up); every run
// writes to a fresh compacted snapshot topic and the runs interleave the
// configurations.
// txns is the number of Commit calls of the run that gave the minimum (for
// the plain rows these are producer calls, not transactions, and are shown
// as "-"); ratio is that minimum over the experiment's baseline minimum from
// the same invocation (A: plain one at a time; B: plain concurrent).
//
// Run it against an in-process kfake cluster (the default) or a real one:
//
//	go run ./cmd/bench
//	go run ./cmd/bench --brokers localhost:9092
//	go run ./cmd/bench --experiment B --keys-b 200 --runs 1 --json
//
// kfake is an in-memory fake: its numbers show the shape (cost tracks the
// transaction count), not Kafka's absolute latencies. On a single-node Kafka
// 4.1 (transaction version 2) a transaction cost ~25 ms here, most of it the
// broker retrying its KIP-890 verification of the transaction's first produce
// while the previous commit completes (add.partitions.to.txn.retry.backoff.ms,
// default 20 ms); with that set to 1 ms, ~6 ms.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// row is one line of the result table (and one --json object).
type row struct {
	Experiment string  `json:"experiment"`
	Config     string  `json:"config"`
	Txns       *int64  `json:"txns"` // nil for the plain producer
	MS         float64 `json:"ms"`
	Ratio      float64 `json:"ratio"`
	// MedianCommitMS is the median Commit call of the run that gave the
	// minimum. MaxCommitMS is the slowest Commit call over all runs of the config
	// (a transaction, or a plain producer call); CommitsOver1s counts those
	// above 1 s: the 5-second stall of issue 11 shows up here.
	MedianCommitMS float64 `json:"median_commit_ms"`
	MaxCommitMS    float64 `json:"max_commit_ms"`
	CommitsOver1s  int     `json:"commits_over_1s"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		os.Exit(childMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == latChildCommand {
		os.Exit(latChildMain(os.Args[2:]))
	}
	var (
		brokers    = flag.String("brokers", "", "comma-separated seed brokers of a real cluster (default: an in-process kfake cluster)")
		rf         = flag.Int("rf", 1, "replication factor of the created topics")
		runs       = flag.Int("runs", 3, "runs per configuration; the minimum is reported")
		warmup     = flag.Int("warmup", 1, "experiments A and B: unmeasured rounds first (a broker just started runs slower until its JIT warms up); their commits still count in the slowest commit and the commits over 1 s")
		experiment = flag.String("experiment", "all", "A, B or all")
		keysA      = flag.Int("keys-a", 500, "keys of experiment A")
		keysB      = flag.Int("keys-b", 2000, "keys of experiment B")
		sizeB      = flag.Int("size-b", 10<<10, "snapshot size in bytes of experiment B")
		asJSON     = flag.Bool("json", false, "print one JSON object per row")
		verbose    = flag.Bool("v", false, "log progress and store warnings to stderr")
		kgoLog     = flag.String("kgo-log", "", "log the stores' kgo clients (and, in experiment E2E, every client of the workers) to stderr with timestamps: info or debug")
		orderings  = flag.String("probe-orderings", "all", "experiment T: comma-separated orderings (concurrent, offsets-first, produce-first, add-partitions)")
		probeTxns  = flag.Int("probe-txns", 300, "experiment T: transactions per run")
		backoff    = flag.Duration("probe-backoff", time.Millisecond, "experiment T: retry backoff on CONCURRENT_TRANSACTIONS")
		minAge     = flag.Duration("probe-min-age", 0, "experiment T: kgo.MetadataMinAge (0: kgo's default 5 s)")
		e2eEvents  = flag.Int("e2e-events", 1_000_000, "experiment E2E: ledger events in the input")
		e2eKeys    = flag.String("e2e-keys", "10000,1000000", "experiment E2E: comma-separated account counts, one input each")
		e2eParts   = flag.Int("e2e-partitions", 8, "experiment E2E: partitions of every topic")
		e2eSystems = flag.String("e2e-systems", "raw,plain,txn,raw-out,txn-out", "experiment E2E: systems ("+strings.Join(allSystems, ", ")+")")
		e2ePersist = flag.Duration("e2e-persist", 500*time.Millisecond, "experiment E2E: persist and commit interval of every system")
		e2eTimeout = flag.Duration("e2e-timeout", 10*time.Minute, "experiment E2E: a run that has not drained by then fails")
		e2eVerify  = flag.Bool("e2e-verify", true, "experiment E2E: compare every stored snapshot with the verifier's fold after each run (after the timed drain; a run whose state differs is not valid)")
		e2eProfile = flag.String("e2e-heap-profiles", "", "experiment E2E: write each child's heap profile (when drained) and CPU profile (of the drain) into this directory")
		e2eGOGC    = flag.String("e2e-gogc", "", "experiment E2E: GOGC of the children")
		e2eMemLim  = flag.String("e2e-gomemlimit", "", "experiment E2E: GOMEMLIMIT of the children")
		e2eMaxIF   = flag.Int("e2e-max-in-flight", 0, "experiment E2E: WithMaxInFlight of the actorflow systems, per partition (0: the default)")
		e2eMaxWr   = flag.Int("e2e-max-writes", 0, "experiment E2E: WithMaxWritesPerTransaction of the actorflow systems (0: the default, partitionflow.DefaultMaxWritesPerTransaction)")
		e2eMaxTB   = flag.Int("e2e-max-txn-bytes", 0, "experiment E2E: WithMaxTransactionBytes of the actorflow systems (0: the default, partitionflow.DefaultMaxTransactionBytes)")
		e2eMaxIdle = flag.Duration("e2e-max-idle", 0, "experiment E2E: keyflow.WithMaxIdle of the actorflow systems (0: keyflow's default)")
		e2eBrokerP = flag.String("e2e-broker-pids", "auto", "experiment E2E: local broker processes whose CPU each drain measures (comma-separated pids; auto: every local process running "+brokerMainClass+", with --brokers only — name them when other local brokers run; none: do not measure)")
		e2eWarmup  = flag.Int("e2e-warmup", 2, "experiment E2E: unmeasured rounds of every system first, at the first key count (a broker's transaction paths take minutes of load to reach their steady cost)")
		e2eRecover = flag.Bool("e2e-recovery", false, "experiment E2E: after each valid drain of an actorflow system, start a second worker on its group (a restart) and measure its recovery: time to caught up, peak RSS, live heap after")
		e2eMaxLive = flag.Int("e2e-max-live-keys", 0, "experiment E2E: keyflow.WithMaxLiveKeys of the actorflow systems, per partition (0: keyflow's default; -1: no bound)")
		latRates   = flag.String("lat-rate", "2000,20000", "experiment L: comma-separated input rates, events/s (each a run of every system)")
		latWindow  = flag.Duration("lat-duration", 40*time.Second, "experiment L: the measured window of each run")
		latWarmup  = flag.Duration("lat-warmup", 20*time.Second, "experiment L: produced before the window, not measured")
		latDrain   = flag.Duration("lat-drain", 2*time.Minute, "experiment L: how long to wait for the last outputs; what has none by then is missing")
		latKeys    = flag.Int("lat-keys", 10000, "experiment L: accounts (keys)")
		latParts   = flag.Int("lat-partitions", 8, "experiment L: partitions of every topic")
		latSystems = flag.String("lat-systems", strings.Join(latAllSystems, ","), "experiment L: systems ("+strings.Join(latAllSystems, ", ")+")")
		latPersist = flag.Duration("lat-persist", 0, "experiment L: persist and commit interval of the actorflow systems (0: actorflow's defaults, 5 s)")
		latMaxLag  = flag.Duration("lat-max-input-lag", defaultMaxInputLag, "experiment L: a run whose inputs were sent later than this against their schedule (p99) is not counted")
		latRounds  = flag.Int("lat-rounds", 1, "experiment L: rounds of every system per rate, each starting one system later; every p99 ratio is against the same round's gts")
		latRebal   = flag.Bool("lat-rebalance", false, "experiment L: run each system as member processes of one group: two, a third joining at a third of the window, the first SIGKILLed at two thirds")
		latSession = flag.Duration("lat-session-timeout", 0, "experiment L with --lat-rebalance: the members' group session timeout (0: the client's default, 45 s)")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of this process (every in-process system: A, B, T, L) to this file")
	)
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fatalf("cpu profile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatalf("cpu profile: %v", err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	exp := strings.ToUpper(*experiment)
	if exp != "A" && exp != "B" && exp != "T" && exp != "E2E" && exp != "L" && exp != "ALL" {
		fatalf("--experiment must be A, B, T, E2E, L or all (A and B), not %q", *experiment)
	}
	if *runs < 1 || *warmup < 0 || *keysA < 1 || *keysB < 1 || *sizeB < 1 || *rf < 1 {
		fatalf("--runs, --keys-a, --keys-b, --size-b and --rf must be positive, --warmup not negative")
	}
	log := zap.NewNop()
	if *verbose {
		l, err := zap.NewDevelopment()
		if err != nil {
			fatalf("logger: %v", err)
		}
		log = l
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	target := "kfake (in-process, 1 broker)"
	seeds := splitBrokers(*brokers)
	if len(seeds) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			fatalf("kfake: %v", err)
		}
		defer c.Close()
		seeds = c.ListenAddrs()
	} else {
		target = strings.Join(seeds, ",")
	}

	started := time.Now()
	if exp == "L" {
		c := latConfig{warmup: *latWarmup, window: *latWindow, drain: *latDrain, keys: *latKeys, partitions: *latParts,
			persist: *latPersist, rf: int16(*rf), rebalance: *latRebal, sessionTimeout: *latSession, rounds: *latRounds, maxInputLag: *latMaxLag}
		c.rates = positiveList("lat-rate", *latRates)
		c.systems = systemList("lat-systems", *latSystems, latAllSystems)
		if c.maxInputLag <= 0 {
			fatalf("--lat-max-input-lag must be positive")
		}
		if c.keys < 1 || c.partitions < 1 || c.window <= 0 || c.warmup < 0 {
			fatalf("--lat-keys, --lat-partitions and --lat-duration must be positive, --lat-warmup not negative")
		}
		rows, err := runLatencyExperiment(ctx, seeds, c, log)
		if err != nil {
			fatalf("experiment L: %v", err)
		}
		if *asJSON {
			printJSONLines(rows)
			return
		}
		fmt.Printf("# %s; experiment L: output latency (input CreateTime -> output read read_committed), %d keys, %d partitions, %s after a %s warm-up, fresh topics per system; total %s\n",
			target, c.keys, c.partitions, c.window, c.warmup, time.Since(started).Round(time.Second))
		printLatency(os.Stdout, rows)
		return
	}
	if exp == "E2E" {
		if *e2eWarmup < 0 {
			fatalf("--e2e-warmup must not be negative")
		}
		c := e2eConfig{events: *e2eEvents, partitions: *e2eParts, rounds: *runs, warmup: *e2eWarmup, persist: *e2ePersist,
			timeout: *e2eTimeout, maxIdle: *e2eMaxIdle, maxLive: *e2eMaxLive, maxWrites: *e2eMaxWr, maxTxnBytes: *e2eMaxTB, maxInFlight: *e2eMaxIF, rf: int16(*rf), verify: *e2eVerify, profileDir: *e2eProfile, recovery: *e2eRecover}
		c.keys = positiveList("e2e-keys", *e2eKeys)
		switch *e2eBrokerP {
		case "auto":
			// The embedded broker (no --brokers) lives in the children:
			// a local Apache Kafka process is then some other cluster.
			if *brokers != "" {
				c.brokerPIDs = findBrokerPIDs()
			}
		case "none", "":
		default:
			pids, err := parsePIDs(*e2eBrokerP)
			if err != nil {
				fatalf("--e2e-broker-pids: %v", err)
			}
			c.brokerPIDs = pids
		}
		c.systems = systemList("e2e-systems", *e2eSystems, allSystems)
		if *e2eGOGC != "" {
			c.childEnv = append(c.childEnv, "GOGC="+*e2eGOGC)
		}
		if *e2eMemLim != "" {
			c.childEnv = append(c.childEnv, "GOMEMLIMIT="+*e2eMemLim)
		}
		if *kgoLog != "" {
			c.childEnv = append(c.childEnv, childKgoLogEnv+"="+*kgoLog) // the workers' clients log too
		}
		rows, err := runE2E(ctx, seeds, c, log)
		if err != nil {
			fatalf("experiment E2E: %v", err)
		}
		if *asJSON {
			printJSONLines(rows)
			return
		}
		fmt.Printf("# %s; experiment E2E: %d ledger events, %d partitions, persist/commit every %s, median of %d interleaved rounds [range] after %d unmeasured; children GOGC=%q GOMEMLIMIT=%q max-idle=%s max-live-keys=%d max-writes=%d max-txn-bytes=%d (0: defaults); total %s\n",
			target, c.events, c.partitions, c.persist, c.rounds, c.warmup, *e2eGOGC, *e2eMemLim, c.maxIdle, c.maxLive, c.maxWrites, c.maxTxnBytes, time.Since(started).Round(time.Second))
		printE2E(os.Stdout, rows)
		return
	}
	var kgoOpts []kgo.Opt
	switch *kgoLog {
	case "":
	case "info", "debug":
		lvl := kgo.LogLevelInfo
		if *kgoLog == "debug" {
			lvl = kgo.LogLevelDebug
		}
		kgoOpts = append(kgoOpts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, lvl, func() string {
			return time.Now().Format("15:04:05.000000 ")
		})))
	default:
		fatalf("--kgo-log must be info or debug, not %q", *kgoLog)
	}
	e, err := newEnv(ctx, seeds, int16(*rf), log, kgoOpts)
	if err != nil {
		fatalf("%v", err)
	}
	if exp == "T" {
		ords, err := parseOrderings(*orderings)
		if err != nil {
			e.close()
			fatalf("%v", err)
		}
		rows, err := e.probe(ctx, probeConfig{orderings: ords, txns: *probeTxns, backoff: *backoff, minAge: *minAge, runs: *runs})
		e.close()
		if err != nil {
			fatalf("experiment T: %v", err)
		}
		if *asJSON {
			printJSONLines(rows)
			return
		}
		fmt.Printf("# %s; experiment T (transaction orderings on a bare kgo client), the run with the lowest median of %d (max and > 1 s: over all runs); total %s\n",
			target, *runs, time.Since(started).Round(time.Millisecond))
		printProbe(os.Stdout, rows)
		return
	}
	var exps []experimentSpec
	if exp != "B" {
		exps = append(exps, experimentA(*keysA))
	}
	if exp != "A" {
		exps = append(exps, experimentB(*keysB, *sizeB))
	}
	var rows []row
	for _, x := range exps {
		r, err := e.run(ctx, x, *runs, *warmup)
		if err != nil {
			e.close()
			fatalf("experiment %s: %v", x.name, err)
		}
		rows = append(rows, r...)
	}
	e.close()

	if *asJSON {
		printJSONLines(rows)
		return
	}
	fmt.Printf("# %s; min of %d runs after %d unmeasured; total %s\n", target, *runs, *warmup, time.Since(started).Round(time.Millisecond))
	printTable(os.Stdout, rows)
}

func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "experiment\tconfig\ttxns\tms\tratio\tmedian commit ms\tslowest commit ms\tcommits > 1 s")
	for _, r := range rows {
		txns := "-"
		if r.Txns != nil {
			txns = fmt.Sprint(*r.Txns)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.2f\t%.2f\t%.1f\t%d\n", r.Experiment, r.Config, txns, r.MS, r.Ratio, r.MedianCommitMS, r.MaxCommitMS, r.CommitsOver1s)
	}
	_ = tw.Flush()
}

// printJSONLines prints one JSON object per row.
func printJSONLines[R any](rows []R) {
	enc := json.NewEncoder(os.Stdout)
	for _, r := range rows {
		_ = enc.Encode(r)
	}
}

// positiveList parses flag --name's comma-separated positive integers, or exits.
func positiveList(name, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatalf("--%s: %q is not a positive number", name, f)
		}
		out = append(out, n)
	}
	return out
}

// systemList parses flag --name's comma-separated systems, each one of all, or exits.
func systemList(name, s string, all []string) []string {
	var out []string
	for _, sys := range strings.Split(s, ",") {
		if sys = strings.TrimSpace(sys); !slices.Contains(all, sys) {
			fatalf("--%s: unknown system %q (want %v)", name, sys, all)
		}
		out = append(out, sys)
	}
	return out
}

func splitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}
