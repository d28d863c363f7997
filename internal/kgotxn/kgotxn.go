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
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Published waits until cl's producer map shows topic's partition with a
// leader (or a non-retriable load error, which EndTransaction will meet
// too) and reports true; false if deadline or ctx came first. A partition
// without a leader (a failover) reads as not yet published too, hence the
// deadline. A retriable load error (UNKNOWN_TOPIC_OR_PARTITION,
// LEADER_NOT_AVAILABLE right after a topic's creation) is not an answer:
// kgo keeps it in the data it publishes until the load that succeeds, whose
// Store is the one the window is about.
func Published(ctx context.Context, cl *kgo.Client, topic string, partition int32, deadline time.Time) bool {
	for {
		leader, _, err := cl.PartitionLeader(topic, partition)
		if leader >= 0 || (err != nil && !kerr.IsRetriable(err)) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// ErrNotPublished: a partition of the transaction was not in kgo's producer
// map by the bound; kgo may have turned the commit into an abort.
var ErrNotPublished = errors.New("kgotxn: a partition written was not published to kgo's producer by the bound; the commit may have been dropped")

// EndTransaction is cl.EndTransaction(ctx, end) after Published for every
// partition of produced (records ProduceSync returned: their Partition is
// set), all within bound. The transaction is ended either way; a partition
// still unpublished at the bound makes a commit's answer wrap
// ErrNotPublished.
func EndTransaction(ctx context.Context, cl *kgo.Client, end kgo.TransactionEndTry, bound time.Duration, produced ...*kgo.Record) error {
	deadline := time.Now().Add(bound)
	var late error
	for _, r := range produced {
		if !Published(ctx, cl, r.Topic, r.Partition, deadline) {
			late = fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, ErrNotPublished)
			break
		}
	}
	err := cl.EndTransaction(ctx, end)
	if late != nil && end == kgo.TryCommit {
		return errors.Join(err, late)
	}
	return err
}
