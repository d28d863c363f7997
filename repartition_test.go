package actorflow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Producers that place records by hand (not by the input's partitioner)
// turn the record check off at the first record it routes elsewhere under
// an unchanged count; partitions added later still stop every running
// partition, at the input's count's next read (every 10 s), since any of
// them may now get keys that moved (a newcomer's trial: they folded such
// keys from nothing).
func TestPartitionsAddedStopRunningPartitionsOfProducersThatPlaceByHand(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	flow := keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
		n := 1
		if s != nil {
			n = *s + 1
		}
		return &n, nil
	})
	w, _ := kfakeWorker(t, flow, brokers, input, snaps)
	wctx := ctxFor(t, 90*time.Second)
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 20 { // every key in both partitions: most are where murmur2 would not put them
		for p := range int32(2) {
			recs = append(recs, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("k%d", i))})
		}
	}
	if err := cl.ProduceSync(wctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := w.WaitCaughtUp(wctx); err != nil {
		t.Fatalf("the records placed by hand are folded: %v", err)
	}
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreatePartitions(wctx, 1, input, snaps); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "both running partitions stopped at the count's read", func() (bool, string) {
		st := w.Status(wctx)
		stopped := 0
		for _, f := range st.Failed {
			if f.Partition < 2 && (strings.Contains(f.Error, "2 partitions when it started, 3 now; the input's partition count, read every 10 s") ||
				strings.Contains(f.Error, "partitioned 2 ways, but it has 3 partitions now")) {
				stopped++
			}
		}
		return stopped == 2, fmt.Sprint(st.Partitions, st.Failed)
	})
}

// Under an option that accepts partitions added to the input
// (WithAcceptInputRepartition here), a running partition that gets a key
// that moved into it goes on: it used to fail, which ended a WithFailFast
// worker (found by a review). It says so at warn. Get routes the moved key
// with the new count once the consumer has read it, not with its own
// cached one (up to 30 s old).
func TestAcceptedPartitionsAddedDoNotStopARunningPartition(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	core, logs := observer.New(zap.WarnLevel)
	w, done := kfakeWorker(t, ledger.Flow(), brokers, input, snaps, actorflow.WithLogger(zap.New(core)),
		actorflow.WithAcceptInputRepartition(), actorflow.WithFailFast())
	wctx := ctxFor(t, 90*time.Second)
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 40}, 200, ledger.Expected{})
	if err := w.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}
	// Get reads the count (2) now, and caches it for 30 s.
	moved := keyRoutedTo(t, input, 2, 3)
	if _, info, _ := actorflow.Get[ledger.State](wctx, w, moved); info.Partition < 0 || info.Partition >= 2 {
		t.Fatalf("Get routed key %q to partition %d under 2", moved, info.Partition)
	}
	adm := kadm.NewClient(testkit.Client(t, brokers))
	if _, err := adm.CreatePartitions(wctx, 1, input, snaps); err != nil {
		t.Fatal(err)
	}
	testkit.AwaitTopics(t, adm, 3, input)
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 40}, 200, ledger.Expected{})
	testkit.Eventually(t, 60*time.Second, "a running partition's accepted moved key", func() (bool, string) {
		return logs.FilterMessageSnippet("an option accepts it").Len() > 0, fmt.Sprint(w.Status(wctx).Failed)
	})
	// The consumer has read the new count: Get routes with it, not with
	// its own cached one (30 s stale).
	if _, info, _ := actorflow.Get[ledger.State](wctx, w, moved); info.Partition != 2 {
		t.Fatalf("Get routed key %q to partition %d after the consumer read 3 partitions; want 2", moved, info.Partition)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned under WithFailFast: %v", err)
	default:
	}
	for _, f := range w.Status(wctx).Failed {
		if f.Partition < 2 {
			t.Fatalf("partition %d failed: %s", f.Partition, f.Error)
		}
	}
}

// keyRoutedTo is a key the input's default partitioner routes to partition
// p among n.
func keyRoutedTo(t *testing.T, topic string, p int32, n int) string {
	t.Helper()
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for i := range 10_000 {
		k := fmt.Sprintf("acct-%d", i)
		if coordinator.KeyPartition(part, &kgo.Record{Topic: topic, Key: []byte(k)}, n) == p {
			return k
		}
	}
	t.Fatalf("no key of 10 000 routed to partition %d of %d", p, n)
	return ""
}
