package snapshotstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/panicerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// panickingPartitioner panics when asked for a partition (an application
// bug in WithOutputPartitioner).
type panickingPartitioner struct{}

func (panickingPartitioner) ForTopic(string) kgo.TopicPartitioner { return panickingPartitioner{} }
func (panickingPartitioner) RequiresConsistency(*kgo.Record) bool { return true }
func (panickingPartitioner) Partition(*kgo.Record, int) int       { panic("partitioner bug") }

// panickingForTopic panics when kgo asks it for a topic's partitioner.
type panickingForTopic struct{}

func (panickingForTopic) ForTopic(string) kgo.TopicPartitioner { panic("ForTopic bug") }

// A panic of the application's output partitioner fails the transaction
// with an error matching ErrPanicked (the partition fails, and its
// failure says so). kgo calls the partitioner on its own goroutine for the
// first record to a topic (on the metadata update's): that panic ended the
// process (found by a review).
func TestAPanickingOutputPartitionerFailsTheCommit(t *testing.T) {
	f := newTxnFixture(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.adm.CreateTopic(ctx, 3, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	for _, part := range []kgo.Partitioner{panickingPartitioner{}, panickingForTopic{}} {
		_, p := f.openConfig(t, f.meta, KafkaConfig{OutputPartitioner: part})
		err := p.Commit(ctx, Batch{Writes: []Snapshot{{Key: "k", Value: []byte("1"), Offset: 0}},
			Outputs: []*kgo.Record{{Topic: "out", Key: []byte("k"), Value: []byte("o")}}, Offset: 1, OffsetAdvanced: true})
		if !errors.Is(err, panicerr.ErrPanicked) {
			t.Fatalf("%T: Commit: %v, want the partitioner's panic (ErrPanicked)", part, err)
		}
	}
}
