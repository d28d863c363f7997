package partitionflow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A key loaded with an overdue timer fires it after the records that
// loaded it, also when those records are held (the outputs' budget used
// up while the load hook's write is in flight): it fired the timer first,
// then the held records (found by a review: [1 -1 5] against [1 5 -1]).
func TestOverdueTimersFireAfterHeldRecords(t *testing.T) {
	for _, budget := range []int{-1, 1} {
		t.Run(fmt.Sprint("budget ", budget), func(t *testing.T) {
			mem := snapshotstore.NewMemory()
			mem.TransactionalOutputs = true
			p, _ := mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: topic})
			past := time.Now().Add(-time.Hour)
			_ = p.Commit(context.Background(), snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "a", Value: []byte(`{"Offsets":[1]}`), Offset: 1,
				Timers: []snapshotstore.Timer{{Name: "t", At: past}}}}, Offset: 2})
			gate := make(chan struct{})
			var once sync.Once
			mem.BeforeCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
				if len(b.Outputs) > 0 {
					once.Do(func() { <-gate }) // the load hook's write, in flight
				}
				return nil
			}
			flow := keyflow.New(traceFold,
				keyflow.WithOutput(nil, "out"),
				keyflow.WithOnLoad(func(kc *keyflow.Context, s *trace) (*trace, error) {
					return s, kc.Emit(&kgo.Record{Topic: "out", Value: []byte("loaded")})
				}),
				keyflow.WithTimers(func(_ *keyflow.Context, s *trace, _ string) (*trace, error) {
					s.Offsets = append(s.Offsets, -1)
					return s, nil
				}))
			// The record reaches the partition while it recovers (kept
			// until it runs): else the overdue timer's own load could come
			// first, and [1 -1 5] would be right.
			recovered := make(chan struct{})
			h := newHarnessWith(t, mem, flow, 2, func(c *partitionflow.Config) {
				c.MaxPendingOutputBytes = budget
				c.Store = gatedRecovery{Partition: c.Store, gate: recovered}
			})
			h.send(rec(5, "a", ""))
			close(recovered)
			query(t, h, "a") // the delivery was folded or held
			close(gate)
			h.awaitCommitted(6)
			testkit.Eventually(t, 10*time.Second, "a's record and its overdue timer", func() (bool, string) {
				tr, _ := latest(t, mem, "a")
				return len(tr.Offsets) == 3, fmt.Sprint(tr.Offsets)
			})
			if tr, _ := latest(t, mem, "a"); fmt.Sprint(tr.Offsets) != "[1 5 -1]" {
				t.Fatalf("a folded %v, want [1 5 -1]: the overdue timer after the record that loaded the key", tr.Offsets)
			}
		})
	}
}

// gatedRecovery is a partition whose recovery waits for gate.
type gatedRecovery struct {
	snapshotstore.Partition
	gate chan struct{}
}

func (g gatedRecovery) Recover(ctx context.Context, fn func(snapshotstore.Snapshot) error) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Partition.Recover(ctx, fn)
}
