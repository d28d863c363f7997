package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// owner is one owner of input partition 0 at the store level: the real
// write path (store + transaction actor), driven by explicit group metadata.
type owner struct {
	store *snapshotstore.Kafka
	txn   *partitionflow.TxnHandle
}

func openOwner(t *testing.T, brokers []string, mode snapshotstore.Mode, prefix, group, input, snaps string, seed int64,
	meta snapshotstore.GroupMetadataFunc, commit func(context.Context, int64) error) *owner {
	t.Helper()
	// A frozen reader never observes a newer generation: bound the wait
	// before a stale-generation rejection stands.
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: mode, TransactionalIDPrefix: prefix,
		StaleGenerationWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: input, Partition: 0, Group: group, GroupMetadata: meta, ConsumerCommit: commit})
	if err != nil {
		t.Fatal(err)
	}
	o := &owner{store: k, txn: partitionflow.SpawnTxn(actor.NewActorSystem(), p, 0, seed, nil)}
	t.Cleanup(func() { o.txn.Stop(); k.Close() })
	return o
}

func consumerCommit(cl *kgo.Client, topic string) func(context.Context, int64) error {
	return func(ctx context.Context, off int64) error {
		var cerr error
		cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: off}}},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err != nil {
					cerr = err
					return
				}
				for _, tp := range resp.Topics {
					for _, p := range tp.Partitions {
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
							cerr = err
						}
					}
				}
			})
		return cerr
	}
}

// Corruption732 is the seed's corruption pair (kafka-flow#732), driven by
// two real group members: a stale owner (frozen at the older generation)
// flushes its older snapshot after the new owner persisted a newer one and
// committed past it. The next owner recovers the snapshot and resumes from
// the committed offset. In the plain mode the stale write lands and the
// recovered state misses events (the test asserts the corruption is
// reproduced); in the transactional mode the stale write is fenced and the
// state is exact.
func Corruption732(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	const acct = "acct-0"
	gen := &ledger.Generator{Accounts: 1}
	var events []ledger.Event
	for range 8 {
		events = append(events, gen.Next())
	}
	fold := func(evs []ledger.Event) ledger.State {
		e := ledger.Expected{}
		for _, ev := range evs {
			e.Add(ev)
		}
		return e[acct]
	}
	exp := ledger.Expected{}
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 1}, 8, exp)

	a := testkit.JoinMember(t, brokers, group, input)
	staleMeta := metaOf(a) // the stale owner never sees the generation move on
	b := testkit.JoinMember(t, brokers, group, input)
	testkit.Eventually(t, 30*time.Second, "a newer generation", func() (bool, string) {
		return metaOf(b).Generation > staleMeta.Generation, ""
	})

	// The new owner folds all 8 events, persists (snapshot offset 7) and
	// commits the input offset 8.
	newOwner := openOwner(t, brokers, mode, group+"-new", group, input, snaps, 0, liveMeta(b), consumerCommit(b, input))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := newOwner.txn.Write(ctx, stateSnapshot(t, acct, fold(events), 7)); err != nil {
		t.Fatalf("new owner write: %v", err)
	}
	if err := newOwner.txn.CommitOffset(ctx, 8); err != nil {
		t.Fatalf("new owner commit: %v", err)
	}

	// The stale owner's flush-on-revoke of its older state (5 events).
	// A separate transactional.id prefix keeps its producer unfenced by
	// epoch, so only the generation can stop it.
	stale := openOwner(t, brokers, mode, group+"-stale", group, input, snaps, 0, frozenMeta(staleMeta), consumerCommit(a, input))
	staleErr := stale.txn.Write(ctx, stateSnapshot(t, acct, fold(events[:5]), 4))

	// Recovery of the next owner: the snapshot plus the input from the
	// committed offset.
	snapsRead, err := snapshotstore.ReadLatest(ctx, brokers, snaps, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	var recovered ledger.State
	if err := json.Unmarshal(snapsRead[acct].Value, &recovered); err != nil {
		t.Fatal(err)
	}
	from := committed(t, brokers, group, input, 0)
	if from != 8 {
		t.Fatalf("committed offset %d, want 8", from)
	}
	resumed := recovered // nothing at or above offset 8 to fold
	want := exp[acct]

	switch mode {
	case snapshotstore.Plain:
		if staleErr != nil {
			t.Fatalf("plain stale flush failed (%v): the scenario did not reproduce the overwrite", staleErr)
		}
		if resumed == want {
			t.Fatalf("plain mode: expected the #732 corruption (stale snapshot over a newer one), got the exact state %+v", resumed)
		}
		t.Logf("plain mode: corruption reproduced: recovered %+v, resuming at offset %d; the fold of the input is %+v", resumed, from, want)
	case snapshotstore.Transactional:
		if !errors.Is(staleErr, snapshotstore.ErrFenced) {
			t.Fatalf("transactional stale flush: got %v, want an error matching ErrFenced", staleErr)
		}
		var fe *snapshotstore.FencedError
		if !errors.As(staleErr, &fe) || fe.Meta.Generation != staleMeta.Generation {
			t.Fatalf("fence error %v does not carry the stale generation %d", staleErr, staleMeta.Generation)
		}
		if resumed != want {
			t.Fatalf("transactional mode: recovered %+v, want %+v: the newer snapshot did not survive", resumed, want)
		}
	}
}

// StaleOwnerFencedOnNextFlush: an owner commits while current, a rebalance
// moves the generation on, and its next periodic flush fails fast with
// ErrFenced; nothing of it becomes visible.
func StaleOwnerFencedOnNextFlush(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	a := testkit.JoinMember(t, brokers, group, input)
	meta := metaOf(a)
	o := openOwner(t, brokers, snapshotstore.Transactional, group, group, input, snaps, 0, frozenMeta(meta), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.txn.Write(ctx, stateSnapshot(t, "k", ledger.State{Balance: 1, Count: 1, LastSeq: 1}, 0)); err != nil {
		t.Fatalf("flush while current: %v", err)
	}
	b := testkit.JoinMember(t, brokers, group, input)
	testkit.Eventually(t, 30*time.Second, "a newer generation", func() (bool, string) {
		return metaOf(b).Generation > meta.Generation, ""
	})
	err := o.txn.Write(ctx, stateSnapshot(t, "k", ledger.State{Balance: 99, Count: 2, LastSeq: 2}, 1))
	if !errors.Is(err, snapshotstore.ErrFenced) {
		t.Fatalf("next flush after the rebalance: got %v, want ErrFenced", err)
	}
	got, err := snapshotstore.ReadLatest(ctx, brokers, snaps, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	var s ledger.State
	_ = json.Unmarshal(got["k"].Value, &s)
	if s.Balance != 1 {
		t.Fatalf("read_committed shows balance %d: the fenced write leaked", s.Balance)
	}
}

// FirstFlushGatedBySeededOffset: the offset to commit is seeded with the
// assigned offset, so the very first flush (before any commit tick)
// carries it: with a current generation it commits it, with a stale one the
// flush is fenced and the committed offset does not move.
func FirstFlushGatedBySeededOffset(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 1}, 5, ledger.Expected{})
	a := testkit.JoinMember(t, brokers, group, input)
	stale := metaOf(a)
	b := testkit.JoinMember(t, brokers, group, input)
	testkit.Eventually(t, 30*time.Second, "a newer generation", func() (bool, string) {
		return metaOf(b).Generation > stale.Generation, ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	o := openOwner(t, brokers, snapshotstore.Transactional, group+"-stale", group, input, snaps, 3, frozenMeta(stale), nil)
	if err := o.txn.Write(ctx, stateSnapshot(t, "k", ledger.State{Count: 1}, 2)); !errors.Is(err, snapshotstore.ErrFenced) {
		t.Fatalf("stale first flush: got %v, want ErrFenced", err)
	}
	if c := committed(t, brokers, group, input, 0); c != -1 {
		t.Fatalf("committed offset %d after a fenced first flush, want none", c)
	}

	cur := openOwner(t, brokers, snapshotstore.Transactional, group+"-cur", group, input, snaps, 3, liveMeta(b), nil)
	if err := cur.txn.Write(ctx, stateSnapshot(t, "k", ledger.State{Count: 1}, 2)); err != nil {
		t.Fatalf("current first flush: %v", err)
	}
	if c := committed(t, brokers, group, input, 0); c != 3 {
		t.Fatalf("committed offset %d after the first flush, want the seeded 3", c)
	}
}

// StaleOffsetCommitRejected: a transactional offset commit with a stale
// generation is rejected and the committed offset stays.
func StaleOffsetCommitRejected(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 1}, 10, ledger.Expected{})
	a := testkit.JoinMember(t, brokers, group, input)
	stale := metaOf(a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := openOwner(t, brokers, snapshotstore.Transactional, group+"-a", group, input, snaps, 0, frozenMeta(stale), nil)
	if err := o.txn.CommitOffset(ctx, 4); err != nil {
		t.Fatalf("commit while current: %v", err)
	}
	b := testkit.JoinMember(t, brokers, group, input)
	testkit.Eventually(t, 30*time.Second, "a newer generation", func() (bool, string) {
		return metaOf(b).Generation > stale.Generation, ""
	})
	if err := o.txn.CommitOffset(ctx, 9); !errors.Is(err, snapshotstore.ErrFenced) {
		t.Fatalf("stale offset commit: got %v, want ErrFenced", err)
	}
	if c := committed(t, brokers, group, input, 0); c != 4 {
		t.Fatalf("committed offset %d, want 4 (the stale commit must not land)", c)
	}
}

// NoGroupMetadataFailsLoudly: before the join (no generation) a flush fails
// with ErrNoGroupMetadata and writes nothing.
func NoGroupMetadataFailsLoudly(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	none := func() (snapshotstore.GroupMetadata, error) {
		return snapshotstore.GroupMetadata{}, snapshotstore.ErrNoGroupMetadata
	}
	o := openOwner(t, brokers, snapshotstore.Transactional, group, group, input, snaps, 0, none, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.txn.Write(ctx, stateSnapshot(t, "k", ledger.State{Count: 1}, 0)); !errors.Is(err, snapshotstore.ErrNoGroupMetadata) {
		t.Fatalf("flush before the join: got %v, want ErrNoGroupMetadata", err)
	}
	hwm, _ := ends(t, brokers, snaps)
	if hwm != 0 {
		t.Fatalf("snapshot topic high watermark %d: something was written", hwm)
	}
}

// StaleGenerationRetriedWhileMember: a member that keeps its partition
// through a rebalance flushes with the generation it read before the bump
// (the residual window of the seed). The broker rejects it; the member, still
// in the group, observes the newer generation and the transaction is run
// again and commits — a valid owner is not crashed.
func StaleGenerationRetriedWhileMember(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	a := testkit.JoinMember(t, brokers, group, input)
	before := metaOf(a)
	b := testkit.JoinMember(t, brokers, group, input)
	testkit.Eventually(t, 30*time.Second, "a's newer generation", func() (bool, string) {
		return metaOf(a).Generation > before.Generation && metaOf(b).Generation > before.Generation, ""
	})
	var reads atomic.Int32
	lagging := func() (snapshotstore.GroupMetadata, error) {
		if reads.Add(1) == 1 {
			return before, nil // read just before the bump
		}
		return liveMeta(a)()
	}
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: snapshotstore.Transactional,
		TransactionalIDPrefix: group})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: input, Partition: 0, Group: group, GroupMetadata: lagging})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	cp := &countingPartition{Partition: p}
	if err := cp.Commit(ctx, snapshotstore.Batch{Writes: []snapshotstore.Snapshot{stateSnapshot(t, "k", ledger.State{Count: 1}, 0)}, Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatalf("commit of a member that kept its partition: %v", err)
	}
	if n := reads.Load(); n < 3 {
		t.Fatalf("group metadata read %d times: the stale transaction was not rejected and retried", n)
	}
	if c := committed(t, brokers, group, input, 0); c != 1 {
		t.Fatalf("committed offset %d, want 1", c)
	}
}
