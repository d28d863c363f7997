package testkit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/topicread"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadTopic returns every record of every partition of topic up to its
// high watermark at the call, read_committed (aborted records invisible)
// or read_uncommitted, in partition order. Control records (commit and
// abort markers) are read to track the position — a transactional topic's
// last offset is usually a marker no consumer sees — and left out.
func ReadTopic(t testing.TB, brokers []string, topic string, readCommitted bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	byPart := map[int32][]*kgo.Record{}
	if err := topicread.Scan(ctx, brokers, topic, iso, func(r *kgo.Record) {
		if !r.Attrs.IsControl() {
			byPart[r.Partition] = append(byPart[r.Partition], r)
		}
	}); err != nil {
		t.Fatal(err)
	}
	ps := make([]int32, 0, len(byPart))
	for p := range byPart {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	var out []*kgo.Record
	for _, p := range ps {
		out = append(out, byPart[p]...)
	}
	return out
}
