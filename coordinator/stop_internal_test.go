package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// A partition that leaves forgets its high watermark: when it came back,
// Status (lag, actorflow_lag) showed the earlier assignment's until its
// first fetch. Found by a review.
func TestStopForgetsTheHighWatermark(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tp := TopicPartition{"in", 0}
	c := &Consumer{cl: cl, h: nopHandler{}, log: zap.NewNop(), own: NewOwnership(), fc: NewFlowControl(10, 0),
		cfg:   Config{TeardownTimeout: time.Second},
		owned: map[TopicPartition]bool{tp: true}, failed: map[TopicPartition]*Failure{}, streak: map[TopicPartition]*Failure{},
		hwm: map[TopicPartition]int64{tp: 42}}
	c.fc.Track(tp)
	c.stop(context.Background(), []TopicPartition{tp}, true)
	if h, ok := c.HighWatermark(tp); ok {
		t.Fatalf("high watermark %d after the partition left", h)
	}
}
