package coordinator

import (
	"context"
	"testing"
)

// A partition that leaves forgets its high watermark: when it came back,
// Status (lag, actorflow_lag) showed the earlier assignment's until its
// first fetch. Found by a review.
func TestStopForgetsTheHighWatermark(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	c := testConsumer(cl, nopHandler{}, tp)
	c.hwm[tp] = 42
	c.stop(context.Background(), []TopicPartition{tp}, true)
	if h, ok := c.HighWatermark(tp); ok {
		t.Fatalf("high watermark %d after the partition left", h)
	}
}
