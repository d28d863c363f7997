package itest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/inspect"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// TestRebalanceTime measures, on the suite's broker, the time from a worker joining or leaving a
// group (8 partitions, 2 → 3 → 2 workers, transactional mode) until every partition processes
// again, for classic cooperative-sticky and for KIP-848 (server-side "uniform" assignor), with the
// broker's and kgo's default heartbeat intervals (KIP-848: the broker's
// group.consumer.heartbeat.interval.ms, 5 s; classic: kgo's 3 s), or with
// ACTORFLOW_ITEST_BENCH_HEARTBEAT (a duration) for both: a member learns of a rebalance on its next
// heartbeat under either protocol. It asserts the events (the group settles into a balanced
// assignment and every partition folds a record on its new owner), never the times. Opt in with
// ACTORFLOW_ITEST_BENCH=1 (make bench-rebalance); ACTORFLOW_ITEST_BENCH_RUNS rounds (default 3)
// per protocol. Each result is one line:
//
//	REBALANCE | kafka 4.4.0 (v4.4) | heartbeat default | consumer | join | run 1 | 5.73s | moved 2 (last revoke began +5.01s, returned +5.31s, new owner started +5.52s)
func TestRebalanceTime(t *testing.T) {
	if os.Getenv("ACTORFLOW_ITEST_BENCH") != "1" {
		t.Skip("set ACTORFLOW_ITEST_BENCH=1 to measure rebalance times on the real broker (make bench-rebalance)")
	}
	brokers := Brokers(t)
	runs := 3
	if s := os.Getenv("ACTORFLOW_ITEST_BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ACTORFLOW_ITEST_BENCH_RUNS=%q: want a positive integer", s)
		}
		runs = n
	}
	var heartbeat time.Duration
	if s := os.Getenv("ACTORFLOW_ITEST_BENCH_HEARTBEAT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("ACTORFLOW_ITEST_BENCH_HEARTBEAT=%q: want a positive duration", s)
		}
		heartbeat = d
	}
	hb := "heartbeat default"
	if heartbeat > 0 {
		hb = "heartbeat " + heartbeat.String()
	}
	version := BrokerVersion(t) + " | " + hb
	results := map[string][]time.Duration{}
	protos := []coordinator.Protocol{coordinator.Cooperative, coordinator.ConsumerProtocol}
	for run := 1; run <= runs; run++ {
		// Interleaved, so that a slow phase of this shared machine does not fall on one protocol only.
		for _, proto := range protos {
			t.Run(fmt.Sprintf("%s/run%d", proto, run), func(t *testing.T) {
				join, leave := measureRebalance(t, brokers, proto, heartbeat)
				for _, e := range []struct {
					event string
					m     rebalanceResult
				}{{"join", join}, {"leave", leave}} {
					t.Logf("REBALANCE | kafka %s | %-19s | %-5s | run %d | %5.2fs | moved %d (last revoke began +%.2fs, returned +%.2fs, new owner started +%.2fs)",
						version, proto, e.event, run, e.m.elapsed.Seconds(), e.m.moved,
						e.m.revoking.Seconds(), e.m.revoked.Seconds(), e.m.started.Seconds())
					results[proto.String()+"|"+e.event] = append(results[proto.String()+"|"+e.event], e.m.elapsed)
				}
			})
		}
	}
	for _, proto := range protos {
		for _, event := range []string{"join", "leave"} {
			ds := slices.Clone(results[proto.String()+"|"+event])
			if len(ds) == 0 {
				continue
			}
			slices.Sort(ds)
			t.Logf("REBALANCE SUMMARY | kafka %s | %-19s | %-5s | min %.2fs median %.2fs max %.2fs (%d runs)",
				version, proto, event, ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds(), len(ds))
		}
	}
}

const rebalancePartitions = 8

// rebalanceResult is one event: elapsed from the event (the joining worker created, the leaving
// worker told to stop) until the last partition folded a record on its owner after the
// rebalance; moved is how many partitions changed owner.
type rebalanceResult struct {
	elapsed time.Duration
	moved   int
	// For the moved partitions, the latest (from the event): the old owner's revoke began
	// (stopping: the rebalance reached it), its revoke returned
	// (its flush committed, its subtree stopped) and the new owner started the partition's actor
	// (store opened: the takeover fence; recovery runs after).
	revoking, revoked, started time.Duration
}

// phases fills r.revoking, r.revoked and r.started from the supervisors' events (all: every worker that took
// part, the leaving one too).
func (r *rebalanceResult) phases(t0 time.Time, before, after map[int32]int, all map[int]*benchWorker) {
	for p, w := range after {
		old, ok := before[p]
		if ok && old == w {
			continue
		}
		if ok {
			if at := firstEvent(all[old], "stopping", p, t0); !at.IsZero() {
				r.revoking = max(r.revoking, at.Sub(t0))
			}
			if at := firstEvent(all[old], "returned", p, t0); !at.IsZero() {
				r.revoked = max(r.revoked, at.Sub(t0))
			}
		}
		if at := firstEvent(all[w], "started", p, t0); !at.IsZero() {
			r.started = max(r.started, at.Sub(t0))
		}
	}
}

// firstEvent is the worker's first event of kind for partition p at or after t0 (zero if none).
func firstEvent(w *benchWorker, kind string, p int32, t0 time.Time) time.Time {
	var at time.Time
	for _, e := range inspect.Supervisor(w.W).Events() {
		if e.Kind == kind && e.TP.Partition == p && !e.At.Before(t0) && (at.IsZero() || e.At.Before(at)) {
			at = e.At
		}
	}
	return at
}

// foldTimes records when each worker folded each partition's records.
type foldTimes struct {
	mu sync.Mutex
	at map[int]map[int32][]time.Time // worker -> partition -> fold times, in arrival order
}

func (f *foldTimes) flow(worker int) keyflow.Handler {
	return keyflow.New(func(_ *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
		now := time.Now()
		f.mu.Lock()
		f.at[worker][rec.Partition] = append(f.at[worker][rec.Partition], now)
		f.mu.Unlock()
		if s == nil {
			s = new(int)
		}
		*s++
		return s, nil
	})
}

// firstAfter is the earliest fold of p by worker at or after t (per-key actors fold concurrently,
// so the slice is only nearly sorted).
func (f *foldTimes) firstAfter(worker int, p int32, t time.Time) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first time.Time
	for _, at := range f.at[worker][p] {
		if !at.Before(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// measureRebalance runs one group: two workers, a third joins (measured), then one leaves
// (measured), while a producer writes to every partition every 20 ms. heartbeat > 0 sets the
// members' heartbeat interval (KIP-848: the group's consumer.heartbeat.interval.ms; classic: kgo's).
func measureRebalance(t *testing.T, brokers []string, proto coordinator.Protocol, heartbeat time.Duration) (join, leave rebalanceResult) {
	input, snaps, group := scenarios.Topics(t, brokers, rebalancePartitions)
	var extra []actorflow.Option
	if heartbeat > 0 {
		if proto == coordinator.ConsumerProtocol {
			// KIP-848: the broker gives members their heartbeat interval (a group config).
			setGroupHeartbeat(t, brokers, group, heartbeat)
		} else {
			extra = append(extra, actorflow.WithClientOpts(kgo.HeartbeatInterval(heartbeat)))
		}
	}
	// CreateTopics returns before the broker's metadata lists the topics; a worker started at once
	// would find its snapshot topic missing and stop (snapshotstore.ErrTopicSetup).
	waitTopicsLed(t, brokers, rebalancePartitions, input, snaps)
	folds := &foldTimes{at: map[int]map[int32][]time.Time{}}
	workers := map[int]*benchWorker{}
	all := map[int]*benchWorker{}
	start := func(i int) {
		folds.mu.Lock()
		folds.at[i] = map[int32][]time.Time{}
		folds.mu.Unlock()
		workers[i] = startBenchWorker(t, folds.flow(i), brokers, group, input, snaps, proto, extra...)
		all[i] = workers[i]
	}

	ctx, cancel := context.WithCancel(context.Background())
	produced := make(chan struct{})
	go produceEvery(ctx, t, brokers, input, 20*time.Millisecond, produced)
	t.Cleanup(func() { cancel(); <-produced })

	start(0)
	start(1)
	settle(t, folds, workers, time.Now())
	checkGroupType(t, brokers, group, proto)
	// A topic just created answers transactional produces with NOT_ENOUGH_REPLICAS and the group
	// coordinator with COORDINATOR_LOAD_IN_PROGRESS for a few seconds (seen on both versions, under
	// load): kgo retries, a transaction then takes seconds, and a revoke-time flush waits for it.
	// Measure the steady state: every partition has committed through the transactional path.
	waitCommittedEverywhere(t, brokers, group, input)

	t0 := time.Now()
	before := ownersNow(t, workers)
	start(2)
	join = settle(t, folds, workers, t0)
	after := ownersNow(t, workers)
	join.moved = movedCount(before, after)
	join.phases(t0, before, after, all)

	// Worker 0 leaves: Stop flushes its partitions on revoke and leaves the group.
	t0 = time.Now()
	before = ownersNow(t, workers)
	leaving := workers[0]
	delete(workers, 0)
	stopped := make(chan error, 1)
	go func() { stopped <- leaving.stop() }()
	leave = settle(t, folds, workers, t0)
	after = ownersNow(t, workers)
	leave.moved = movedCount(before, after)
	leave.phases(t0, before, after, all)
	if err := <-stopped; err != nil {
		t.Fatalf("the leaving worker: %v", err)
	}
	return join, leave
}

// settle waits until the live workers own every partition exactly once, balanced (⌊8/n⌋ or ⌈8/n⌉
// each: the assignors' final state; a KIP-848 reconciliation passes through unbalanced ones), and
// every partition has folded a record on its owner since t0 and since the owner started it. It
// returns the time from t0 to the last of those first folds.
func settle(t *testing.T, folds *foldTimes, workers map[int]*benchWorker, t0 time.Time) rebalanceResult {
	t.Helper()
	var res rebalanceResult
	testkit.Eventually(t, 3*time.Minute, "a balanced assignment with every partition processing on its owner", func() (bool, string) {
		for i, w := range workers {
			if ended, err := w.ended(); ended {
				t.Fatalf("worker %d stopped during the rebalance: %v", i, err)
			}
		}
		own, twice := owners(workers)
		if twice || len(own) != rebalancePartitions {
			return false, fmt.Sprintf("%d of %d partitions owned: %v", len(own), rebalancePartitions, own)
		}
		count := map[int]int{}
		for _, w := range own {
			count[w]++
		}
		lo, hi := rebalancePartitions/len(workers), (rebalancePartitions+len(workers)-1)/len(workers)
		for w := range workers {
			if count[w] < lo || count[w] > hi {
				return false, fmt.Sprintf("unbalanced: %v", count)
			}
		}
		var last time.Time
		for p, w := range own {
			since := t0
			if s := lastStarted(workers[w], p); s.After(since) {
				since = s
			}
			at, ok := folds.firstAfter(w, p, since)
			if !ok {
				return false, fmt.Sprintf("partition %d not yet processing on worker %d", p, w)
			}
			if at.After(last) {
				last = at
			}
		}
		res.elapsed = last.Sub(t0)
		return true, ""
	})
	return res
}

// benchWorker is a worker running in the background; unlike scenarios.StartWorker's, its Run
// error is visible while it runs (its Supervisor blocks until Run has started, for ever if Run
// failed first).
type benchWorker struct {
	W    *actorflow.Worker
	stop func() error
	done chan struct{}
	err  error // Run's, once done is closed
}

func startBenchWorker(t *testing.T, flow keyflow.Handler, brokers []string, group, input, snaps string,
	proto coordinator.Protocol, extra ...actorflow.Option) *benchWorker {
	t.Helper()
	// The options of scenarios.StartWorker, plus the protocol.
	w, err := actorflow.NewWorker(flow, append([]actorflow.Option{
		actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithMode(snapshotstore.Transactional), actorflow.WithTransactionalIDPrefix(group),
		actorflow.WithPersistEvery(50 * time.Millisecond), actorflow.WithCommitOffsetsInterval(50 * time.Millisecond),
		actorflow.WithProtocol(proto),
		actorflow.WithLogger(zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel)).Named(group)),
	}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	bw := &benchWorker{W: w, done: make(chan struct{})}
	go func() { bw.err = w.Run(ctx); close(bw.done) }()
	var once sync.Once
	bw.stop = func() error {
		once.Do(cancel)
		select {
		case <-bw.done:
			return bw.err
		case <-time.After(90 * time.Second):
			return errors.New("worker did not stop within 90s")
		}
	}
	t.Cleanup(func() {
		if err := bw.stop(); err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return bw
}

// ended reports Run's error once Run has returned.
func (w *benchWorker) ended() (bool, error) {
	select {
	case <-w.done:
		return true, w.err
	default:
		return false, nil
	}
}

// waitCommittedEverywhere waits until group has a committed offset above 0 on every partition.
func waitCommittedEverywhere(t *testing.T, brokers []string, group, topic string) {
	t.Helper()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	testkit.Eventually(t, time.Minute, "a committed offset on every partition", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		for p := int32(0); p < rebalancePartitions; p++ {
			if o, ok := offs.Lookup(topic, p); !ok || o.Err != nil || o.At <= 0 {
				return false, fmt.Sprintf("partition %d: %+v", p, o)
			}
		}
		return true, ""
	})
}

// waitTopicsLed waits until the broker lists every topic with all its partitions led.
func waitTopicsLed(t *testing.T, brokers []string, partitions int, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("topics %v listed with leaders", topics), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		td, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return false, err.Error()
		}
		for _, topic := range topics {
			d := td[topic]
			if d.Err != nil || len(d.Partitions) != partitions || !allLed(d) {
				return false, fmt.Sprintf("%s: %d partitions, err %v", topic, len(d.Partitions), d.Err)
			}
		}
		return true, ""
	})
}

// owners maps each partition to the worker running it, and reports a partition seen on two
// workers (the workers are read one after the other, so a handover between the reads shows one
// twice: not settled yet).
func owners(workers map[int]*benchWorker) (own map[int32]int, twice bool) {
	own = map[int32]int{}
	for i, w := range workers {
		for _, tp := range inspect.Supervisor(w.W).Running() {
			if _, dup := own[tp.Partition]; dup {
				twice = true
			}
			own[tp.Partition] = i
		}
	}
	return own, twice
}

// ownersNow is owners at an event: the group is settled then, so a partition seen twice is a bug.
func ownersNow(t *testing.T, workers map[int]*benchWorker) map[int32]int {
	t.Helper()
	own, twice := owners(workers)
	if twice {
		t.Fatalf("a settled group runs a partition on two workers: %v", own)
	}
	return own
}

// setGroupHeartbeat sets a KIP-848 group's heartbeat interval (group config
// consumer.heartbeat.interval.ms; the suite's broker allows down to 100 ms).
func setGroupHeartbeat(t *testing.T, brokers []string, group string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = "consumer.heartbeat.interval.ms", kmsg.StringPtr(strconv.Itoa(int(d.Milliseconds()))), kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, testkit.Client(t, brokers))
	if err != nil {
		t.Fatalf("set the heartbeat interval of group %s: %v", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("set the heartbeat interval of group %s to %v: %v", group, d, err)
		}
	}
}

// checkGroupType fails unless the group runs the protocol asked for: kgo falls back to the classic
// protocol silently when the broker does not serve KIP-848.
func checkGroupType(t *testing.T, brokers []string, group string, proto coordinator.Protocol) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(testkit.Client(t, brokers)).ListGroupsByType(ctx, nil)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	want := "classic"
	if proto == coordinator.ConsumerProtocol {
		want = "consumer"
	}
	if got := listed[group].GroupType; got != want {
		t.Fatalf("group %s has type %q, want %q for %s", group, got, want, proto)
	}
}

// lastStarted is when the worker last started partition p's actor (zero if never).
func lastStarted(w *benchWorker, p int32) time.Time {
	var at time.Time
	for _, e := range inspect.Supervisor(w.W).Events() {
		if e.Kind == "started" && e.TP.Partition == p && e.At.After(at) {
			at = e.At
		}
	}
	return at
}

func movedCount(before, after map[int32]int) int {
	n := 0
	for p, w := range after {
		if b, ok := before[p]; !ok || b != w {
			n++
		}
	}
	return n
}

// produceEvery writes one record to every partition of topic each interval until ctx ends (keys
// k<p>-<0..3>, so each partition has a few key actors), then closes done.
func produceEvery(ctx context.Context, t *testing.T, brokers []string, topic string, every time.Duration, done chan<- struct{}) {
	defer close(done)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Errorf("producer: %v", err)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for p := int32(0); p < rebalancePartitions; p++ {
			r := &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("k%d-%d", p, i%4)), Value: []byte("1")}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					t.Errorf("produce to %s[%d]: %v", topic, p, err)
				}
			})
		}
	}
}
