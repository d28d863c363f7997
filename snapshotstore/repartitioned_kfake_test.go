package snapshotstore

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Through the Kafka store, in both modes: a partition's markers record the
// input's partition count read at its recovery; after partitions are added
// to the input (and to the snapshot topic, which must have as many), the
// next recovery refuses to start (ErrInputRepartitioned) — each key that
// hashes elsewhere now would restart from nothing while its state sits in
// the old partition. Before, it started silently.
func TestARepartitionedInputIsRefusedAtRecovery(t *testing.T) {
	for _, mode := range []Mode{Plain, Transactional} {
		t.Run(mode.String(), func(t *testing.T) {
			f := newTxnFixture(t, true) // a live member: the transactional commit's generation is checked
			cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			ctx := context.Background()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: f.input, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			k, err := NewKafka(f.brokers, f.snaps, KafkaConfig{Mode: mode, TransactionalIDPrefix: "t"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(k.Close)
			committed := int64(-1)
			cycle := func(commit bool) error {
				p, err := k.Open(ctx, PartitionInfo{Topic: f.input, Partition: 0, Group: f.group,
					GroupMetadata:  f.meta,
					ConsumerCommit: func(context.Context, int64) error { return nil },
					Assigned: func() Assignment {
						if committed < 0 {
							return Assignment{Offset: 0, LogStart: 0}
						}
						return Assignment{Offset: committed, Committed: true}
					}})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close(ctx)
				if err := p.Recover(ctx, func(Snapshot) error { return nil }); err != nil {
					return err
				}
				if commit {
					b := Batch{Writes: []Snapshot{{Key: "a", Value: []byte("1"), Offset: 0}}, Offset: 1, OffsetAdvanced: true}
					if err := p.Commit(ctx, b); err != nil {
						t.Fatalf("commit: %v", err)
					}
					committed = 1
				}
				return nil
			}
			if err := cycle(true); err != nil {
				t.Fatalf("the first recovery: %v", err)
			}
			if err := cycle(false); err != nil {
				t.Fatalf("a recovery under the same count: %v", err)
			}
			if _, err := f.adm.CreatePartitions(ctx, 2, f.input, f.snaps); err != nil {
				t.Fatal(err)
			}
			var re *InputRepartitionedError
			if err := cycle(false); !errors.Is(err, ErrInputRepartitioned) || !errors.As(err, &re) || re.Recorded != 1 || re.Now != 3 {
				t.Fatalf("a recovery after the input went from 1 to 3 partitions: %v, want ErrInputRepartitioned (1 recorded, 3 now)", err)
			}
		})
	}
}
