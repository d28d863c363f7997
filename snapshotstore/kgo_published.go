package snapshotstore

import (
	"context"
	"time"

	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// publishedWaitBound bounds awaitPublished: a partition without a leader
// (a failover) reads -1 too, and Commit's check of kgo's log stays behind
// this wait.
const publishedWaitBound = 500 * time.Millisecond

// awaitPublished waits until cl's producer map shows each of parts with a
// leader, or a non-retriable load error, or until the bound or ctx ends
// (internal/kgotxn.Published: kgo
// v1.22.3 turns the commit of a partition it has not published yet into an
// abort and returns nil, errCommitDropped); it reports whether all were seen.
func awaitPublished(ctx context.Context, cl *kgo.Client, parts map[topicPartition]int64, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for tp := range parts {
		if !kgotxn.Published(ctx, cl, tp.Topic, tp.Partition, deadline) {
			return false
		}
	}
	return true
}
