package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// An assignment waiting for a stable committed offset (another client's
// open transaction holds the group's offsets; the worker resolves only its
// own transactional ids') gives up when Run begins its shutdown. It waited
// inside kgo's assigned callback, whose context only the client's close
// ends — after the shutdown, which needs the rebalance lock the callback
// held: the worker could not be stopped until that transaction timed out.
func TestUnstableOffsetWaitEndsAtStop(t *testing.T) {
	const group, topic = "g", "in"
	cl := unstableOffsets(t, group, topic, "foreign")

	cons := &Consumer{cfg: Config{Group: group, HangingTxnResolveAfter: -1}, adm: kadm.NewClient(cl),
		log: zap.NewNop(), stopping: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := cons.fetchStable(context.Background(), []TopicPartition{{topic, 0}}, cons.cfg.HangingTxnResolveAfter)
		done <- err
	}()
	close(cons.stopping)
	select {
	case err := <-done:
		if !errors.Is(err, errStopping) {
			t.Fatalf("fetchStable = %v; want it to see the offset unstable, wait, and give up at the stop (errStopping)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fetchStable still waits for the other client's transaction after the stop")
	}
}

// pendingOffsetCommit leaves transactional id id's transaction open with
// group's offset of topic[0] in it.
func pendingOffsetCommit(t *testing.T, cl *kgo.Client, id, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	init.TransactionTimeoutMillis = 60_000
	ir, err := init.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ir.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerID: %v", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, ir.ProducerID, ir.ProducerEpoch, group
	ar, err := add.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ar.ErrorCode)
	}
	if err != nil {
		t.Fatalf("AddOffsetsToTxn: %v", err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = id, group, ir.ProducerID, ir.ProducerEpoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset, rp.LeaderEpoch = 5, -1
	rt.Partitions = append(rt.Partitions, rp)
	commit.Topics = append(commit.Topics, rt)
	cr, err := commit.RequestWith(ctx, cl)
	if err == nil {
		for _, rt := range cr.Topics {
			for _, rp := range rt.Partitions {
				if perr := kerr.ErrorForCode(rp.ErrorCode); perr != nil {
					err = perr
				}
			}
		}
	}
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
}

// A failed partition's restart is bounded (restartBound: 3.3 s at a 10 s
// rebalance timeout) while the committed offset it fetches is held
// unstable by a hanging transaction: it must look for hanging transactions
// within its bound. With the assignment's 10 s HangingTxnResolveAfter no
// restart ever reached ResolveHanging and the partition stayed failed for
// good (found by a review, which wrote this test).
func TestRestartLooksForHangingTransactionsWithinItsBound(t *testing.T) {
	const group, topic = "g", "in"
	cl := unstableOffsets(t, group, topic, "hanging")
	tp := TopicPartition{topic, 0}
	cons := testConsumer(cl, nopHandler{}, tp)
	cons.adm = kadm.NewClient(cl)
	cons.stopping = make(chan struct{})
	var resolves atomic.Int32
	cons.cfg.Group, cons.cfg.RebalanceTimeout, cons.cfg.TeardownTimeout = group, 10*time.Second, 10*time.Second*2/3
	cons.cfg.HangingTxnResolveAfter = 10 * time.Second
	cons.cfg.ResolveHanging = func(context.Context, string) (int, error) {
		resolves.Add(1)
		return 0, errors.New("not this one's to end")
	}
	cons.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
	cons.PartitionFailed(tp, errors.New("poison"))
	cons.restart(context.Background(), tp)
	if resolves.Load() == 0 {
		t.Fatalf("a restart bounded to %s never looked for hanging transactions (resolve after %s)", cons.restartBound(), cons.restartResolveAfter())
	}
	if cons.failed[tp] == nil {
		t.Fatal("precondition: the partition started although its committed offset stayed unstable")
	}
}

// unstableOffsets starts kfake with topic, gives group a committed offset
// (as after an earlier owner) and a newer one in an open transaction of the
// transactional id txnID, and returns a client of the cluster.
func unstableOffsets(t *testing.T, group, topic, txnID string) *kgo.Client {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 5) // v6+ names topics by ID
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var offs kadm.Offsets
	offs.AddOffset(topic, 0, 1, -1)
	if _, err := kadm.NewClient(cl).CommitOffsets(context.Background(), group, offs); err != nil {
		t.Fatal(err)
	}
	pendingOffsetCommit(t, cl, txnID, group, topic)
	return cl
}

// An assignment whose requests fail transiently (the brokers unreachable)
// retries them for up to fetchStableRetryFor inside kgo's assigned
// callback, holding the rebalance lock the shutdown needs: it gives up when
// Run begins its shutdown, and the partitions it was starting are left
// unowned (found by a review: the retries watched only the callback's
// context, which the client's close ends after the shutdown).
func TestAnAssignmentsRetriesEndAtStop(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	c := testConsumer(cl, nopHandler{})
	c.adm = kadm.NewClient(cl)
	c.cfg.Group = "g"
	c.held = map[TopicPartition]bool{}
	c.ready, c.stopping = make(chan struct{}), make(chan struct{})
	close(c.ready)
	retrying := make(chan struct{}, 1)
	c.log = zap.New(hookCore{fn: func(msg string) {
		if strings.HasSuffix(msg, "failed; retrying") {
			select {
			case retrying <- struct{}{}:
			default:
			}
		}
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.onAssigned(context.Background(), cl, map[string][]int32{tp.Topic: {tp.Partition}})
	}()
	select {
	case <-retrying:
	case <-done:
		t.Fatal("the assignment did not retry against unreachable brokers")
	case <-time.After(time.Minute):
		t.Fatal("no retry logged")
	}
	close(c.stopping)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the assignment still retries after the stop began (the shutdown waits for its lock)")
	}
	if c.owned[tp] || c.fatal != nil {
		t.Fatalf("after the abandoned assignment: owned %v, fatal %v", c.owned[tp], c.fatal)
	}
}

// hookCore is a zapcore.Core calling fn with every message.
type hookCore struct {
	zapcore.LevelEnabler
	fn func(msg string)
}

func (h hookCore) Enabled(zapcore.Level) bool        { return true }
func (h hookCore) With([]zapcore.Field) zapcore.Core { return h }
func (h hookCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, h)
}
func (h hookCore) Write(e zapcore.Entry, _ []zapcore.Field) error { h.fn(e.Message); return nil }
func (h hookCore) Sync() error                                    { return nil }

// openFails is a Handler whose Open fails with err and counts the stops.
type openFails struct {
	nopHandler
	err   error
	stops atomic.Int32
}

func (h *openFails) Open(context.Context, []TopicPartition) error { return h.err }
func (h *openFails) Stop(context.Context, []TopicPartition, bool) { h.stops.Add(1) }

// An assignment failing on a broker-side error the cluster recovers from (a
// coordinator moving, a broker restart outlasting the retries) fails its
// partitions through Config.OnFailure — the worker's path, where failures
// are counted and fail-fast ends the worker — not PartitionFailed directly,
// and not the whole worker (found by a review: the worker's path was
// skipped). The stores it opened are closed.
func TestATransientAssignmentFailureGoesThroughOnFailure(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	h := &openFails{err: fmt.Errorf("fence: %w", kerr.CoordinatorNotAvailable)}
	c := testConsumer(cl, h)
	c.held = map[TopicPartition]bool{}
	c.ready, c.stopping = make(chan struct{}), make(chan struct{})
	close(c.ready)
	var got []error
	c.cfg.OnFailure = func(ftp TopicPartition, err error) {
		if ftp != tp {
			t.Errorf("OnFailure for %v, want %v", ftp, tp)
		}
		got = append(got, err)
		c.PartitionFailed(ftp, err)
	}
	c.onAssigned(context.Background(), cl, map[string][]int32{tp.Topic: {tp.Partition}})
	if len(got) != 1 || !errors.Is(got[0], kerr.CoordinatorNotAvailable) {
		t.Fatalf("OnFailure got %v, want one failure wrapping COORDINATOR_NOT_AVAILABLE", got)
	}
	if msg := got[0].Error(); !strings.Contains(msg, "in[0]") {
		t.Errorf("the failure %q does not name the partition", msg)
	}
	if c.fatal != nil {
		t.Fatalf("the worker failed: %v", c.fatal)
	}
	if !c.owned[tp] || c.failed[tp] == nil {
		t.Fatalf("owned %v, failed %v: want owned and due for a restart", c.owned[tp], c.failed[tp])
	}
	if h.stops.Load() != 1 {
		t.Fatalf("the opened stores were closed %d times, want 1", h.stops.Load())
	}
}
