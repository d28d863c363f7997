package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// offlineClient is a kgo client with no broker behind it: enough for the
// pauses and resumes a Consumer makes on it.
func offlineClient(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testConsumer is a Consumer on cl owning tps, with what New makes (maps,
// channels, a member "m1" at generation 3), handler h and the test's short
// backoffs and teardown bound.
func testConsumer(cl *kgo.Client, h Handler, tps ...TopicPartition) *Consumer {
	c := &Consumer{cl: cl, h: h, log: zap.NewNop(), own: NewOwnership(), fc: NewFlowControl(10, 0),
		meta:  NewGroupMetadataTracker(fixedMember{}, ""),
		cfg:   Config{RetryBackoff: time.Second, MaxRetryBackoff: time.Minute, TeardownTimeout: time.Second, SessionTimeout: 20 * time.Second},
		fence: newPollFence(), owned: map[TopicPartition]bool{}, failed: map[TopicPartition]*Failure{}, streak: map[TopicPartition]*Failure{},
		hwm: map[TopicPartition]int64{}, hwmAt: map[TopicPartition]time.Time{}, retry: make(chan struct{}, 1), kick: make(chan struct{}, 1), done: make(chan struct{}),
		// The coordinator lists the member (a refusal it never confirmed).
		probeMember: func(context.Context, snapshotstore.GroupMetadata) (bool, error) { return true, nil }}
	for _, tp := range tps {
		c.owned[tp] = true
		c.fc.Track(tp)
	}
	return c
}

// fixedMember is a memberSource that never changes.
type fixedMember struct{}

func (fixedMember) GroupMetadata() (string, int32) { return "m1", 3 }

// restart is restartWith without a pass's memo.
func (c *Consumer) restart(ctx context.Context, tp TopicPartition) { c.restartWith(ctx, tp, nil) }
