package actorflow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// families gathers g by name, keeping only actorflow's.
func families(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "actorflow_") {
			out[mf.GetName()] = mf
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A worker with WithMetrics times every commit of every owned partition,
// counts the records it processed and reports each partition's lag from
// Status; the kprom metrics of its consumer and of every partition's
// transactional producer (the default mode) are on the same registry, and
// everything is unregistered when Run returns. With a live-key budget of 4
// keys per partition over 50 accounts, the evictions are counted too.
func TestWithMetricsReportsCommitsRecordsAndLag(t *testing.T) {
	const parts, n = 3, 300
	_, brokers := testkit.Kfake(t)
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, parts)
	reg := prometheus.NewRegistry()
	w, err := actorflow.NewWorker(ledger.Flow(keyflow.WithMaxLiveKeys(4)), actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithPersistEvery(20*time.Millisecond), actorflow.WithCommitOffsetsInterval(20*time.Millisecond),
		actorflow.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 50}, n, ledger.Expected{})

	testkit.Eventually(t, 60*time.Second, "metrics of every partition", func() (bool, string) {
		fs := families(t, reg)
		processed := 0.0
		for _, m := range fs["actorflow_records_processed_total"].GetMetric() {
			processed += m.GetCounter().GetValue()
		}
		if processed != n {
			return false, fmt.Sprintf("records processed %v, want %d", processed, n)
		}
		commits := map[string]uint64{}
		for _, m := range fs["actorflow_commit_seconds"].GetMetric() {
			commits[label(m, "partition")] += m.GetHistogram().GetSampleCount()
		}
		lagZero := map[string]bool{}
		for _, m := range fs["actorflow_lag"].GetMetric() {
			lagZero[label(m, "partition")] = m.GetGauge().GetValue() == 0
		}
		for p := range parts {
			l := fmt.Sprint(p)
			if commits[l] == 0 || !lagZero[l] {
				return false, fmt.Sprintf("partition %s: %d commits observed, lag 0: %v (commits %v, lag %v)", l, commits[l], lagZero[l], commits, lagZero)
			}
		}
		if fs["actorflow_commit_records"].GetMetric() == nil {
			return false, "no actorflow_commit_records"
		}
		evicted := 0.0
		for _, m := range fs["actorflow_keys_evicted_total"].GetMetric() {
			evicted += m.GetCounter().GetValue()
		}
		if evicted == 0 || len(fs["actorflow_keys_held"].GetMetric()) != parts {
			return false, fmt.Sprintf("%v keys evicted, actorflow_keys_held of %d partitions", evicted, len(fs["actorflow_keys_held"].GetMetric()))
		}
		keys := 0.0
		for _, m := range fs["actorflow_keys"].GetMetric() {
			keys += m.GetGauge().GetValue()
		}
		if keys != 50 { // the ledger's accounts, none deleted
			return false, fmt.Sprintf("actorflow_keys sums to %v, want the 50 accounts", keys)
		}
		// Every record processed: each partition's backpressure budget is
		// back to nothing in flight, and nothing holds its commits.
		for _, name := range []string{"actorflow_in_flight_records", "actorflow_in_flight_bytes", "actorflow_commit_held_seconds"} {
			ms := fs[name].GetMetric()
			if len(ms) != parts {
				return false, fmt.Sprintf("%s of %d partitions, want %d", name, len(ms), parts)
			}
			for _, m := range ms {
				if v := m.GetGauge().GetValue(); v != 0 {
					return false, fmt.Sprintf("%s{partition=%s} = %v after every record was processed", name, label(m, "partition"), v)
				}
			}
		}
		// Each partition's producer, by its transactional.id (prefix: the group).
		produced := producedBy(fs)
		for p := range parts {
			id := fmt.Sprintf("%s-%s-%d", group, input, p)
			if produced[id] == 0 {
				return false, fmt.Sprintf("no bytes produced by %s in actorflow_kafka_producer_produce_bytes_total (by transactional_id: %v)", id, produced)
			}
		}
		return true, ""
	})
	fs := families(t, reg)
	kafka := false
	for name := range fs {
		kafka = kafka || strings.HasPrefix(name, "actorflow_kafka_consumer_")
	}
	if !kafka {
		t.Errorf("no kprom metric of the consumer (actorflow_kafka_consumer_*) in %v", keys(fs))
	}
	if g := fs["actorflow_brokers_reachable"].GetMetric(); len(g) != 1 || g[0].GetGauge().GetValue() != 1 {
		t.Errorf("actorflow_brokers_reachable %v, want 1", g)
	}
	// The records and latencies the README lists (an operator's trial found
	// them not exported).
	for _, name := range []string{"actorflow_kafka_consumer_fetch_records_total", "actorflow_kafka_consumer_request_duration_e2e_seconds",
		"actorflow_kafka_producer_produce_records_total"} {
		if fs[name] == nil {
			t.Errorf("no %s in %v", name, keys(fs))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fs := families(t, reg); len(fs) != 0 {
		t.Errorf("metrics still registered after Run returned: %v", keys(fs))
	}
}

// producedBy sums actorflow_kafka_producer_produce_bytes_total by
// transactional_id ("" for the plain mode's shared producer).
func producedBy(fs map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fs["actorflow_kafka_producer_produce_bytes_total"].GetMetric() {
		out[label(m, "transactional_id")] += m.GetCounter().GetValue()
	}
	return out
}

func keys(fs map[string]*dto.MetricFamily) []string {
	out := make([]string, 0, len(fs))
	for k := range fs {
		out = append(out, k)
	}
	return out
}

// Without WithMetrics a worker registers nothing, not even on the default
// registry.
func TestWithoutMetricsRegistersNothing(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	w, err := actorflow.NewWorker(ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithPersistEvery(20*time.Millisecond), actorflow.WithCommitOffsetsInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 10}, 50, ledger.Expected{})
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 60*time.Second)
	if fs := families(t, prometheus.DefaultGatherer); len(fs) != 0 {
		t.Errorf("a worker without WithMetrics registered %v on the default registry", keys(fs))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Dead letters are counted once they exist: committed in the partition's
// transaction (transactional mode) or acknowledged by the dead-letter
// producer (plain mode), under their source topic. The store's producers
// report kprom metrics in both modes: per transactional.id, or the plain
// mode's one shared producer without that label.
func TestWithMetricsCountsDeadLetters(t *testing.T) {
	for _, mode := range []snapshotstore.Mode{snapshotstore.Transactional, snapshotstore.Plain} {
		t.Run(mode.String(), func(t *testing.T) {
			const n = 5
			_, brokers := testkit.Kfake(t)
			input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
			reg := prometheus.NewRegistry()
			w, err := actorflow.NewWorker(ledger.Flow(keyflow.WithNilKeyPolicy(keyflow.DeadLetter)),
				actorflow.WithBrokers(brokers...), actorflow.WithGroup(group), actorflow.WithMode(mode),
				actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps), actorflow.WithCreateTopics(2, -1),
				actorflow.WithPersistEvery(20*time.Millisecond), actorflow.WithCommitOffsetsInterval(20*time.Millisecond),
				actorflow.WithMetrics(reg))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input), kgo.AllowAutoTopicCreation())
			for i := range n {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			testkit.Eventually(t, 60*time.Second, "dead letters counted", func() (bool, string) {
				got := 0.0
				for _, m := range families(t, reg)["actorflow_dead_letters_total"].GetMetric() {
					if label(m, "topic") != input {
						return false, "dead letter labelled " + label(m, "topic")
					}
					got += m.GetCounter().GetValue()
				}
				return got == n, fmt.Sprintf("%v dead letters, want %d", got, n)
			})
			// The status says the same, and leaves them out of the outputs
			// (it had no count, and counted them as outputs: helper-110).
			testkit.Eventually(t, 60*time.Second, "dead letters in the status", func() (bool, string) {
				var dl, outs int64
				for _, p := range w.Status(ctx).Partitions {
					dl, outs = dl+p.DeadLetters, outs+p.Outputs
				}
				return dl == n && outs == 0, fmt.Sprintf("%d dead letters and %d outputs in the status, want %d and 0", dl, outs, n)
			})
			testkit.Eventually(t, 60*time.Second, "store producer metrics", func() (bool, string) {
				produced := producedBy(families(t, reg))
				if mode == snapshotstore.Plain {
					return len(produced) == 1 && produced[""] > 0, fmt.Sprintf("bytes produced by transactional_id %v, want only the shared producer's (no label)", produced)
				}
				// The key-less records may all have gone to one partition:
				// only its producer need have produced.
				ids := 0
				for p := range 2 {
					if produced[fmt.Sprintf("%s-%s-%d", group, input, p)] > 0 {
						ids++
					}
				}
				return ids > 0 && ids == len(produced), fmt.Sprintf("bytes produced by transactional_id %v, want only partitions' producers", produced)
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// openFailing is a store whose Open fails once fail is set (a broker down
// when a failed partition starts again).
type openFailing struct {
	*snapshotstore.Memory
	fail atomic.Bool
}

func (s *openFailing) Open(ctx context.Context, p snapshotstore.PartitionInfo) (snapshotstore.Partition, error) {
	if s.fail.Load() {
		return nil, fmt.Errorf("open %s: broker unreachable", p)
	}
	return s.Memory.Open(ctx, p)
}

// Every partition failure is counted, the failed restarts of a failed
// partition too: a partition whose restart keeps failing (its store
// unreachable) moved the counter once and then stood still, however long
// it stayed down. Status keeps naming the partition's own failure, wrapped
// once.
func TestWithMetricsCountsFailedRestarts(t *testing.T) {
	store := &openFailing{Memory: snapshotstore.NewMemory()}
	ctx, w, reg, brokers, input := runWithMetrics(t, ledger.Flow(), actorflow.WithStore(store),
		actorflow.WithPartitionRetryBackoff(20*time.Millisecond, 50*time.Millisecond))
	failures := func() float64 {
		n := 0.0
		for _, m := range families(t, reg)["actorflow_partition_failures_total"].GetMetric() {
			n += m.GetCounter().GetValue()
		}
		return n
	}
	// Good records first, committed: the failed partition's committed
	// offset is the one it reported, not the one it was assigned.
	const good = 5
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 2}, good, ledger.Expected{})
	testkit.Eventually(t, 60*time.Second, "the good records committed", func() (bool, string) {
		st := w.Status(ctx)
		return len(st.Partitions) == 1 && st.Partitions[0].Committed == good, fmt.Sprint(st.Partitions)
	})
	// The store down from here: every restart fails at its Open, before
	// the group's committed offset is read again (which this memory store
	// does not keep).
	store.fail.Store(true)
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("acct-poison"), Value: []byte("{not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the poisoned partition's failure counted", func() (bool, string) {
		n := failures()
		return n >= 1, fmt.Sprintf("%v failures", n)
	})
	before := failures()
	testkit.Eventually(t, 60*time.Second, "the failed restarts counted", func() (bool, string) {
		n := failures()
		return n >= before+2, fmt.Sprintf("%v failures, %v before the store went down", n, before)
	})
	st := w.Status(ctx)
	if len(st.Failed) != 1 || !strings.Contains(st.Failed[0].Error, "acct-poison") ||
		strings.Count(st.Failed[0].Error, "actorflow: partition") != 1 {
		t.Fatalf("Status.Failed %+v; want the partition's own failure (the poison), wrapped once", st.Failed)
	}
	// A failed partition's fetches stay paused until it starts again:
	// Status.Paused lists it (it listed the running partitions' only).
	if tp := (coordinator.TopicPartition{Topic: input, Partition: 0}); !slices.Contains(st.Paused, tp) {
		t.Errorf("Status.Paused %v; want the failed %v", st.Paused, tp)
	}
	phases := map[string]float64{}
	for _, m := range families(t, reg)["actorflow_partitions"].GetMetric() {
		phases[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if phases["failed"] != 1 || phases["evicted"] != 0 {
		t.Errorf("actorflow_partitions %v; want failed 1, evicted 0 (a failure is not an eviction)", phases)
	}
	// The failed partition keeps its lag and committed offset (an alert on
	// the lag missed the one partition stuck at a failing record).
	if f := st.Failed[0]; f.Committed != good || f.HighWatermark != good+1 || f.Lag != 1 {
		t.Errorf("Status.Failed %+v; want committed offset %d (reported by the partition), high watermark %d, lag 1 (the failing record)", f, good, good+1)
	}
	byPartition := func(name string) map[string]float64 {
		m := map[string]float64{}
		for _, s := range families(t, reg)[name].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "partition" {
					m[l.GetValue()] = s.GetGauge().GetValue()
				}
			}
		}
		return m
	}
	if lag, committed := byPartition("actorflow_lag"), byPartition("actorflow_committed_offset"); lag["0"] != 1 || committed["0"] != good {
		t.Errorf("actorflow_lag %v, actorflow_committed_offset %v; want the failed partition 0's: 1 and %d", lag, committed, good)
	}
}

// A record skipped under a Skip policy is counted, per partition: skips
// left no trace but a log line (the partition's counter saw only key-less
// records; found by a review).
func TestWithMetricsCountsSkips(t *testing.T) {
	ctx, _, reg, brokers, input := runWithMetrics(t, ledger.Flow(keyflow.WithFoldErrorPolicy(keyflow.Skip)))
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("acct-poison"), Value: []byte("{not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the skipped record counted", func() (bool, string) {
		n := 0.0
		for _, m := range families(t, reg)["actorflow_skipped_total"].GetMetric() {
			n += m.GetCounter().GetValue()
		}
		return n == 1, fmt.Sprintf("%v skipped", n)
	})
}

// runWithMetrics runs flow on a fresh embedded cluster (an input and a
// snapshot topic of one partition, created here), with WithMetrics, the
// brokers, group and topics set, and opts, until the test ends; ctx ends
// then too.
func runWithMetrics(t *testing.T, flow keyflow.Handler, opts ...actorflow.Option) (ctx context.Context, w *actorflow.Worker,
	reg *prometheus.Registry, brokers []string, input string) {
	t.Helper()
	_, brokers = testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 1)
	reg = prometheus.NewRegistry()
	w, err := actorflow.NewWorker(flow, append([]actorflow.Option{actorflow.WithBrokers(brokers...),
		actorflow.WithGroup(testkit.Name(t, "g")), actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithMetrics(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx, w, reg, brokers, input
}

// A worker whose brokers do not answer says so in its metrics: reachable 0,
// and the outage's length growing (it was in /readyz's JSON only).
func TestWithMetricsReportsUnreachableBrokers(t *testing.T) {
	reg := prometheus.NewRegistry()
	flow := keyflow.New(func(_ *keyflow.Context, s *Count, _ *kgo.Record) (*Count, error) { return s, nil })
	w, err := actorflow.NewWorker(flow, actorflow.WithBrokers(testkit.SilentBroker(t)), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"), actorflow.WithStartTimeout(time.Minute),
		actorflow.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var first float64
	testkit.Eventually(t, 30*time.Second, "the outage growing in actorflow_brokers_unreachable_seconds", func() (bool, string) {
		fs := families(t, reg)
		r, d := fs["actorflow_brokers_reachable"].GetMetric(), fs["actorflow_brokers_unreachable_seconds"].GetMetric()
		if len(r) != 1 || len(d) != 1 {
			return false, fmt.Sprint(keys(fs))
		}
		if r[0].GetGauge().GetValue() != 0 {
			t.Fatalf("actorflow_brokers_reachable %v while the brokers do not answer", r[0].GetGauge().GetValue())
		}
		v := d[0].GetGauge().GetValue()
		if first == 0 {
			first = v
		}
		return first > 0 && v > first, fmt.Sprint(first, v)
	})
}

// A partition that leaves the worker keeps its counters at their final
// counts, and what it counted after the last scrape is in them: here no
// scrape comes before the rebalance that moves one of the two partitions,
// skips counted in both. Before, the moved partition's series went with it
// and its skip was counted nowhere (helper-110: a skip just before a
// rebalance never showed).
func TestWithMetricsKeepsAMovedPartitionsFinalCounts(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	flow := ledger.Flow(keyflow.WithFoldErrorPolicy(keyflow.Skip))
	start := func(reg prometheus.Registerer) *actorflow.Worker {
		opts := []actorflow.Option{actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
			actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps)}
		if reg != nil {
			opts = append(opts, actorflow.WithMetrics(reg))
		}
		w, _ := runWorker(t, flow, opts...)
		return w
	}
	reg := prometheus.NewRegistry()
	a := start(reg)
	ctx := ctxFor(t, 60*time.Second)
	if err := a.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Key: []byte("acct-poison"), Value: []byte("{not json")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 60*time.Second, "a skip in each partition (Status, not a scrape)", func() (bool, string) {
		st := a.Status(ctx)
		n := 0
		for _, p := range st.Partitions {
			n += int(p.Skipped)
		}
		return len(st.Partitions) == 2 && n == 2, fmt.Sprintf("%+v", st.Partitions)
	})
	b := start(nil)
	testkit.Eventually(t, 60*time.Second, "one partition moved to the second worker", func() (bool, string) {
		sa, sb := a.Status(ctx), b.Status(ctx)
		return len(sa.Partitions) == 1 && len(sb.Partitions) == 1 && len(sa.Failed) == 0, fmt.Sprint(sa.Partitions, sb.Partitions)
	})
	got := map[string]float64{}
	for _, m := range families(t, reg)["actorflow_skipped_total"].GetMetric() {
		got[label(m, "partition")] = m.GetCounter().GetValue()
	}
	if got["0"] != 1 || got["1"] != 1 || len(got) != 2 {
		t.Fatalf("actorflow_skipped_total by partition = %v, want 1 in each of 0 and 1 (the moved one's final count kept)", got)
	}
}

// The event counters (dead letters under a policy that writes them, and
// partition failures) have a series at 0 from the partition's start: one
// that appeared at 1 with its first event made increase() miss it, and an
// alert on it the first dead letter or failure (a newcomer's trial).
func TestWithMetricsEventCountersStartAtZero(t *testing.T) {
	ctx, w, reg, _, input := runWithMetrics(t, ledger.Flow(keyflow.WithFoldErrorPolicy(keyflow.DeadLetter)), actorflow.WithCreateTopics(1, 1))
	if err := w.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "both counters at 0 for the input's partition", func() (bool, string) {
		fs := families(t, reg)
		found := 0
		for _, name := range []string{"actorflow_dead_letters_total", "actorflow_partition_failures_total"} {
			for _, m := range fs[name].GetMetric() {
				if label(m, "topic") == input && label(m, "partition") == "0" && m.GetCounter().GetValue() == 0 {
					found++
				}
			}
		}
		return found == 2, fmt.Sprint(keys(fs))
	})
}
