// Package kgotxn ends kgo transactions so that kgo v1.22.3 cannot drop
// their commit.
//
// A client's first produce to a topic parks the record until kgo has loaded
// the topic's partitions, then buffers it into a partition of the new
// metadata before kgo publishes that metadata to its producer map
// (topics_and_partitions.go storePartitionsUpdate: the Store is deferred
// past the buffering). Under CPU load the record can be produced and
// acknowledged first; EndTransaction(TryCommit) then walks the old, empty
// map, finds no partition added to the transaction, turns the commit into
// an abort and returns nil. scripts/kgo-drop-proof.sh shows it with a kgo
// that sleeps in that window. Waiting until every partition written is in
// the published map closes the window: after a client's first transaction
// per topic it is one map read each.
package kgotxn

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Published waits until cl's producer map shows topic's partition with a
// leader (or an error) and reports true; false if deadline or ctx came
// first. A partition without a leader (a failover) reads as not yet
// published too, hence the deadline.
func Published(ctx context.Context, cl *kgo.Client, topic string, partition int32, deadline time.Time) bool {
	for {
		leader, _, err := cl.PartitionLeader(topic, partition)
		if err != nil || leader >= 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// EndTransaction is cl.EndTransaction(ctx, end) after Published for every
// partition of produced (records ProduceSync returned: their Partition is
// set), each waited for at most bound.
func EndTransaction(ctx context.Context, cl *kgo.Client, end kgo.TransactionEndTry, bound time.Duration, produced ...*kgo.Record) error {
	deadline := time.Now().Add(bound)
	for _, r := range produced {
		Published(ctx, cl, r.Topic, r.Partition, deadline)
	}
	return cl.EndTransaction(ctx, end)
}
