package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// childCommand is the first argument that makes the bench binary run one
// system of the E2E experiment in this process, so that its CPU time and
// peak RSS are its own (the parent re-executes itself with it).
const childCommand = "e2e-child"

// traceEnv names a file: an actorflow child appends a line to it every
// 500 ms (records folded, keys loaded / cold / evicted, live heap), to see
// where a run's memory goes over time. Children inherit it from the parent:
//
//	ACTORFLOW_BENCH_TRACE=/tmp/trace.txt go run ./cmd/bench --experiment E2E ...
const traceEnv = "ACTORFLOW_BENCH_TRACE"

// e2e systems.
const (
	sysRaw       = "raw"       // raw franz-go consume → fold → produce states, at-least-once: the ceiling
	sysRawOut    = "raw-out"   // the same, also producing one output per event: the ceiling with outputs
	sysPlain     = "plain"     // actorflow.Worker, plain mode
	sysPlainOut  = "plain-out" // plain mode, one Emit per event
	sysTxn       = "txn"       // actorflow.Worker, transactional mode
	sysTxnOut    = "txn-out"   // transactional mode, one Emit per event
	sysNameWidth = len(sysPlainOut)
)

var allSystems = []string{sysRaw, sysPlain, sysTxn, sysRawOut, sysPlainOut, sysTxnOut}

// ceilingOf names the system a system's ratio is measured against.
func ceilingOf(sys string) string {
	if strings.HasSuffix(sys, "-out") {
		return sysRawOut
	}
	return sysRaw
}

// childResult is what a child prints (one JSON line) when it is done.
type childResult struct {
	System     string  `json:"system"`
	Drained    bool    `json:"drained"`
	DrainMS    float64 `json:"drain_ms"`  // start of the system until every input offset is committed
	Processed  int64   `json:"processed"` // records folded (the raw pipe: records consumed and folded)
	CPUSeconds float64 `json:"cpu_s"`     // user+system CPU of the process during the drain
	// HostCPUSeconds is the busy CPU of the whole machine during the drain
	// (/proc/stat; 0 elsewhere): the process's, and a local broker's.
	HostCPUSeconds float64 `json:"host_cpu_s"`
	// BrokerCPUSeconds is the local brokers' CPU during the drain (their
	// /proc/<pid>/stat; 0 when none was found): what the system cost them.
	BrokerCPUSeconds float64 `json:"broker_cpu_s"`
	// Allocs counts the heap allocations during the drain (heapAllocs,
	// tiny ones included): the runtime's own cost per event, which the
	// host's speed does not move.
	Allocs     uint64  `json:"allocs"`
	ShutdownMS float64 `json:"shutdown_ms"`
	// Peaks sampled every 100 ms during the drain (runtime/metrics).
	PeakHeapObjects int64 `json:"peak_heap_objects_bytes"` // live + not yet swept heap objects
	PeakGoTotal     int64 `json:"peak_go_total_bytes"`     // all memory the Go runtime mapped
	PeakGoroutines  int64 `json:"peak_goroutines"`
	VmHWMKiB        int64 `json:"vmhwm_kib"` // /proc/self/status at the end of the drain
	Committed       int64 `json:"committed"` // input offsets committed at the end (progress when not drained)
	// The drain's phases: the system's start until its first fold (clients,
	// recovery, the first fetch), until its last (the input folded), and
	// the rest until drained (the last writes and the offset commit).
	FirstFoldMS float64 `json:"first_fold_ms"`
	LastFoldMS  float64 `json:"last_fold_ms"`
	// Commits counts the group commits of the worker's partitions by the
	// end of the drain (Status.Txns; 0 for the raw pipe): transactions in
	// the transactional mode, each costing the broker a few ms of CPU
	// whatever its size.
	Commits int64 `json:"commits"`
	// KeysLoaded and KeysCold are the worker's keys at the end of the
	// drain (Status): as actors, and held as snapshot bytes (the live-key
	// budget's evicted keys). 0 for the raw pipe, whose map holds all.
	KeysLoaded int64 `json:"keys_loaded"`
	KeysCold   int64 `json:"keys_cold"`
	// A recovery run's (--recover-only): its start until it caught up
	// (every partition recovered and committed through the input's end),
	// and the live heap after a GC then.
	RecoverMS     float64 `json:"recover_ms,omitempty"`
	LiveAfterHeap int64   `json:"live_heap_after_bytes,omitempty"`
	Err           string  `json:"error,omitempty"`
}

type childArgs struct {
	system, input, group, snapshot, output, txnPrefix, heapProfile, cpuProfile string
	brokers                                                                    []string
	events                                                                     int64
	maxWrites, maxTxnBytes                                                     int
	maxInFlight                                                                int
	persist, timeout, maxIdle                                                  time.Duration
	maxLive                                                                    int
	brokerPIDs                                                                 []int
	recoverOnly                                                                bool
}

func childMain(args []string) int {
	fs := flag.NewFlagSet(childCommand, flag.ExitOnError)
	var a childArgs
	brokers := fs.String("brokers", "", "seed brokers")
	fs.StringVar(&a.system, "system", "", "system to run")
	fs.StringVar(&a.input, "input", "", "input topic")
	fs.StringVar(&a.group, "group", "", "consumer group")
	fs.StringVar(&a.snapshot, "snapshot", "", "snapshot topic")
	fs.StringVar(&a.output, "output", "", "output topic (the -out systems)")
	fs.StringVar(&a.txnPrefix, "txn-prefix", "", "transactional.id prefix")
	fs.StringVar(&a.heapProfile, "heap-profile", "", "write a heap profile here when drained")
	fs.StringVar(&a.cpuProfile, "cpu-profile", "", "write a CPU profile of the drain here")
	fs.Int64Var(&a.events, "events", 0, "records in the input")
	fs.DurationVar(&a.persist, "persist", 500*time.Millisecond, "persist and commit interval")
	fs.DurationVar(&a.timeout, "timeout", 10*time.Minute, "give up draining after this long")
	fs.DurationVar(&a.maxIdle, "max-idle", 0, "keyflow.WithMaxIdle of the flow (0: keyflow's default)")
	fs.IntVar(&a.maxLive, "max-live-keys", 0, "keyflow.WithMaxLiveKeys of the flow (0: keyflow's default; <0: no bound)")
	fs.IntVar(&a.maxWrites, "max-writes", 0, "WithMaxWritesPerTransaction (0: the default)")
	fs.IntVar(&a.maxTxnBytes, "max-txn-bytes", 0, "WithMaxTransactionBytes (0: the default)")
	fs.IntVar(&a.maxInFlight, "max-in-flight", 0, "WithMaxInFlight (0: the default)")
	fs.BoolVar(&a.recoverOnly, "recover-only", false, "start a worker on a group that has drained the input, and measure its recovery")
	brokerPIDs := fs.String("broker-pids", "", "local broker processes whose CPU the drain is measured on (comma-separated)")
	_ = fs.Parse(args)
	a.brokers = splitBrokers(*brokers)
	pids, err := parsePIDs(*brokerPIDs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a.brokerPIDs = pids
	res := runChild(a)
	_ = json.NewEncoder(os.Stdout).Encode(res)
	if res.Err != "" {
		return 1
	}
	return 0
}

func runChild(a childArgs) (res childResult) {
	if a.recoverOnly {
		return runRecovery(a)
	}
	res.System = a.system
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	admCl, err := kgo.NewClient(kgo.SeedBrokers(a.brokers...))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListEndOffsets(ctx, a.input)
	if err != nil {
		res.Err = fmt.Sprintf("end offsets of %s: %v", a.input, err)
		return res
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != a.events {
		res.Err = fmt.Sprintf("input %s holds %d records, want %d", a.input, total, a.events)
		return res
	}

	var processed atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if a.cpuProfile != "" {
		f, err := os.Create(a.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			res.Err = fmt.Sprintf("cpu profile: %v", err)
			return res
		}
		defer f.Close()
	}
	sampler := startMemSampler(a.heapProfile)
	cpu0, host0, allocs0 := cpuTime(), hostCPU(), heapAllocs()
	broker0, brokerOK := procsCPU(a.brokerPIDs)
	start := time.Now()
	folds := watchFolds(runCtx, &processed, total, start)
	done := make(chan error, 1)
	var worker *actorflow.Worker // nil for the raw pipe
	switch a.system {
	case sysRaw, sysRawOut:
		output := ""
		if a.system == sysRawOut {
			output = a.output
		}
		go func() {
			done <- rawPipe(runCtx, a.brokers, a.input, a.group, a.snapshot, output, a.persist, &processed)
		}()
	case sysPlain, sysPlainOut, sysTxn, sysTxnOut:
		w, closeProducer, err := newWorker(a, &processed)
		if err != nil {
			res.Err = err.Error()
			return res
		}
		defer closeProducer()
		worker = w
		go func() { done <- w.Run(runCtx) }()
		if path := os.Getenv(traceEnv); path != "" {
			traceOut, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				res.Err = fmt.Sprintf("%s: %v", traceEnv, err)
				return res
			}
			defer traceOut.Close()
			go func() {
				samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
				for runCtx.Err() == nil {
					time.Sleep(500 * time.Millisecond)
					st := w.Status(runCtx)
					var loaded, cold int
					var ev int64
					for _, p := range st.Partitions {
						loaded += p.KeysLoaded
						cold += p.KeysCold
						ev += p.Evictions
					}
					metrics.Read(samples)
					fmt.Fprintf(traceOut, "trace %6.1fs folded=%d loaded=%d cold=%d evicted=%d live=%dMiB heap=%dMiB\n", time.Since(start).Seconds(),
						processed.Load(), loaded, cold, ev, samples[0].Value.Uint64()>>20, samples[1].Value.Uint64()>>20)
				}
			}()
		}
	default:
		res.Err = fmt.Sprintf("unknown system %q", a.system)
		return res
	}

	drainErr := awaitDrained(runCtx, adm, a.group, ends, a.timeout, done, &res.Committed)
	res.DrainMS = ms(time.Since(start))
	res.CPUSeconds = (cpuTime() - cpu0).Seconds()
	if host1 := hostCPU(); host0 > 0 && host1 > 0 {
		res.HostCPUSeconds = (host1 - host0).Seconds()
	}
	if broker1, ok := procsCPU(a.brokerPIDs); ok && brokerOK {
		res.BrokerCPUSeconds = (broker1 - broker0).Seconds()
	}
	res.Allocs = heapAllocs() - allocs0
	res.Processed = processed.Load()
	res.FirstFoldMS, res.LastFoldMS = folds()
	res.PeakHeapObjects, res.PeakGoTotal, res.PeakGoroutines = sampler.stop()
	res.VmHWMKiB = vmHWM()
	res.Drained = drainErr == nil
	if worker != nil {
		for _, p := range worker.Status(runCtx).Partitions {
			res.Commits += p.Txns
			res.KeysLoaded += int64(p.KeysLoaded)
			res.KeysCold += int64(p.KeysCold)
		}
	}
	if a.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if drainErr != nil {
		res.Err = drainErr.Error()
	}
	if a.heapProfile != "" {
		if err := writeHeapProfile(a.heapProfile); err != nil && res.Err == "" {
			res.Err = err.Error()
		}
	}
	t := time.Now()
	stop()
	if early := (*stoppedEarly)(nil); !errors.As(drainErr, &early) { // else it stopped already: its outcome is in res.Err
		awaitStopped(a.system, done, &res.Err)
	}
	res.ShutdownMS = ms(time.Since(t))
	return res
}

// runRecovery starts a worker of a.system on a group that has drained the
// input, as a restart or a takeover does, and measures its recovery: its
// start until WaitCaughtUp returns (every partition owned, its snapshots
// read, its offset at the input's end), the peaks meanwhile, and the live
// heap after a GC at its end (what the recovered keys take).
func runRecovery(a childArgs) (res childResult) {
	res.System = a.system
	var processed atomic.Int64
	w, closeProducer, err := newWorker(a, &processed)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer closeProducer()
	sampler := startMemSampler(a.heapProfile)
	cpu0 := cpuTime()
	start := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wctx, cancel := context.WithTimeout(ctx, a.timeout)
	err = w.WaitCaughtUp(wctx)
	cancel()
	res.RecoverMS = ms(time.Since(start))
	res.CPUSeconds = (cpuTime() - cpu0).Seconds()
	res.PeakHeapObjects, res.PeakGoTotal, res.PeakGoroutines = sampler.stop()
	res.VmHWMKiB = vmHWM()
	res.Drained = err == nil
	if err != nil {
		res.Err = fmt.Sprintf("recovery: %v", err)
	}
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	res.LiveAfterHeap = int64(live[0].Value.Uint64())
	for _, p := range w.Status(ctx).Partitions {
		res.KeysLoaded += int64(p.KeysLoaded)
		res.KeysCold += int64(p.KeysCold)
	}
	res.Processed = processed.Load() // 0: nothing past the committed offsets
	stop()
	awaitStopped(a.system, done, &res.Err)
	return res
}

// awaitStopped waits for a system stopped by its ctx (done: its outcome),
// and sets *errMsg, unless already set, when it failed or did not stop
// within 2 minutes.
func awaitStopped(system string, done <-chan error, errMsg *string) {
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) && *errMsg == "" {
			*errMsg = fmt.Sprintf("%s stopped with: %v", system, err)
		}
	case <-time.After(2 * time.Minute):
		if *errMsg == "" {
			*errMsg = fmt.Sprintf("%s did not stop within 2 min", system)
		}
	}
}

// newWorker builds the actorflow worker of a system through the public API,
// as a user would; closeProducer closes the output producer of a "-out"
// system (nothing otherwise).
func newWorker(a childArgs, processed *atomic.Int64) (w *actorflow.Worker, closeProducer func(), err error) {
	var producer *kgo.Client
	if strings.HasSuffix(a.system, "-out") {
		if producer, err = kgo.NewClient(kgo.SeedBrokers(a.brokers...), kgo.DefaultProduceTopic(a.output)); err != nil {
			return nil, nil, fmt.Errorf("output producer: %w", err)
		}
	}
	mode := snapshotstore.Plain
	if strings.HasPrefix(a.system, "txn") {
		mode = snapshotstore.Transactional
	}
	opts := []actorflow.Option{
		actorflow.WithBrokers(a.brokers...),
		actorflow.WithGroup(a.group),
		actorflow.WithInputTopic(a.input),
		actorflow.WithSnapshotTopic(a.snapshot),
		actorflow.WithMode(mode),
		actorflow.WithTransactionalIDPrefix(a.txnPrefix),
		actorflow.WithPersistEvery(a.persist),
		actorflow.WithCommitOffsetsInterval(a.persist),
		actorflow.WithClientOpts(childKgoLog()...),
		actorflow.WithMaxWritesPerTransaction(a.maxWrites),
		actorflow.WithMaxTransactionBytes(a.maxTxnBytes),
	}
	if l := childWorkerLog(); l != nil {
		opts = append(opts, actorflow.WithLogger(l))
	}
	if a.maxInFlight > 0 {
		opts = append(opts, actorflow.WithMaxInFlight(a.maxInFlight))
	}
	w, err = actorflow.NewWorker(ledgerFlow(producer, a.output, a.maxIdle, a.maxLive, processed), opts...)
	if err != nil {
		if producer != nil {
			producer.Close()
		}
		return nil, nil, err
	}
	return w, func() {
		if producer != nil {
			producer.Close()
		}
	}, nil
}

// ledgerFlow is ledger.FlowWithOutput (the ledger fold, one ledger.Output
// per applied event when producer is set, folds counted) with a MaxIdle and
// a MaxLiveKeys (< 0: none).
func ledgerFlow(producer *kgo.Client, topic string, maxIdle time.Duration, maxLive int, folds *atomic.Int64) *keyflow.Flow[ledger.State] {
	fold := func(kc *keyflow.Context, s *ledger.State, rec *kgo.Record) (*ledger.State, error) {
		s, err := ledger.Fold(kc, s, rec)
		if err != nil {
			return nil, err
		}
		folds.Add(1)
		if producer == nil {
			return s, nil
		}
		b, _ := json.Marshal(ledger.Output{Account: kc.Key(), Seq: s.LastSeq, Balance: s.Balance})
		return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: b})
	}
	var opts []keyflow.Option
	if producer != nil {
		opts = append(opts, keyflow.WithOutput(producer, topic))
	}
	if maxIdle > 0 {
		opts = append(opts, keyflow.WithMaxIdle(maxIdle))
	}
	if maxLive != 0 {
		opts = append(opts, keyflow.WithMaxLiveKeys(maxLive))
	}
	return keyflow.New(fold, opts...)
}

// awaitDrained polls the group's committed offsets until every partition's
// is at its end offset (the broker pushes no event for it), the system
// stops, or the timeout passes.
func awaitDrained(ctx context.Context, adm *kadm.Client, group string, ends kadm.ListedOffsets, timeout time.Duration, done <-chan error, committed *int64) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		offs, err := adm.FetchOffsets(fctx, group)
		cancel()
		if err == nil {
			all := true
			var sum int64
			ends.Each(func(o kadm.ListedOffset) {
				c, ok := offs.Lookup(o.Topic, o.Partition)
				if ok && c.Err == nil {
					sum += c.At
				}
				if !ok || c.Err != nil || c.At < o.Offset {
					all = false
				}
			})
			*committed = sum
			if all {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained within %s: %d input offsets committed", timeout, *committed)
		}
		select {
		case err := <-done:
			return &stoppedEarly{committed: *committed, err: err}
		case <-tick.C:
		}
	}
}

// stoppedEarly is awaitDrained's error when the system stopped before
// draining: it took the system's outcome off done, which the shutdown must
// then not wait for again.
type stoppedEarly struct {
	committed int64
	err       error
}

func (e *stoppedEarly) Error() string {
	return fmt.Sprintf("stopped before draining (%d input offsets committed): %v", e.committed, e.err)
}

// watchFolds samples processed every millisecond (cheaper than a clock
// read per fold) until it reaches total; the returned func gives the ms
// from start to its first and its last fold (0: not seen).
func watchFolds(ctx context.Context, processed *atomic.Int64, total int64, start time.Time) func() (first, last float64) {
	var mu sync.Mutex
	var firstMS, lastMS float64
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n := processed.Load()
			mu.Lock()
			if n > 0 && firstMS == 0 {
				firstMS = ms(time.Since(start))
			}
			if n >= total {
				lastMS = ms(time.Since(start))
			}
			done := lastMS > 0
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	return func() (float64, float64) {
		mu.Lock()
		defer mu.Unlock()
		return firstMS, lastMS
	}
}

// heapAllocs is the heap allocations made by this process so far, as
// testing's allocs/op counts them: MemStats.Mallocs, tiny ones included
// (/gc/heap/allocs:objects leaves out the small pointer-free objects the
// tiny allocator packs together — short strings, a key made of a record's
// bytes — and counts others only when a P's cache is flushed). Read twice
// per run: its stop of the world costs nothing measurable.
func heapAllocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostCPU is the machine's busy CPU time since boot (user, nice, system,
// irq, softirq and steal of /proc/stat's cpu line), 0 where unreadable.
func hostCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	// user, nice, system, irq, softirq: not idle (4), iowait (5), nor steal
	// (8: time the hypervisor gave another guest, not this host's work).
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// vmHWM is the process's peak resident set size in KiB (Linux), 0 elsewhere.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC() // the profile shows live objects as of the last GC
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// memSampler records peaks of a few runtime/metrics every 100 ms. With a
// heap profile path (X.pprof) it also writes one to X-peak.pprof each time
// the heap live after a GC grows by a tenth over the last one written: the
// profile of the peak, where X, taken when drained, shows what stayed.
type memSampler struct {
	stopc               chan struct{}
	wg                  sync.WaitGroup
	heap, total, gorout int64
}

func startMemSampler(heapProfile string) *memSampler {
	peakProfile := ""
	if heapProfile != "" {
		peakProfile = strings.TrimSuffix(heapProfile, ".pprof") + "-peak.pprof"
	}
	s := &memSampler{stopc: make(chan struct{})}
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/sched/goroutines:goroutines"},
		{Name: "/gc/heap/live:bytes"},
	}
	var profiled uint64
	read := func() {
		metrics.Read(samples)
		s.heap = max(s.heap, int64(samples[0].Value.Uint64()))
		s.total = max(s.total, int64(samples[1].Value.Uint64()))
		s.gorout = max(s.gorout, int64(samples[2].Value.Uint64()))
		if live := samples[3].Value.Uint64(); peakProfile != "" && live > profiled+profiled/10 {
			if f, err := os.Create(peakProfile); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0) // as of the last GC: no GC forced here
				f.Close()
				profiled = live
			}
		}
	}
	s.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-s.stopc:
				read()
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *memSampler) stop() (heap, total, goroutines int64) {
	close(s.stopc)
	s.wg.Wait()
	return s.heap, s.total, s.gorout
}

// childKgoLogEnv carries --kgo-log to the E2E children.
const childKgoLogEnv = "ACTORFLOW_BENCH_KGO_LOG"

// childWorkerLog is the workers' own logger at debug level, to stderr with
// the kgo log's timestamps, when the parent ran with --kgo-log debug (the
// worker's phases beside its clients' requests); else nil (the default).
func childWorkerLog() *zap.Logger {
	if os.Getenv(childKgoLogEnv) != "debug" {
		return nil
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000000")
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zapcore.DebugLevel))
}

// childKgoLog is the workers' kgo logger (stderr, timestamped) when the
// parent ran with --kgo-log, else nothing.
func childKgoLog() []kgo.Opt {
	var lvl kgo.LogLevel
	switch os.Getenv(childKgoLogEnv) {
	case "info":
		lvl = kgo.LogLevelInfo
	case "debug":
		lvl = kgo.LogLevelDebug
	default:
		return nil
	}
	return []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(os.Stderr, lvl, func() string {
		return time.Now().Format("15:04:05.000000 ")
	}))}
}
