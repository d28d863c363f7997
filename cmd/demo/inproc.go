// Command demo runs a ledger flow end to end and verifies the stored state.
//
// With no flags it starts an embedded Kafka-protocol cluster (kfake)
// in-process, creates the input and snapshot topics, produces a ledger
// workload (JSON events: account, per-account sequence number, amount), runs
// several workers of one consumer group in this process, makes one leave and
// rejoin mid-run so partitions move, prints progress once a second, and at
// the end reads every account's snapshot back (read_committed) and compares
// it with its own fold of the input events. It exits non-zero on any
// mismatch.
//
//	go run ./cmd/demo
//	go run ./cmd/demo --brokers localhost:9092 --mode plain --events 200000
//
// Subcommands run the pieces of the demo cluster (deploy/docker-compose.yml)
// as separate processes: `demo worker`, `demo produce`, `demo verify`; each
// flag also reads an ACTORFLOW_* environment variable (see -h).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type options struct {
	brokers    string
	accounts   int
	events     int
	workers    int
	rate       int
	mode       string
	partitions int
	verbose    bool
}

// runInProcess is the default subcommand: everything in one process.

// kfakeNoCleaner is a kfake cleaner interval of ten years, in ms: no
// compaction in a demo's life (inproc.go says why).
const kfakeNoCleaner = "315360000000"

func runInProcess(args []string) int {
	var o options
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	fs.StringVar(&o.brokers, "brokers", "", "comma-separated seed brokers of a real cluster (default: an embedded kfake cluster)")
	fs.IntVar(&o.accounts, "accounts", 1000, "number of accounts (keys)")
	fs.IntVar(&o.events, "events", 100000, "number of ledger events to produce")
	fs.IntVar(&o.workers, "workers", 3, "workers in the consumer group")
	fs.IntVar(&o.rate, "rate", 20000, "events per second to produce (0: as fast as possible)")
	fs.StringVar(&o.mode, "mode", "transactional", "persistence mode: plain | transactional")
	fs.IntVar(&o.partitions, "partitions", 6, "partitions of the input and snapshot topics (when created)")
	fs.BoolVar(&o.verbose, "v", false, "log at info level (default: warnings)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: demo [flags]   run a whole demo cluster in this process\n"+
			"       demo worker|produce|verify|latency|poison [flags]   one part of the compose cluster (each has --help)\n\n"+
			"flags of the in-process demo:\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if o.accounts < 1 || o.workers < 1 || o.events < 1 || o.partitions < 1 {
		fmt.Fprintln(os.Stderr, "demo: --accounts, --events, --workers and --partitions must be at least 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 2
	}
	if !ok {
		return 1
	}
	return 0
}

func run(ctx context.Context, o options) (bool, error) {
	mode, err := parseMode(o.mode)
	if err != nil {
		return false, err
	}
	level := zapcore.WarnLevel
	if o.verbose {
		level = zapcore.InfoLevel
	}
	logCfg := zap.NewDevelopmentConfig()
	logCfg.Level = zap.NewAtomicLevelAt(level)
	logCfg.DisableStacktrace = true
	log, err := logCfg.Build()
	if err != nil {
		return false, err
	}
	defer func() { _ = log.Sync() }()

	brokers := splitBrokers(o.brokers)
	if len(brokers) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1),
			// kfake's cleaner compacts every hour by default and moves a
			// compacted partition's log start, which Apache Kafka's never
			// does (KAFKA-7556): the recovery takes a moved log start for
			// deleted snapshots (ErrLostState). Off for the run's life.
			kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": kfakeNoCleaner}))
		if err != nil {
			return false, fmt.Errorf("embedded cluster: %w", err)
		}
		defer c.Close()
		brokers = c.ListenAddrs()
		fmt.Printf("embedded kfake cluster on %s\n", strings.Join(brokers, ","))
	}
	// Unique per run: two runs against one cluster never share topics or
	// group offsets (the time of day alone repeated every day).
	run := time.Now().Format("20060102-150405.000")
	input, snaps, group := "ledger-"+run, "ledger-"+run+"-snapshots", "ledger-demo-"+run

	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return false, err
	}
	defer admCl.Close()
	if err := snapshotstore.EnsureTopics(ctx, admCl, input, snaps, snapshotstore.TopicSpec{
		Create: true, Partitions: int32(o.partitions), ReplicationFactor: -1,
	}); err != nil {
		return false, err
	}
	fmt.Printf("topics %s and %s (%d partitions); %d workers, mode %s; %d events over %d accounts\n",
		input, snaps, o.partitions, o.workers, mode, o.events, o.accounts)

	newWorker := func(i int) (*actorflow.Worker, error) {
		return actorflow.NewWorker(ledger.Flow(),
			actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
			actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
			actorflow.WithMode(mode), actorflow.WithTransactionalIDPrefix(group),
			actorflow.WithPersistEvery(500*time.Millisecond),
			actorflow.WithCommitOffsetsInterval(500*time.Millisecond),
			actorflow.WithLogger(log.Named(fmt.Sprintf("worker-%d", i))))
	}
	workers := make([]*slot, o.workers)
	for i := range workers {
		workers[i] = &slot{}
		if err := workers[i].start(ctx, newWorker, i); err != nil {
			return false, err
		}
	}
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()

	// Produce in the background.
	exp := ledger.Expected{}
	prodErr := make(chan error, 1)
	produced := &counter{}
	go func() { prodErr <- produce(ctx, brokers, input, o, exp, produced) }()

	adm := kadm.NewClient(admCl)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastDone int64
	bounced, producing := false, true
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case err := <-prodErr:
			if err != nil {
				return false, fmt.Errorf("producer: %w", err)
			}
			producing = false
			prodErr = nil
		case <-tick.C:
		}
		done, lag, err := progress(ctx, adm, group, input)
		if err != nil {
			log.Warn("progress", zap.Error(err))
			continue
		}
		parts := make([]string, len(workers))
		for i, w := range workers {
			parts[i] = fmt.Sprint(w.partitions(ctx))
		}
		fmt.Printf("%5.0fs  produced %7d  committed %7d  %7d events/s  lag %6d  partitions per worker [%s]\n",
			time.Since(start).Seconds(), produced.get(), done, done-lastDone, lag, strings.Join(parts, " "))
		lastDone = done
		for i, w := range workers {
			if err := w.failed(); err != nil {
				return false, fmt.Errorf("worker %d failed: %w", i, err)
			}
		}
		// Mid-run, one worker leaves and rejoins: its partitions move away
		// and (some) come back.
		if !bounced && produced.get() >= int64(o.events/2) && o.workers > 1 {
			bounced = true
			fmt.Println("worker 0 leaves the group ...")
			workers[0].stop()
			fmt.Println("worker 0 rejoins")
			if err := workers[0].start(ctx, newWorker, 0); err != nil {
				return false, err
			}
		}
		if !producing && lag == 0 && produced.get() == int64(o.events) {
			break
		}
	}
	for _, w := range workers {
		w.stop()
		if err := w.failed(); err != nil {
			return false, fmt.Errorf("worker failed: %w", err)
		}
	}
	vctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	mm, err := ledger.Verify(vctx, brokers, snaps, int32(o.partitions), exp)
	if err != nil {
		return false, fmt.Errorf("verify: %w", err)
	}
	for i, m := range mm {
		if i == 20 {
			fmt.Printf("... and %d more\n", len(mm)-20)
			break
		}
		fmt.Println("MISMATCH", m)
	}
	if len(mm) > 0 {
		fmt.Printf("FAIL: %d of %d accounts differ from the fold of their input events (mode %s)\n", len(mm), len(exp), mode)
		return false, nil
	}
	fmt.Printf("PASS: %d accounts, %d events: every snapshot equals the fold of its input (balance, count, last sequence; no gap, no repeat) (mode %s, %.1fs)\n",
		len(exp), o.events, mode, time.Since(start).Seconds())
	return true, nil
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

type counter struct {
	mu sync.Mutex
	n  int64
}

func (c *counter) add(n int)  { c.mu.Lock(); c.n += int64(n); c.mu.Unlock() }
func (c *counter) get() int64 { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// produce writes the events at the configured rate, in batches of up to
// 1000, and folds them into exp (exp is complete when it returns nil).
func produce(ctx context.Context, brokers []string, topic string, o options, exp ledger.Expected, n *counter) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	gen := &ledger.Generator{Accounts: o.accounts}
	batch := 1000
	if o.rate > 0 && o.rate < 10*batch {
		batch = max(o.rate/10, 1)
	}
	start := time.Now()
	for sent := 0; sent < o.events; {
		k := min(batch, o.events-sent)
		recs := make([]*kgo.Record, k)
		for i := range recs {
			ev := gen.Next()
			exp.Add(ev)
			recs[i] = ledger.Record(topic, ev)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		sent += k
		n.add(k)
		if o.rate > 0 {
			due := start.Add(time.Duration(float64(sent) / float64(o.rate) * float64(time.Second)))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(due)):
			}
		}
	}
	return nil
}

// progress returns the committed events and the lag of the group.
func progress(ctx context.Context, adm *kadm.Client, group, topic string) (done, lag int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err == nil && len(ends) == 0 {
		err = fmt.Errorf("no end offsets listed for %s", topic)
	}
	if err != nil {
		return 0, 0, err
	}
	com, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, 0, err
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := com.Lookup(o.Topic, o.Partition)
		at := int64(0)
		if ok && c.At > 0 {
			at = c.At
		}
		done += at
		lag += o.Offset - at
	})
	return done, lag, nil
}

// slot is one worker of the demo, restartable.
type slot struct {
	mu     sync.Mutex
	w      *actorflow.Worker
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (s *slot) start(ctx context.Context, mk func(int) (*actorflow.Worker, error), i int) error {
	w, err := mk(i)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.w, s.cancel, s.done, s.err = w, cancel, make(chan struct{}), nil
	done := s.done
	s.mu.Unlock()
	go func() {
		err := w.Run(wctx)
		s.mu.Lock()
		if err != nil && wctx.Err() == nil {
			s.err = err
		}
		s.mu.Unlock()
		close(done)
	}()
	return nil
}

func (s *slot) stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (s *slot) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *slot) partitions(ctx context.Context) int {
	s.mu.Lock()
	w, done := s.w, s.done
	s.mu.Unlock()
	select {
	case <-done:
		return 0
	default:
	}
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	return len(w.Status(sctx).Partitions)
}
