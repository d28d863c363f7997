package snapshotstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/actorflow/actorflow/internal/kfakeresp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The recovery reads the input's log end itself, after the snapshots (an
// end read earlier, at the assignment, could predate a marker a plain-mode
// zombie wrote since): a marker within it starts the partition, one past it
// is refused (ErrSnapshotsAhead), naming the end read.
func TestSnapshotsAheadReadsTheInputsLogEnd(t *testing.T) {
	_, cl, recover := aheadFixture(t, 0)
	ctx := context.Background()
	// The marker of 80 within the input's 100 records.
	if err := recover(); err != nil {
		t.Fatalf("a marker within the input's fresh log end: %v", err)
	}
	// A later marker past where the input ends now (100).
	if err := cl.ProduceSync(ctx, markerRecord("snaps", 0, 500, markerMeta{})).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := recover(); !errors.Is(err, ErrSnapshotsAhead) || !strings.Contains(err.Error(), "log ends at 100") {
		t.Fatalf("a marker past the input's log end: %v, want ErrSnapshotsAhead naming the end 100", err)
	}
}

// A transient error of the input's log end (a lost DNS answer, a leader
// moving) is retried as the read's own requests are; it failed the
// partition.
func TestRecoveryRetriesATransientErrorOfTheInputsLogEnd(t *testing.T) {
	c, _, recover := aheadFixture(t, 0)
	var failed atomic.Int32
	c.ControlKey(kmsg.ListOffsets.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.ListOffsetsRequest)
		if req.Topics[0].Topic != "in" {
			return nil, nil, false // the snapshot partition's: kept
		}
		failed.Add(1)
		// Retriable, and kgo hands it back. Handled: dropped, the next
		// one is answered.
		return kfakeresp.ListOffsetsError(req, kerr.KafkaStorageError.Code), nil, true
	})
	if err := recover(); err != nil || failed.Load() != 1 {
		t.Fatalf("recovery = %v after %d failed reads of the input's log end, want nil after 1", err, failed.Load())
	}
}

// aheadFixture is a cluster with 100 input records and a snapshot
// partition holding a key and the marker of offset 80 (recording
// inputPartitions, 0: none), and a recovery of its partition 0 from 80.
func aheadFixture(t *testing.T, inputPartitions int32) (*kfake.Cluster, *kgo.Client, func() error) {
	t.Helper()
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
	if err := cl.ProduceSync(ctx, EncodeRecord("snaps", 0, Snapshot{Key: "a", Value: []byte("1"), Offset: 79}), markerRecord("snaps", 0, 80, markerMeta{inputPartitions: inputPartitions})).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k, err := NewKafka(brokers, "snaps", KafkaConfig{Mode: Plain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	recover := func() error {
		p, err := k.Open(ctx, PartitionInfo{Topic: "in", Partition: 0, Group: "g",
			Assigned: func() Assignment { return Assignment{Offset: 80, Committed: true} }})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		return p.Recover(ctx, func(Snapshot) error { return nil })
	}
	return c, cl, recover
}
