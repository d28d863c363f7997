package snapshotstore

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The plain mode's snapshot producer keeps its partitioner and topic
// whatever ClientOpts say: a partitioner given there sent input partition
// N's snapshots to other partitions, where N's recovery never reads (found
// by a review).
func TestClientOptsCannotMoveThePlainSnapshots(t *testing.T) {
	k, err := NewKafka([]string{"127.0.0.1:1"}, "snaps", KafkaConfig{Mode: Plain,
		ClientOpts: []kgo.Opt{kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.DefaultProduceTopic("other")}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	want := fmt.Sprintf("%T", kgo.ManualPartitioner())
	if got := fmt.Sprintf("%T", k.producer.client().OptValue(kgo.RecordPartitioner)); got != want {
		t.Errorf("partitioner %s, want %s", got, want)
	}
	if got := k.producer.client().OptValue(kgo.DefaultProduceTopic); got != "snaps" {
		t.Errorf("default topic %v, want snaps", got)
	}
}
