// Package topicread reads a topic to the end offsets it has when the read
// begins: the verifier's, the benchmark's and the tests' one way to read
// "everything written so far", read_committed or not.
package topicread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Scan lists topic's end offsets (high watermarks), reads every partition
// from its start up to them at isolation iso, and calls fn with each
// record below its partition's end, control records (transaction markers)
// included, in offset order per partition (not across partitions). opts
// are added to its clients.
//
// A partition is done at the first record at or past end−1, a marker
// included: a transactional topic's last offset is usually a marker no
// consumer sees, and a transaction open at the end that then aborts
// leaves its records below the end unread under read_committed and its
// marker past it. Under read_committed the read waits for transactions
// open below the end to finish: bound ctx. It fails on a fetch error or
// when ctx ends first.
func Scan(ctx context.Context, brokers []string, topic string, iso kgo.IsolationLevel, fn func(*kgo.Record), opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	// A partition whose log start is at its end (retention or
	// DeleteRecords removed everything) has nothing to read: no record
	// would ever finish it.
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	parts := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); o.Offset > 0 && (!ok || s.Offset < o.Offset) {
			parts[o.Partition] = kgo.NewOffset().AtStart()
			remaining[o.Partition] = o.Offset
		}
	})
	if len(parts) == 0 {
		return nil
	}
	rd, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords()}, opts...)...)
	if err != nil {
		return err
	}
	defer rd.Close()
	for len(remaining) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s: %w (partitions not at their end: %v)", topic, err, remaining)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("reading %s[%d]: %w", topic, p, err) })
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok {
				return
			}
			if r.Offset < end {
				fn(r)
			}
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	return nil
}
