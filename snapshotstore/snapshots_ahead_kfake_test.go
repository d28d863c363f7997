package snapshotstore

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The input's log end read at the assignment can predate a marker written
// since (a plain-mode zombie still committing): the recovery reads it again
// before refusing, and starts when the marker is within it. A marker still
// past the fresh log end is refused (ErrSnapshotsAhead). Found by the
// review of the check.
func TestSnapshotsAheadReadsTheInputsLogEndAgain(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := context.Background()
	recs := make([]*kgo.Record, 100)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Value: []byte("v")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, EncodeRecord("snaps", 0, Snapshot{Key: "a", Value: []byte("1"), Offset: 79}), markerRecord("snaps", 0, 80)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k, err := NewKafka(brokers, "snaps", KafkaConfig{Mode: Plain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	recover := func(listedEnd int64) error {
		p, err := k.Open(ctx, PartitionInfo{Topic: "in", Partition: 0, Group: "g",
			Assigned: func() Assignment { return Assignment{Offset: 80, Committed: true, LogEnd: listedEnd, HasLogEnd: true} }})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		return p.Recover(ctx, func(Snapshot) error { return nil })
	}
	// Listed at 50 before the marker of 80 was written; the input ends at 100 now.
	if err := recover(50); err != nil {
		t.Fatalf("a marker within the input's fresh log end: %v", err)
	}
	// A later marker past where the input ends now (100).
	if err := cl.ProduceSync(ctx, markerRecord("snaps", 0, 500)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := recover(50); !errors.Is(err, ErrSnapshotsAhead) {
		t.Fatalf("a marker past the input's fresh log end: %v, want ErrSnapshotsAhead", err)
	}
}
