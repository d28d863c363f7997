package scenarios

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// countingPartition counts transactions.
type countingPartition struct {
	snapshotstore.Partition
	txns    atomic.Int64
	largest atomic.Int64 // the most writes one transaction carried
}

func (c *countingPartition) Commit(ctx context.Context, b snapshotstore.Batch) error {
	c.txns.Add(1)
	for n := int64(len(b.Writes)); ; {
		cur := c.largest.Load()
		if n <= cur || c.largest.CompareAndSwap(cur, n) {
			break
		}
	}
	return c.Partition.Commit(ctx, b)
}

// ConcurrentWrites: many keys of one partition flush concurrently through
// the one transactional producer; every write commits exactly once and is
// readable read_committed. With cap 1 every write is its own transaction;
// with cap 256 they group.
func ConcurrentWrites(t *testing.T, brokers []string, maxWrites int) {
	input, snaps, group := Topics(t, brokers, 1)
	m := testkit.JoinMember(t, brokers, group, input)
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: snapshotstore.Transactional, TransactionalIDPrefix: group})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: input, Partition: 0, Group: group, GroupMetadata: liveMeta(m)})
	if err != nil {
		t.Fatal(err)
	}
	cp := &countingPartition{Partition: p}
	h := partitionflow.SpawnTxn(actor.NewActorSystem(), cp, maxWrites, 0, nil)
	defer h.Stop()

	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := snapshotstore.Snapshot{Key: "k" + strconv.Itoa(i), Value: []byte(strconv.Itoa(i * i)), Offset: int64(i)}
			if err := h.Write(ctx, s); err != nil {
				errs <- fmt.Errorf("write %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := snapshotstore.ReadLatest(ctx, brokers, snaps, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		s, ok := got["k"+strconv.Itoa(i)]
		if !ok || string(s.Value) != strconv.Itoa(i*i) || s.Offset != int64(i) {
			t.Errorf("key k%d: got %+v", i, s)
		}
	}
	// Exactly once: the latest per key cannot show a write committed in
	// two transactions.
	copies := map[string]int{}
	for _, r := range testkit.ReadTopic(t, brokers, snaps, true) {
		if k := string(r.Key); strings.HasPrefix(k, "k") {
			copies[k]++
		}
	}
	for k, c := range copies {
		if c != 1 {
			t.Errorf("key %s: %d records read_committed, want exactly 1", k, c)
		}
	}
	if len(copies) != n {
		t.Errorf("%d keys read_committed, want %d", len(copies), n)
	}
	txns, largest := cp.txns.Load(), cp.largest.Load()
	switch {
	case largest > int64(maxWrites):
		t.Errorf("cap %d: a transaction carried %d writes: the cap was exceeded", maxWrites, largest)
	case maxWrites == 1 && txns != n:
		t.Errorf("cap 1: %d transactions, want %d (one per write)", txns, n)
	case maxWrites > 1 && txns > n/10:
		// Writes queued during a transaction go into the next one: 3 on
		// kfake and on Kafka 4.4.0 in every run seen (the first write alone,
		// then two capped ones); one per write would be 300.
		t.Errorf("cap %d: %d transactions for %d concurrent writes, want at most %d: writes are not grouped", maxWrites, txns, n, n/10)
	}
	t.Logf("cap %d: %d concurrent writes in %d transactions, the largest of %d", maxWrites, n, txns, largest)
}

// openTxn starts a raw transactional producer with a transaction open on
// snapshot partition 0 (a record written, not committed).
func openTxn(t *testing.T, brokers []string, id, topic string, timeout time.Duration) *kgo.Client {
	t.Helper()
	cl := testkit.Client(t, brokers, kgo.TransactionalID(id), kgo.TransactionTimeout(timeout),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := snapshotstore.EncodeRecord(topic, 0, snapshotstore.Snapshot{Key: "foreign", Value: []byte(`{"count":1}`), Offset: 0})
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Its first transaction to the topic: a later EndTransaction(TryCommit)
	// must find the partition published, or kgo drops the commit.
	if !kgotxn.Published(ctx, cl, topic, 0, time.Now().Add(10*time.Second)) {
		t.Fatalf("%s[0]: %v", topic, kgotxn.ErrNotPublished)
	}
	return cl
}

// TakeoverAbortsOpenTransaction: a crashed owner left a transaction open
// on the snapshot partition; the new owner's open (InitProducerID on the
// stable transactional.id) aborts it, so the last stable offset is back at
// the high watermark right after acquisition — a state only the abort
// produces, not the broker's timeout (1 min here).
func TakeoverAbortsOpenTransaction(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: snapshotstore.Transactional, TransactionalIDPrefix: group})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	id := k.TransactionalID(input, 0)
	if want := group + "-" + input + "-0"; id != want {
		t.Fatalf("transactional.id %q, want %q (<prefix>-<topic>-<partition>)", id, want)
	}
	openTxn(t, brokers, id, snaps, time.Minute) // the crashed owner
	hwm, lso := ends(t, brokers, snaps)
	if lso >= hwm {
		t.Fatalf("before takeover: LSO %d, HWM %d: no open transaction pins the LSO", lso, hwm)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: input, Partition: 0, Group: group,
		GroupMetadata: func() (snapshotstore.GroupMetadata, error) {
			return snapshotstore.GroupMetadata{}, snapshotstore.ErrNoGroupMetadata
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	hwm2, lso2 := ends(t, brokers, snaps)
	if lso2 != hwm2 {
		t.Fatalf("right after takeover: LSO %d, HWM %d: the open transaction was not aborted", lso2, hwm2)
	}
	got := map[string]bool{}
	if err := p.Recover(ctx, func(s snapshotstore.Snapshot) error { got[s.Key] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if got["foreign"] {
		t.Fatal("the aborted transaction's snapshot was recovered")
	}
}

// ForeignTransactionWaitedOut: a transaction no takeover aborts (another
// transactional.id) is open on the snapshot partition when recovery starts.
// The read targets the high watermark, so it waits — under a stall deadline
// set above the wait — and recovers the snapshot the transaction commits. A
// read bounded by the LSO would have finished early without it.
func ForeignTransactionWaitedOut(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	foreign := openTxn(t, brokers, group+"-foreign", snaps, time.Minute)
	hwm, lso := ends(t, brokers, snaps)
	if lso >= hwm {
		t.Fatalf("LSO %d, HWM %d: the foreign transaction does not pin the LSO", lso, hwm)
	}
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: snapshotstore.Transactional,
		TransactionalIDPrefix: group, RecoveryStallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: input, Partition: 0, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	started := make(chan struct{})
	type result struct {
		keys map[string]bool
		err  error
	}
	res := make(chan result, 1)
	go func() {
		keys := map[string]bool{}
		close(started)
		err := p.Recover(ctx, func(s snapshotstore.Snapshot) error { keys[s.Key] = true; return nil })
		res <- result{keys, err}
	}()
	<-started
	// The read must not finish while the transaction is open. (An absence
	// cannot be awaited: give a read bounded by the LSO ample time to end.)
	select {
	case r := <-res:
		t.Fatalf("recovery finished while the transaction was open (keys %v, err %v): it under-read", r.keys, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := foreign.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("recovery: %v", r.err)
	}
	if !r.keys["foreign"] {
		t.Fatal("recovery finished without the snapshot the waited-out transaction committed")
	}
}

// StallDeadlineHangingTransaction: a transaction that outlives the stall
// deadline fails the read with a RecoveryReadStalledError diagnosed as an
// open transaction (the log end is at the target).
func StallDeadlineHangingTransaction(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	hanging := openTxn(t, brokers, group+"-hanging", snaps, time.Minute)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = hanging.EndTransaction(ctx, kgo.TryAbort)
	}()
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: snapshotstore.Transactional,
		TransactionalIDPrefix: group, RecoveryStallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: input, Partition: 0, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	err = p.Recover(ctx, func(snapshotstore.Snapshot) error { return nil })
	var stalled *snapshotstore.RecoveryReadStalledError
	if !errors.As(err, &stalled) {
		t.Fatalf("recovery: got %v, want a RecoveryReadStalledError", err)
	}
	if stalled.Cause != snapshotstore.StallOpenTransaction {
		t.Fatalf("diagnosis %v, want open transaction (%+v)", stalled.Cause, stalled)
	}
	t.Logf("stalled as designed: %v", err)
}
