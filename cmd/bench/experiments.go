package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// measureTimeout bounds one measurement (topic setup, writes, teardown).
const measureTimeout = 5 * time.Minute

// config is one row of an experiment.
type config struct {
	name  string
	plain bool // the shared idempotent producer; else transactions
	cap   int  // maxWritesPerTransaction (transactional only)
	// defaults: the runtime's own caps (DefaultMaxWritesPerTransaction and
	// DefaultMaxTransactionBytes) instead of cap alone.
	defaults   bool
	concurrent bool // every write from its own goroutine; else one at a time
}

type experimentSpec struct {
	name    string
	keys    int
	size    int
	configs []config // configs[0] is the baseline
}

func experimentA(keys int) experimentSpec {
	const cap = 256 // the seed's cap (its Experiment A), whatever the runtime's default
	return experimentSpec{name: "A", keys: keys, size: 100, configs: []config{
		{name: "plain producer, one at a time", plain: true},
		{name: fmt.Sprintf("group-committed txns (cap %d), one at a time", cap), cap: cap},
		{name: fmt.Sprintf("group-committed txns (cap %d), all at once", cap), cap: cap, concurrent: true},
	}}
}

func experimentB(keys, size int) experimentSpec {
	x := experimentSpec{name: "B", keys: keys, size: size, configs: []config{
		{name: "plain batched producer, concurrent", plain: true, concurrent: true},
	}}
	for _, c := range []int{1, 16, 256} {
		x.configs = append(x.configs, config{name: fmt.Sprintf("txns cap %d, concurrent", c), cap: c, concurrent: true})
	}
	x.configs = append(x.configs, config{name: fmt.Sprintf("txns uncapped (cap %d), concurrent", keys), cap: keys, concurrent: true})
	// What a flow gets without setting a cap: the byte cap ends each
	// transaction (4 MiB: ~400 of the 10 KiB snapshots).
	x.configs = append(x.configs, config{name: fmt.Sprintf("txns, the runtime's caps (%d writes, %d MiB), concurrent",
		partitionflow.DefaultMaxWritesPerTransaction, partitionflow.DefaultMaxTransactionBytes>>20), defaults: true, concurrent: true})
	return x
}

// env is what every measurement shares: the cluster, an input topic with one
// partition, and a live member of a consumer group on it whose group
// metadata every transaction commits with (TxnOffsetCommit is rejected
// without a real member id and generation).
type env struct {
	brokers  []string
	kgoOpts  []kgo.Opt // added to the stores' clients (--kgo-log)
	rf       int16
	log      *zap.Logger
	cl       *kgo.Client // the group member
	adm      *kadm.Client
	sys      *actor.ActorSystem
	stamp    string
	input    string
	group    string
	meta     snapshotstore.GroupMetadataFunc
	topics   int
	stopPoll context.CancelFunc
	polling  sync.WaitGroup
}

func newEnv(ctx context.Context, brokers []string, rf int16, log *zap.Logger, kgoOpts []kgo.Opt) (*env, error) {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	e := &env{
		brokers: brokers, kgoOpts: kgoOpts, rf: rf, log: log, sys: actors.NewSystem(log), stamp: stamp,
		input: "actorflow-bench-in-" + stamp, group: "actorflow-bench-" + stamp,
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	e.adm = kadm.NewClient(admCl)
	if err := e.createTopic(ctx, e.input, nil); err != nil {
		admCl.Close()
		return nil, err
	}
	e.cl, err = kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(e.group),
		kgo.ConsumeTopics(e.input),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		admCl.Close()
		return nil, err
	}
	// Keep polling so the member stays in the group, like the project's
	// consumer loop; the input topic stays empty.
	pctx, cancel := context.WithCancel(context.Background())
	e.stopPoll = cancel
	e.polling.Go(func() {
		for pctx.Err() == nil {
			e.cl.PollFetches(pctx)
		}
	})
	e.meta = coordinator.NewGroupMetadataTracker(e.cl, "").Current
	jctx, jcancel := context.WithTimeout(ctx, time.Minute)
	defer jcancel()
	for {
		if m, err := e.meta(); err == nil {
			log.Info("joined group", zap.String("group", e.group), zap.String("member", m.MemberID), zap.Int32("generation", m.Generation))
			return e, nil
		}
		select {
		case <-jctx.Done():
			e.close()
			return nil, fmt.Errorf("consumer did not join group %q: %w", e.group, jctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// close leaves the group and removes what the bench created (best effort).
func (e *env) close() {
	e.stopPoll()
	e.polling.Wait()
	e.cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.adm.DeleteGroup(ctx, e.group); err != nil {
		e.log.Warn("delete group", zap.String("group", e.group), zap.Error(err))
	}
	e.deleteTopic(ctx, e.input)
	e.adm.Close()
}

// run measures every config of x runs times, interleaved, and returns the
// rows: the minimum time of each config and its ratio to the baseline's.
//
// The first warmup rounds are not measured (a broker just started runs its
// first rounds ~2× slower, before its JIT warms up), except for the slowest
// commit and the commits over 1 s, which count every round: no stall is
// excused by a cold broker.
func (e *env) run(ctx context.Context, x experimentSpec, runs, warmup int) ([]row, error) {
	snaps := snapshots(x.keys, x.size)
	best := make([]result, len(x.configs))
	worst := make([]result, len(x.configs)) // slowest commit and commits over 1 s, over all runs
	for r := -warmup; r < runs; r++ {
		for i, c := range x.configs {
			res, err := e.measure(ctx, c, snaps)
			if err != nil {
				return nil, fmt.Errorf("%s (run %d): %w", c.name, r+1, err)
			}
			e.log.Info("measured", zap.String("experiment", x.name), zap.String("config", c.name),
				zap.Int("run", r+1), zap.Bool("warmup", r < 0), zap.Duration("took", res.took), zap.Int64("commits", res.commits),
				zap.Duration("slowest_commit", res.slowest), zap.Int("commits_over_1s", res.over1s))
			worst[i].slowest = max(worst[i].slowest, res.slowest)
			worst[i].over1s += res.over1s
			if r == 0 || r > 0 && res.took < best[i].took {
				best[i] = res
			}
		}
	}
	rows := make([]row, len(x.configs))
	base := best[0].took
	for i, c := range x.configs {
		rows[i] = row{Experiment: x.name, Config: c.name, MS: ms(best[i].took), Ratio: round3(float64(best[i].took) / float64(base)),
			MedianCommitMS: ms(best[i].median), MaxCommitMS: ms(worst[i].slowest), CommitsOver1s: worst[i].over1s}
		if !c.plain {
			n := best[i].commits
			rows[i].Txns = &n
		}
	}
	return rows, nil
}

type result struct {
	took    time.Duration
	commits int64
	slowest time.Duration // the slowest Commit call
	over1s  int           // Commit calls that took more than a second (the 5-second stall)
	median  time.Duration // the median Commit call
}

// measure writes snaps once under c to a fresh snapshot topic. Only the
// writes are timed: topic creation, producer setup (InitProducerID for the
// transactional mode) and teardown are not.
func (e *env) measure(ctx context.Context, c config, snaps []snapshotstore.Snapshot) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, measureTimeout)
	defer cancel()
	e.topics++
	topic := fmt.Sprintf("actorflow-bench-snap-%s-%d", e.stamp, e.topics)
	if err := e.createTopic(ctx, topic, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
		return result{}, err
	}
	defer e.deleteTopic(context.WithoutCancel(ctx), topic)

	kc := snapshotstore.KafkaConfig{Logger: e.log, ClientOpts: e.kgoOpts, Mode: snapshotstore.Transactional,
		TransactionalIDPrefix: "actorflow-bench-" + e.stamp}
	if c.plain {
		kc.Mode = snapshotstore.Plain
	}
	k, err := snapshotstore.NewKafka(e.brokers, topic, kc)
	if err != nil {
		return result{}, err
	}
	defer k.Close()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: e.input, Partition: 0, Group: e.group, GroupMetadata: e.meta})
	if err != nil {
		return result{}, err
	}
	counted := &countingPartition{Partition: p}
	var write func(snapshotstore.Snapshot) error
	if c.plain {
		defer counted.Close(context.WithoutCancel(ctx))
		write = func(s snapshotstore.Snapshot) error {
			return counted.Commit(ctx, snapshotstore.Batch{Writes: []snapshotstore.Snapshot{s}})
		}
	} else {
		// The seed's caps count records: the byte cap is lifted, so that
		// "cap 256" means 256 writes of its 10 KiB snapshots here too.
		capWrites, capBytes := c.cap, math.MaxInt
		if c.defaults {
			capWrites, capBytes = 0, 0 // ≤ 0: the defaults
		}
		h := partitionflow.SpawnTxnCapped(e.sys, counted, capWrites, capBytes, 0, e.log)
		defer h.Stop() // also closes the partition's producer
		write = func(s snapshotstore.Snapshot) error { return h.Write(ctx, s) }
	}

	start := time.Now()
	err = writeAll(snaps, c.concurrent, write)
	took := time.Since(start)
	slowest, over1s, median := counted.stats()
	return result{took: took, commits: counted.commits.Load(), slowest: slowest, over1s: over1s, median: median}, err
}

// writeAll issues the writes one at a time, or each from its own goroutine,
// and returns when all have completed.
func writeAll(snaps []snapshotstore.Snapshot, concurrent bool, write func(snapshotstore.Snapshot) error) error {
	if !concurrent {
		for _, s := range snaps {
			if err := write(s); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, s := range snaps {
		wg.Go(func() {
			if err := write(s); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// countingPartition counts Commit calls (one transaction each in the
// transactional mode) and records how long each took.
type countingPartition struct {
	snapshotstore.Partition
	commits atomic.Int64
	mu      sync.Mutex
	took    []time.Duration
}

func (c *countingPartition) Commit(ctx context.Context, b snapshotstore.Batch) error {
	c.commits.Add(1)
	start := time.Now()
	err := c.Partition.Commit(ctx, b)
	d := time.Since(start)
	c.mu.Lock()
	c.took = append(c.took, d)
	c.mu.Unlock()
	return err
}

func (c *countingPartition) stats() (slowest time.Duration, over1s int, median time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.took {
		slowest = max(slowest, d)
		if d > time.Second {
			over1s++
		}
	}
	if len(c.took) > 0 {
		sorted := slices.Clone(c.took)
		slices.Sort(sorted)
		median = sorted[len(sorted)/2]
	}
	return slowest, over1s, median
}

// snapshots returns n snapshots of size random (incompressible) bytes.
func snapshots(n, size int) []snapshotstore.Snapshot {
	rng := rand.New(rand.NewChaCha8([32]byte{}))
	out := make([]snapshotstore.Snapshot, n)
	for i := range out {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		out[i] = snapshotstore.Snapshot{Key: fmt.Sprintf("key-%06d", i), Value: v, Offset: int64(i)}
	}
	return out
}

// createTopic creates a one-partition topic and waits until it has a leader.
func (e *env) createTopic(ctx context.Context, topic string, cfg map[string]*string) error {
	resp, err := e.adm.CreateTopic(ctx, 1, e.rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %q: %w", topic, err)
	}
	for {
		d, err := e.adm.ListTopics(ctx, topic)
		if err == nil {
			t := d[topic]
			if t.Err == nil && len(t.Partitions) == 1 && t.Partitions[0].Err == nil && t.Partitions[0].Leader >= 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %q has no leader: %w", topic, errors.Join(ctx.Err(), err))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (e *env) deleteTopic(ctx context.Context, topic string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := e.adm.DeleteTopic(ctx, topic); err != nil {
		e.log.Warn("delete topic", zap.String("topic", topic), zap.Error(err))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
