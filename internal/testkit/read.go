package testkit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	ends, err := kadm.NewClient(Client(t, brokers)).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	parts := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			parts[o.Partition] = kgo.NewOffset().AtStart()
			remaining[o.Partition] = o.Offset
		}
	})
	if len(parts) == 0 {
		return nil
	}
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	cl := Client(t, brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())
	byPart := map[int32][]*kgo.Record{}
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (left: %v)", topic, ctx.Err(), remaining)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("reading %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
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
