package snapshotstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestCounter counts the requests a client writes, by key.
type requestCounter struct {
	mu sync.Mutex
	n  map[int16]int
}

func (r *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[int16]int{}
	}
	r.n[key]++
}

func (r *requestCounter) count(k kmsg.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[k.Int16()]
}

type txnFixture struct {
	c            *kfake.Cluster
	brokers      []string
	input, snaps string
	group        string
	meta         GroupMetadataFunc
	adm          *kadm.Client
}

// newTxnFixture starts kfake (with transaction.version downgraded to 0 unless
// tv2), an input and a snapshot topic, and a live member of a group on the
// input topic.
func newTxnFixture(t *testing.T, tv2 bool) *txnFixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &txnFixture{c: c, brokers: c.ListenAddrs(), input: "in", snaps: "snaps", group: "g"}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admCl.Close)
	f.adm = kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !tv2 {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "transaction.version", 0, 2 // safe downgrade
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
		resp, err := req.RequestWith(ctx, admCl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("downgrade transaction.version: %v", err)
		}
	}
	for _, topic := range []string{f.input, f.snaps} {
		if _, err := f.adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(f.input), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(context.Background())
	var polling sync.WaitGroup
	polling.Go(func() {
		for pctx.Err() == nil {
			member.PollFetches(pctx)
		}
	})
	t.Cleanup(func() { stop(); polling.Wait(); member.Close() })
	f.meta = func() (GroupMetadata, error) {
		m, g := member.GroupMetadata()
		if g < 1 {
			return GroupMetadata{}, ErrNoGroupMetadata
		}
		return GroupMetadata{MemberID: m, Generation: g}, nil
	}
	for {
		if _, err := f.meta(); err == nil {
			return f
		}
		if ctx.Err() != nil {
			t.Fatalf("member never joined: %v", ctx.Err())
		}
		time.Sleep(10 * time.Millisecond) // the join is not signalled
	}
}

func (f *txnFixture) open(t *testing.T, meta GroupMetadataFunc, hooks ...kgo.Hook) (*Kafka, *txnPartition) {
	t.Helper()
	return f.openConfig(t, meta, KafkaConfig{ClientOpts: []kgo.Opt{kgo.WithHooks(hooks...)}})
}

// openConfig is open with cfg (its mode and transactional.id prefix set
// here). Its Close at cleanup waits 5 s at most for a re-initialisation
// under way.
func (f *txnFixture) openConfig(t *testing.T, meta GroupMetadataFunc, cfg KafkaConfig) (*Kafka, *txnPartition) {
	t.Helper()
	cfg.Mode, cfg.TransactionalIDPrefix = Transactional, "p"
	k, err := NewKafka(f.brokers, f.snaps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	p, err := k.Open(context.Background(), PartitionInfo{Topic: f.input, Partition: 0, Group: f.group, GroupMetadata: meta})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return k, p.(*txnPartition)
}

func (f *txnFixture) committed(t *testing.T) int64 {
	t.Helper()
	offs, err := f.adm.FetchOffsets(context.Background(), f.group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(f.input, 0)
	if !ok || o.Err != nil {
		t.Fatalf("no committed offset: %+v", o)
	}
	return o.At
}

// Under transaction version 2 the TxnOffsetCommit adds the offsets partition
// itself: after the first commit shows the version (the epoch moves), the
// transactions skip AddOffsetsToTxn (issue 11: one round trip less). Under
// version 1 every transaction still sends it, or the commit would be
// rejected. Either way every offset lands.
func TestTxnCommitSkipsAddOffsetsOnlyUnderTransactionVersion2(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tv2        bool
		addOffsets int
	}{
		{"transaction.version 2", true, 1},
		{"transaction.version 0", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTxnFixture(t, tc.tv2)
			var reqs requestCounter
			_, p := f.open(t, f.meta, &reqs)
			ctx := context.Background()
			for i := int64(1); i <= 3; i++ {
				b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v"), Offset: i - 1}}, Offset: i, OffsetAdvanced: true}
				if err := p.Commit(ctx, b); err != nil {
					t.Fatalf("commit %d: %v", i, err)
				}
				if got := f.committed(t); got != i {
					t.Fatalf("after commit %d the committed offset is %d", i, got)
				}
			}
			if p.tv2 != tc.tv2 {
				t.Errorf("tv2 = %v, want %v", p.tv2, tc.tv2)
			}
			if got := reqs.count(kmsg.AddOffsetsToTxn); got != tc.addOffsets {
				t.Errorf("%d AddOffsetsToTxn requests for 3 transactions, want %d", got, tc.addOffsets)
			}
			if got := reqs.count(kmsg.TxnOffsetCommit); got != 3 {
				t.Errorf("%d TxnOffsetCommit requests, want 3", got)
			}
		})
	}
}

// A TxnOffsetCommit that is the first step (transaction version 2) begins the
// transaction on the broker even when it is rejected. kgo sends EndTxn only
// for a transaction it produced in, so the abort must still reach the broker:
// otherwise the transaction stays open until its timeout and the next one
// joins it.
func TestTxnRejectedFirstOffsetCommitStillEndsTheTransaction(t *testing.T) {
	f := newTxnFixture(t, true)
	stale := false
	meta := func() (GroupMetadata, error) {
		m, err := f.meta()
		if stale {
			m.MemberID = "evicted-member"
		}
		return m, err
	}
	k, p := f.open(t, meta)
	ctx := context.Background()
	if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	if !p.tv2 {
		t.Fatal("transaction version 2 not detected after the first commit")
	}
	stale = true
	err := p.Commit(ctx, Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v"), Offset: 1}}, Offset: 2, OffsetAdvanced: true})
	if !errors.Is(err, kerr.UnknownMemberID) || !errors.Is(err, ErrFenced) {
		t.Fatalf("commit of an evicted member: got %v, want UNKNOWN_MEMBER_ID matching ErrFenced", err)
	}
	txns, err := f.adm.DescribeTransactions(ctx, k.TransactionalID(f.input, 0))
	if err != nil {
		t.Fatal(err)
	}
	for id, d := range txns {
		if d.Err != nil || d.State == "Ongoing" {
			t.Errorf("transaction %s after the rejected commit: state %q (err %v), want it ended", id, d.State, d.Err)
		}
	}
	if got := f.committed(t); got != 1 {
		t.Errorf("committed offset %d after the rejected commit, want 1", got)
	}
	stale = false
	if err := p.Commit(ctx, Batch{Offset: 3, OffsetAdvanced: true}); err != nil {
		t.Fatalf("commit after the rejection: %v", err)
	}
	if got := f.committed(t); got != 3 {
		t.Errorf("committed offset %d, want 3", got)
	}
}

// reinitHeld starts p's re-initialisation with kfake holding its
// InitProducerID unanswered, and returns once the request is held: the
// re-initialisation's outcome, unblock (which lets kfake answer; also at the
// test's end, so a failed test leaves nothing held) and whether kfake has
// answered.
func reinitHeld(t *testing.T, f *txnFixture, p *txnPartition) (<-chan error, func(), *atomic.Bool) {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	answered := new(atomic.Bool)
	var once sync.Once
	f.c.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil, nil, false
		}
		close(entered)
		f.c.SleepControl(func() { <-release })
		answered.Store(true) // kfake answers it right after this
		return nil, nil, false
	})
	done := make(chan error, 1)
	go func() { done <- p.reinit(context.Background()) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the re-initialisation sent no InitProducerID")
	}
	return done, unblock, answered
}

// A re-initialisation under way when the partition closes (a stop's drain
// gave up on a Commit that was re-initialising): Close waits for its
// InitProducerID's answer, so its epoch bump lands before the partition is
// handed over, not after the next owner's own InitProducerID (which it
// would fence). Close returned at once before: a carried finding.
func TestTxnCloseWaitsForAReinitUnderWay(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	reinitDone, unblock, answered := reinitHeld(t, f, p)
	closeDone := make(chan struct{})
	go func() {
		_ = p.Close(context.Background())
		close(closeDone)
	}()
	// No event says "Close is waiting": give a Close that does not wait
	// the time to return (it took microseconds).
	select {
	case <-closeDone:
		t.Fatal("Close returned while the re-initialisation's InitProducerID was unanswered")
	case <-time.After(200 * time.Millisecond):
	}
	unblock()
	select {
	case <-closeDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the InitProducerID was answered")
	}
	if !answered.Load() {
		t.Fatal("Close returned before the InitProducerID was answered")
	}
	if err := <-reinitDone; err == nil {
		t.Fatal("a re-initialisation that ended after Close installed its producer")
	}
}

// Close's wait for a re-initialisation ends at Close's deadline, and then
// Close cancels it: the stop stays within its budget. The re-initialisation
// itself has no deadline of its own (a node kill's InitProducerID waits for
// the coordinator: a 10 s bound failed a partition in the 3-node CI run).
func TestTxnCloseCancelsAReinitAtItsDeadline(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	reinitDone, _, _ := reinitHeld(t, f, p)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	closeDone := make(chan struct{})
	go func() {
		_ = p.Close(ctx)
		close(closeDone)
	}()
	select {
	case <-closeDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited past its deadline for the re-initialisation")
	}
	select {
	case err := <-reinitDone:
		if err == nil {
			t.Fatal("a re-initialisation Close cancelled installed its producer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the re-initialisation did not end when Close cancelled it")
	}
}

// A re-initialisation asked for after the stop cancelled the Commit sends no
// InitProducerID: its epoch bump would be for nothing (its InitProducerID
// is no longer cut short by the cancel once sent; found by a review).
func TestTxnReinitAfterTheStopsCancelSendsNothing(t *testing.T) {
	f := newTxnFixture(t, true)
	var reqs requestCounter
	_, p := f.open(t, f.meta, &reqs)
	before := reqs.count(kmsg.InitProducerID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.reinit(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("reinit with a cancelled context = %v, want context.Canceled", err)
	}
	if n := reqs.count(kmsg.InitProducerID); n != before {
		t.Fatalf("%d InitProducerID requests after the cancel, want none", n-before)
	}
}

// A closed partition's re-initialisation sends no InitProducerID: the epoch
// bump would fence the partition's next owner (its next instance on this
// worker), which would then redo its transaction.
func TestTxnReinitAfterCloseDoesNotFence(t *testing.T) {
	f := newTxnFixture(t, true)
	var reqs requestCounter
	_, p := f.open(t, f.meta, &reqs)
	before := reqs.count(kmsg.InitProducerID)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.reinit(context.Background()); err == nil {
		t.Fatal("reinit of a closed partition succeeded")
	}
	if n := reqs.count(kmsg.InitProducerID); n != before {
		t.Fatalf("%d InitProducerID requests after Close, want none (%d before)", n-before, before)
	}
}
