package testkit

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// LogPartitionRecords logs every record of the given partitions of topic
// up to its high watermark, read_uncommitted with the transaction markers:
// offset, key, producer id and epoch, and whether it is transactional, a
// commit or an abort marker — one read of the topic for all of them. A test
// calls it on a state mismatch, so that a lost or aborted snapshot shows
// where it went (which transaction wrote it, which marker ended it). max
// bounds the lines per partition (the rest counted).
func LogPartitionRecords(t testing.TB, brokers []string, topic string, max int, partitions ...int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines := map[int32][]string{}
	n := map[int32]int{}
	for _, p := range partitions {
		lines[p] = nil
	}
	err := topicread.Scan(ctx, brokers, topic, kgo.ReadUncommitted(), func(r *kgo.Record) {
		if _, ok := lines[r.Partition]; !ok {
			return
		}
		n[r.Partition]++
		if len(lines[r.Partition]) < max {
			lines[r.Partition] = append(lines[r.Partition], describeRecord(r))
		}
	})
	if err != nil {
		t.Logf("log of %s: %v", topic, err)
	}
	for _, p := range partitions {
		t.Logf("log of %s[%d], read_uncommitted (%d records, markers included; offset key producer/epoch kind):\n%s",
			topic, p, n[p], strings.Join(lines[p], "\n"))
		if n[p] > len(lines[p]) {
			t.Logf("... %d more records of %s[%d]", n[p]-len(lines[p]), topic, p)
		}
	}
}

func describeRecord(r *kgo.Record) string {
	kind := "plain"
	switch {
	case r.Attrs.IsControl():
		kind = "ABORT marker"
		// A control record's key is version (int16) then type (int16):
		// 0 abort, 1 commit.
		if len(r.Key) >= 4 && r.Key[3] == 1 {
			kind = "COMMIT marker"
		}
	case r.Attrs.IsTransactional():
		kind = "txn"
	}
	key := string(r.Key)
	if r.Attrs.IsControl() {
		key = "-"
	}
	return fmt.Sprintf("  %d %q %d/%d %s", r.Offset, key, r.ProducerID, r.ProducerEpoch, kind)
}
