package coordinator

import (
	"errors"
	"testing"
	"time"
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
