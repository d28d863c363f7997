package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

// A plain-mode offset commit answered REBALANCE_IN_PROGRESS carried the
// group's current generation before its SyncGroup completed (the broker
// checks the generation first: ClassicGroup.validateOffsetCommit). It is
// sent again under the same generation once the sync is done. It used to
// wait for a newer generation, which never comes: the whole rebalance
// timeout, then the partition failed (found by a review).
func TestACommitDuringTheSyncIsSentAgainUnderTheSameGeneration(t *testing.T) {
	var mu sync.Mutex
	var gens []int32
	tp := TopicPartition{"in", 0}
	c := committingConsumer(t, func(req *kmsg.OffsetCommitRequest) int16 {
		mu.Lock()
		defer mu.Unlock()
		gens = append(gens, req.Generation)
		if len(gens) <= 2 { // the leader's SyncGroup still pending
			return kerr.RebalanceInProgress.Code
		}
		return 0
	}, tp)
	c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
	if err := c.CommitOffset(context.Background(), tp, 5); err != nil {
		t.Fatalf("CommitOffset: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gens) != 3 || gens[0] != 3 || gens[1] != 3 || gens[2] != 3 {
		t.Fatalf("commits sent under generations %v, want three under generation 3", gens)
	}
}

// A plain offset commit the group coordinator refuses with UNKNOWN_MEMBER_ID
// marks the member's other partitions evicted at once: a revoke's final
// commit swallows its fence (the new owner replays) and its partition never
// reports the eviction, so the others went on writing unfenced snapshots
// under the evicted membership until kgo's rejoin (found by a review).
func TestAnEvictedPlainCommitMarksTheMembersOtherPartitions(t *testing.T) {
	revoked, other := TopicPartition{"in", 0}, TopicPartition{"in", 1}
	c := committingConsumer(t, func(*kmsg.OffsetCommitRequest) int16 { return kerr.UnknownMemberID.Code }, revoked, other)
	m := snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3}
	c.own.Bind(revoked, m)
	c.own.Bind(other, m)
	err := c.CommitOffset(context.Background(), revoked, 5)
	if !errors.Is(err, snapshotstore.ErrEvicted) {
		t.Fatalf("CommitOffset = %v, want an error matching ErrEvicted", err)
	}
	if c.own.EvictedUntil(other).IsZero() {
		t.Fatal("the member's other partition is not marked evicted: its writes go on under the evicted membership")
	}
	if _, err := c.PartitionMetadata(other); !errors.Is(err, snapshotstore.ErrEvicted) {
		t.Fatalf("the other partition's next write is approved (%v), want it refused with ErrEvicted", err)
	}
}

// The plain mode's late write: a copy of a partition that outlived its
// revoke's teardown bound, the partition assigned back to this worker under
// the same membership, committed its offset under the new copy's binding.
// Its write gate (Consumer.Writes, taken when its store opened) refuses it
// before the broker; the new copy's commits go through.
func TestACopyOfAnEarlierAssignmentCommitsNothing(t *testing.T) {
	tp := TopicPartition{"in", 0}
	var mu sync.Mutex
	var sent []int64
	c := committingConsumer(t, func(req *kmsg.OffsetCommitRequest) int16 {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, req.Topics[0].Partitions[0].Offset)
		return 0
	}, tp)
	m := snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3}
	c.own.Bind(tp, m)
	old := c.Writes(tp)
	c.own.Release(tp)
	c.own.Bind(tp, m)
	cur := c.Writes(tp)
	if err := old.CommitOffset(context.Background(), 7); !errors.Is(err, snapshotstore.ErrNotOwned) {
		t.Fatalf("the earlier copy's CommitOffset = %v, want an error matching ErrNotOwned", err)
	}
	if _, err := old.Metadata(); !errors.Is(err, snapshotstore.ErrNotOwned) {
		t.Fatalf("the earlier copy's Metadata = %v, want an error matching ErrNotOwned", err)
	}
	if err := cur.CommitOffset(context.Background(), 5); err != nil {
		t.Fatalf("the current copy's CommitOffset: %v", err)
	}
	// A gate taken while the partition was not bound belongs to no
	// assignment: it writes nothing, even once the partition is bound.
	c.own.Release(tp)
	unbound := c.Writes(tp)
	c.own.Bind(tp, m)
	if _, err := unbound.Metadata(); !errors.Is(err, snapshotstore.ErrNotOwned) {
		t.Fatalf("a gate taken unbound: Metadata = %v, want an error matching ErrNotOwned", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || sent[0] != 5 {
		t.Fatalf("offsets sent to the broker %v, want only the current copy's 5", sent)
	}
}

// committingConsumer is testConsumer (group "g", a rebalance timeout of 3 s:
// short enough that a wait for a newer generation fails a test quickly,
// long enough for the sync backoffs) owning tps, on a kfake cluster whose
// every OffsetCommit is answered, per partition, with the code answer gives
// it.
func committingConsumer(t *testing.T, answer func(*kmsg.OffsetCommitRequest) int16, tps ...TopicPartition) *Consumer {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	kc.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kreq.(*kmsg.OffsetCommitRequest)
		code := answer(req)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := testConsumer(cl, nopHandler{}, tps...)
	c.log = zaptest.NewLogger(t)
	c.cfg.Group, c.cfg.RebalanceTimeout = "g", 3*time.Second
	return c
}

// switchableMember is a memberSource a test changes.
type switchableMember struct {
	mu  sync.Mutex
	id  string
	gen int32
}

func (s *switchableMember) GroupMetadata() (string, int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.gen
}

func (s *switchableMember) set(id string, gen int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.gen = id, gen
}

// A plain commit answered ILLEGAL_GENERATION waits for a newer generation;
// when the membership is lost meanwhile (kgo drops the member id at a
// JoinGroup answered UNKNOWN_MEMBER_ID) the partition is lost, not the
// worker fenced: the error matches ErrNotOwned. The wait read the raw
// tracker, dropped its error, and the rejection became a *FencedError
// that made Run fail (found by a review).
func TestAPlainCommitWhoseMembershipIsLostDuringTheGenerationWaitIsNotAFence(t *testing.T) {
	tp := TopicPartition{"in", 0}
	src := &switchableMember{id: "m1", gen: 3}
	c := committingConsumer(t, func(*kmsg.OffsetCommitRequest) int16 {
		src.set("", 3) // the rejoin kgo starts drops the member id
		return kerr.IllegalGeneration.Code
	}, tp)
	c.meta = NewGroupMetadataTracker(src, "")
	c.meta.Refresh()
	c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
	err := c.CommitOffset(context.Background(), tp, 5)
	var fe *snapshotstore.FencedError
	if !errors.Is(err, snapshotstore.ErrNotOwned) || errors.As(err, &fe) {
		t.Fatalf("CommitOffset = %v, want an error matching ErrNotOwned and no *FencedError (a lost partition, not a fence of the worker)", err)
	}
}
