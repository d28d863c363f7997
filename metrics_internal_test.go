package actorflow

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// producerSeries gathers reg and returns, for the producers' buffered-records
// gauge (present for every open client, produced or not), how many series
// each transactional_id has.
func producerSeries(t *testing.T, reg *prometheus.Registry) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "actorflow_kafka_producer_buffered_produce_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			id := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "transactional_id" {
					id = l.GetValue()
				}
			}
			out[id]++
		}
	}
	return out
}

// A partition's producer is re-created on the same transactional.id (a
// re-initialisation: the new client starts before the old one closes; a
// re-open after a rebalance), and many producers share the worker's
// registry: no duplicate registration (kprom's own registration would
// panic), one series set per transactional.id, that of the newest client,
// and nothing left once every client closed.
func TestProducerMetricsFollowTheClients(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := &producerMetrics{live: map[string]*kprom.Metrics{}}
	reg.MustRegister(p)
	client := func(id string) *kgo.Client {
		// No broker is reached: a client connects on its first request.
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.WithHooks(p.hooks(id)...))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	eq := func(step string, want map[string]int) {
		t.Helper()
		got := producerSeries(t, reg)
		if len(got) != len(want) {
			t.Fatalf("%s: producer series %v, want %v", step, got, want)
		}
		for id, n := range want {
			if got[id] != n {
				t.Fatalf("%s: producer series %v, want %v", step, got, want)
			}
		}
	}
	old := client("g-in-0")
	eq("one producer", map[string]int{"g-in-0": 1})
	renewed := client("g-in-0")
	eq("re-created before the old one closed", map[string]int{"g-in-0": 1})
	other := client("g-in-1")
	eq("two partitions", map[string]int{"g-in-0": 1, "g-in-1": 1})
	newest := p.live["g-in-0"]
	old.Close()
	eq("the old producer closed", map[string]int{"g-in-0": 1, "g-in-1": 1})
	if p.live["g-in-0"] != newest {
		t.Fatal("the old producer's close removed the re-created one's metrics")
	}
	renewed.Close()
	other.Close()
	eq("every producer closed", map[string]int{})
	plain := client("")
	eq("the plain mode's shared producer", map[string]int{"": 1})
	plain.Close()
	eq("the plain producer closed", map[string]int{})
}

// The group consumer's kprom collectors leave the registry when Run
// returns, not when the client closes: after an abandoned leave it closes
// later, and a new worker's consumer on the same registry meanwhile
// panicked registering its own (duplicate registration); the late close
// then removes nothing of the new worker's (found by a review).
func TestConsumerMetricsLeaveWithTheRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := &Worker{cfg: config{metrics: reg}}
	opts, release := w.consumerClientOpts("")
	old, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...) // its leave abandoned: still open
	if err != nil {
		t.Fatal(err)
	}
	release() // Run returned
	opts2, release2 := w.consumerClientOpts("")
	defer release2()
	next, err := kgo.NewClient(append(opts2, kgo.SeedBrokers("127.0.0.1:1"))...) // panicked: already registered
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	old.Close() // the abandoned leave ends
	// The next worker's collectors are still registered: registering the
	// same names a third time panics.
	defer func() {
		if recover() == nil {
			t.Fatal("the next worker's collectors are gone from the registry after the old client's close")
		}
	}()
	opts3, _ := w.consumerClientOpts("")
	third, err := kgo.NewClient(append(opts3, kgo.SeedBrokers("127.0.0.1:1"))...)
	if err == nil {
		third.Close()
	}
}

// actorflow_partitions counts an evicted partition under "evicted", not
// "failed" (an alert on failures fired on every session timeout), and a
// stopping partition already listed as failed or evicted once.
func TestPhaseCountsSplitEvictionsFromFailures(t *testing.T) {
	st := Status{
		Partitions: []partitionflow.Status{
			{Topic: "in", Partition: 0, Phase: "running"},
			{Topic: "in", Partition: 1, Phase: "stopping"}, // also failed below
			{Topic: "in", Partition: 4, Phase: "recovering"},
		},
		Failed: []FailedPartition{
			{Topic: "in", Partition: 1},
			{Topic: "in", Partition: 2, Evicted: true},
			{Topic: "in", Partition: 3, Evicted: true},
		},
		Late: []coordinator.TopicPartition{{Topic: "in", Partition: 5}},
	}
	want := map[string]int{"recovering": 1, "running": 1, "revoking": 0, "stopping": 0, "failed": 1, "evicted": 2, "late": 1}
	if got := phaseCounts(st); !maps.Equal(got, want) {
		t.Fatalf("phaseCounts = %v, want %v", got, want)
	}
}

// abandoner is a partition saying whether its Close abandons a Commit in
// flight.
type abandoner struct {
	snapshotstore.Partition
	abandons bool
}

func (a abandoner) AbandonsInFlight() bool { return a.abandons }

// The metrics wrapper forwards snapshotstore.InFlightAbandoner: without it,
// a stop under WithMetrics waited for a transaction a frozen broker did not
// answer, as the plain mode's stop does.
func TestMetricsPartitionForwardsInFlightAbandoner(t *testing.T) {
	for _, inner := range []snapshotstore.Partition{abandoner{abandons: true}, abandoner{}, nopPartition{}} {
		want := snapshotstore.AbandonsInFlight(inner)
		if got := snapshotstore.AbandonsInFlight(&metricsPartition{Partition: inner}); got != want {
			t.Errorf("wrapping %T (abandons %v): the wrapper says %v", inner, want, got)
		}
	}
}

// nopPartition implements no optional interface.
type nopPartition struct{ snapshotstore.Partition }

type restater struct {
	snapshotstore.Partition
	restate    bool
	tombstones []string
}

func (r restater) NeedsRestate() bool          { return r.restate }
func (r restater) RestateTombstones() []string { return r.tombstones }

// The metrics wrapper forwards snapshotstore.Restater: without it, a
// partition started under WithAcceptInputRepartition or WithResetLostState
// with WithMetrics on did not restate its marker, and an idle one was
// refused again once the option was removed.
func TestMetricsPartitionForwardsRestater(t *testing.T) {
	for _, inner := range []snapshotstore.Partition{restater{restate: true, tombstones: []string{"k"}}, restater{}, nopPartition{}} {
		wantTs, want := snapshotstore.NeedsRestate(inner)
		if ts, got := snapshotstore.NeedsRestate(&metricsPartition{Partition: inner}); got != want || !slices.Equal(ts, wantTs) {
			t.Errorf("wrapping %T (restate %v, tombstones %v): the wrapper says %v, %v", inner, want, wantTs, got, ts)
		}
	}
}

// A dead letter is counted under the input partition its record came from:
// an undecodable state's names its snapshot record's topic as the source,
// and it was counted under the snapshot topic, which no dashboard of the
// input filters on (helper-110). The partition number is the input's.
func TestDeadLettersCountedUnderTheInputPartition(t *testing.T) {
	m := newMetrics("in-dlq", "in", "snaps")
	for _, src := range []string{"in", "snaps"} {
		m.deadLetter(&kgo.Record{Topic: "in-dlq", Headers: []kgo.RecordHeader{
			{Key: keyflow.HeaderErrorTopic, Value: []byte(src)}, {Key: keyflow.HeaderErrorPartition, Value: []byte("3")}}})
	}
	ch := make(chan prometheus.Metric, 4)
	m.deadLetters.Collect(ch)
	close(ch)
	var got []string
	for pm := range ch {
		var d dto.Metric
		if err := pm.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		got = append(got, fmt.Sprintf("%s[%s]=%v", labels["topic"], labels["partition"], d.GetCounter().GetValue()))
	}
	if fmt.Sprint(got) != "[in[3]=2]" {
		t.Fatalf("dead letters counted %v, want in[3]=2 (the undecodable state's under the input too)", got)
	}
}
