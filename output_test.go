package actorflow_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Plain mode: a key holds its input offset until its outputs are
// acknowledged by the application's producer: with the output cluster
// withholding produce responses, nothing is committed past the first
// record; once released, everything commits and every output exists. (In
// the transactional mode the application's producer is not used: outputs
// are produced in the partition's transactions.)
func TestOutputAckHoldsOffset(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	outCluster, outBrokers := testkit.Kfake(t)
	input, snaps, group := scenarios.Topics(t, brokers, 1)
	if _, err := kadm.NewClient(testkit.Client(t, outBrokers)).CreateTopic(context.Background(), 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	outCluster.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release // withhold the acknowledgement (the output cluster only)
		return nil, nil, false
	})
	exp := ledger.Expected{}
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 5}, 50, exp)
	producer := testkit.Client(t, outBrokers)
	var folds atomicCounter
	w := scenarios.StartWorker(t, ledger.FlowWithOutput(producer, "out", &folds.n), brokers, group, input, snaps, snapshotstore.Plain)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no output produced")
	}
	// Folds happen, snapshot flushes are due every 50 ms, yet the offset
	// must not move while outputs are unacknowledged.
	testkit.Eventually(t, 30*time.Second, "all records folded", func() (bool, string) { return folds.n.Load() == 50, "" })
	time.Sleep(300 * time.Millisecond) // several commit ticks: an absence cannot be awaited
	if c := committedOffset(t, brokers, group, input); c > 0 {
		t.Fatalf("committed offset %d while the outputs of records from 0 are unacknowledged", c)
	}
	close(release)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	scenarios.VerifyLedger(t, brokers, snaps, 1, exp)
}

func committedOffset(t *testing.T, brokers []string, group, topic string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(testkit.Client(t, brokers)).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); ok {
		return o.At
	}
	return -1
}

type atomicCounter struct{ n atomic.Int64 }

// Plain mode: outputs go through the application's producer, here to
// another cluster than the worker's, and Emit checks them by that
// cluster's topic rules, read through that producer. The worker's cluster
// has a compacted topic of the output's name, and a topic the output
// cluster lacks: by its rules a key-less output was refused (compacted
// there, not where it goes) and an output to the missing topic passed
// unchecked, failing its partition at every attempt.
func TestPlainOutputsCheckedOnTheirCluster(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	_, outBrokers := testkit.Kfake(t)
	input, snaps, group := scenarios.Topics(t, brokers, 1)
	out, gone, dlq := testkit.Name(t, "out"), testkit.Name(t, "gone"), keyflow.DefaultDeadLetterTopic(input)
	compact := "compact"
	adm, outAdm := kadm.NewClient(testkit.Client(t, brokers)), kadm.NewClient(testkit.Client(t, outBrokers))
	for _, c := range []struct {
		adm     *kadm.Client
		topic   string
		configs map[string]*string
	}{
		{adm, out, map[string]*string{"cleanup.policy": &compact}}, // the worker's cluster
		{adm, gone, nil},
		{adm, dlq, nil},
		{outAdm, out, nil}, // the output's: not compacted, and no topic gone
	} {
		if _, err := c.adm.CreateTopic(t.Context(), 1, 1, c.configs, c.topic); err != nil {
			t.Fatal(err)
		}
	}
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	for _, k := range []string{"a", "g"} {
		if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(k)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	flow := keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
		o := &kgo.Record{Topic: out} // no key
		if kc.Key() == "g" {
			o.Topic = gone
		}
		return s, kc.Emit(o)
	}, keyflow.WithOutput(testkit.Client(t, outBrokers), out), keyflow.WithFoldErrorPolicy(keyflow.DeadLetter))
	w := scenarios.StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Plain, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	if got := testkit.ReadTopic(t, outBrokers, out, true); len(got) != 1 || got[0].Key != nil {
		t.Fatalf("outputs on the output cluster %v: want key a's key-less one", got)
	}
	dls := testkit.ReadTopic(t, brokers, dlq, true)
	if len(dls) != 1 || string(dls[0].Key) != "g" {
		t.Fatalf("dead letters %v: want key g's alone", dls)
	}
	if info, err := keyflow.ParseDeadLetter(dls[0]); err != nil || !strings.Contains(info.Message, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("key g's dead letter: %+v, %v; want it refused as UNKNOWN_TOPIC_OR_PARTITION", info, err)
	}
}
