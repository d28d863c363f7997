package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// A clean stop reports the partitions still failing: one waiting to start
// again, one started again less than healthyAfter ago. One that failed once
// and has run healthyAfter since is not reported: it did, and Run returned
// a stale *PartitionError at a clean shutdown hours later.
func TestStillFailingForgetsAHealedPartition(t *testing.T) {
	now := time.Now()
	waiting, recent, healed := TopicPartition{"in", 0}, TopicPartition{"in", 1}, TopicPartition{"in", 2}
	errWaiting, errRecent, errHealed := errors.New("waiting"), errors.New("recent"), errors.New("healed")
	c := &Consumer{
		failed: map[TopicPartition]*Failure{waiting: {Err: errWaiting, RetryAt: now.Add(time.Second)}},
		streak: map[TopicPartition]*Failure{
			waiting: {Err: errWaiting, RetryAt: now.Add(time.Second)},
			recent:  {Err: errRecent, RetryAt: now.Add(-time.Minute)},
			healed:  {Err: errHealed, RetryAt: now.Add(-healthyAfter - time.Second)},
		},
	}
	got := errors.Join(c.stillFailing(now)...)
	if !errors.Is(got, errWaiting) || !errors.Is(got, errRecent) || errors.Is(got, errHealed) {
		t.Fatalf("still failing: %v; want the waiting and the recent partition's errors, not the healed one's", got)
	}
}

// nopHandler is a Handler whose partitions stop at once.
type nopHandler struct{}

func (nopHandler) Open(context.Context, []TopicPartition) error { return nil }
func (nopHandler) Start(context.Context, map[TopicPartition]snapshotstore.Assignment) error {
	return nil
}
func (nopHandler) Stop(context.Context, []TopicPartition, bool) {}
func (nopHandler) Deliver(TopicPartition, []*kgo.Record, bool)  {}

// A revoke (stop) racing a partition's failure must not leave the partition
// paused in kgo, which keeps a pause across assignments: a later assignment
// of it here would never fetch. The failure used to pause after releasing
// the lock, so a stop in between resumed first and the pause stayed.
func TestStopRacingAFailureLeavesNothingPaused(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tp := TopicPartition{"in", 0}
	c := &Consumer{cl: cl, h: nopHandler{}, log: zap.NewNop(), own: NewOwnership(), fc: NewFlowControl(10, 0),
		cfg:   Config{RetryBackoff: time.Second, MaxRetryBackoff: time.Minute, TeardownTimeout: time.Second},
		owned: map[TopicPartition]bool{tp: true}, failed: map[TopicPartition]*Failure{}, streak: map[TopicPartition]*Failure{},
		retry: make(chan struct{}, 1)}
	c.fc.Track(tp)
	testHookFailedRecorded = func(TopicPartition) { c.stop(context.Background(), []TopicPartition{tp}, false) }
	defer func() { testHookFailedRecorded = nil }()
	c.PartitionFailed(tp, errors.New("poison"))
	if paused := cl.PauseFetchPartitions(nil); len(paused) != 0 {
		t.Fatalf("paused %v after the partition was stopped: a later assignment of it would never fetch", paused)
	}
	if c.owned[tp] || c.failed[tp] != nil {
		t.Fatalf("owned %v, failed %v after the stop", c.owned[tp], c.failed[tp])
	}
}
