package snapshotstore

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A client's first produce to a topic parks the record until kgo has loaded
// the topic's partitions, then buffers it into a partition of the new
// metadata before kgo publishes that metadata to its producer map (kgo
// v1.22.3 topics_and_partitions.go storePartitionsUpdate: the Store is
// deferred past the buffering, on purpose). Under CPU load the record can be
// produced and acknowledged first; EndTransaction then walks the old, empty
// map, finds no partition added to the transaction, and turns the commit
// into an abort, returning nil (errCommitDropped: a fresh client's first
// transaction, seen in kfake). Waiting until every written partition is in
// the published map closes that window: after a client's first transaction
// per topic it is one map read each.

// publishedWaitBound bounds awaitPublished: a partition without a leader
// (a failover) reads -1 too, and Commit's check of kgo's log stays behind
// this wait.
const publishedWaitBound = 500 * time.Millisecond

// awaitPublished waits until cl's producer map shows each of parts with a
// leader, or an error, or until the bound or ctx ends; it reports whether
// all were seen.
func awaitPublished(ctx context.Context, cl *kgo.Client, parts map[topicPartition]int64, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for tp := range parts {
		for {
			leader, _, err := cl.PartitionLeader(tp.Topic, tp.Partition)
			if err != nil || leader >= 0 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
			time.Sleep(time.Millisecond)
		}
	}
	return true
}
