package snapshotstore

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The zero KafkaConfig is the safe store: the transactional mode (the plain
// mode lets a stale owner's write land, kafka-flow#732), with the snapshot
// topic as transactional.id prefix, not one constant that every flow on the
// cluster would share.
func TestZeroKafkaConfigIsTransactionalWithTheTopicAsPrefix(t *testing.T) {
	k, err := NewKafka([]string{"127.0.0.1:1"}, "orders-snapshots", KafkaConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if k.Mode() != Transactional {
		t.Errorf("zero KafkaConfig: mode %v, want transactional", k.Mode())
	}
	if k.hanging == nil || k.producer != nil {
		t.Errorf("zero KafkaConfig: hanging resolver %v, shared plain producer %v; want the transactional mode's resolver only", k.hanging != nil, k.producer != nil)
	}
	if got, want := k.TransactionalID("orders", 3), "orders-snapshots-orders-3"; got != want {
		t.Errorf("zero KafkaConfig: transactional.id %q, want %q", got, want)
	}
	// The hanging resolver ends only this store's transactions.
	if !k.ownsTransactionalID("orders-snapshots-orders-3") || k.ownsTransactionalID("actorflow-orders-3") {
		t.Error("ownsTransactionalID does not follow the default prefix")
	}
	c := k.cfg
	if c.txnTimeout != DefaultTransactionTimeout || c.stallTimeout != DefaultRecoveryStallTimeout ||
		c.hangingAfter != DefaultHangingTxnAfter || c.staleGenWait != DefaultStaleGenerationWait ||
		c.failoverTimeout != DefaultRecoveryStallTimeout || c.outPartitions == nil || c.log == nil {
		t.Errorf("zero KafkaConfig resolved to %+v", c)
	}
}

// Negative durations disable what zero defaults; a disabled stall timeout
// leaves the failover bound at its own default.
func TestKafkaConfigNegativeDisables(t *testing.T) {
	c, err := KafkaConfig{RecoveryStallTimeout: -1, HangingTxnResolveAfter: -1}.resolve("s")
	if err != nil {
		t.Fatal(err)
	}
	if c.stallTimeout != 0 || c.hangingAfter != 0 || c.failoverTimeout != DefaultRecoveryStallTimeout {
		t.Errorf("resolved stall %v, hanging %v, failover %v; want 0, 0, %v", c.stallTimeout, c.hangingAfter, c.failoverTimeout, DefaultRecoveryStallTimeout)
	}
	c, err = KafkaConfig{RecoveryStallTimeout: time.Second}.resolve("s")
	if err != nil || c.failoverTimeout != time.Second {
		t.Errorf("failover timeout %v (err %v), want the stall timeout 1s", c.failoverTimeout, err)
	}
}

func TestKafkaConfigRejectsAnUnknownMode(t *testing.T) {
	if k, err := NewKafka([]string{"127.0.0.1:1"}, "s", KafkaConfig{Mode: Mode(7)}); err == nil {
		k.Close()
		t.Fatal("NewKafka accepted Mode(7)")
	}
}

func TestParseModeReadsString(t *testing.T) {
	for _, m := range []Mode{Transactional, Plain} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("exactly-once"); err == nil {
		t.Error("ParseMode accepted an unknown name")
	}
	if got := Mode(7).String(); got != "Mode(7)" {
		t.Errorf("Mode(7).String() = %q", got)
	}
}

// Two flows over one input topic, each a store with the default
// KafkaConfig on its own snapshot topic, keep committing without fencing
// each other. Under the old shared default prefix the second store's
// InitProducerID fenced the first: its commit failed PRODUCER_FENCED, and
// its re-initialisation (the partition still owned) fenced the second in
// turn — the commits succeed, each after an extra InitProducerID, so those
// are what is counted.
func TestZeroKafkaConfigFlowsOverOneInputDoNotFenceEachOther(t *testing.T) {
	f := newTxnFixture(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const other = "snaps-other"
	if _, err := f.adm.CreateTopic(ctx, 1, 1, nil, other); err != nil {
		t.Fatal(err)
	}
	var parts []Partition
	var reqs []*requestCounter
	for _, topic := range []string{f.snaps, other} {
		r := &requestCounter{}
		reqs = append(reqs, r)
		k, err := NewKafka(f.brokers, topic, KafkaConfig{ClientOpts: []kgo.Opt{kgo.WithHooks(r)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		p, err := k.Open(ctx, PartitionInfo{Topic: f.input, Partition: 0, Group: f.group, GroupMetadata: f.meta})
		if err != nil {
			t.Fatalf("open on %s: %v", topic, err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		if !p.CommitsOutputs() {
			t.Fatalf("zero KafkaConfig on %s opened a plain partition", topic)
		}
		parts = append(parts, p)
	}
	// The first store's producer was initialised before the second's.
	for i, p := range parts {
		b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v"), Offset: 0}}, Offset: 1, OffsetAdvanced: true}
		if err := p.Commit(ctx, b); err != nil {
			t.Errorf("commit of flow %d after both opened: %v", i, err)
		}
	}
	for i, r := range reqs {
		if n := r.count(kmsg.InitProducerID); n != 1 {
			t.Errorf("flow %d sent %d InitProducerID requests, want 1 (the flows fence each other's producers)", i, n)
		}
	}
}
