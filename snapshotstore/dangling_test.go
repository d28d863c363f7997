package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestDecideDangling(t *testing.T) {
	last := LastTxn{ProducerID: 4, DataEpoch: 13, EpochAfter: 14}
	open := &OpenTxn{ProducerID: 4, Epoch: 13, StartOffset: 273}
	done := CoordinatorView{Known: true, TxnID: "ledger-ledger-1", ProducerID: 4, Epoch: 14, State: "CompleteCommit"}
	with := func(f func(*CoordinatorView)) CoordinatorView { c := done; f(&c); return c }
	cases := []struct {
		name      string
		lastOff   int64
		open      *OpenTxn
		co        CoordinatorView
		stillOpen bool
		want      DanglingAction
		commit    bool
	}{
		{"closed there", 300, nil, done, false, DanglingNone, false},
		{"another producer's transaction", 300, &OpenTxn{ProducerID: 9, Epoch: 1}, done, true, DanglingNone, false},
		// The bug: the coordinator completed the commit, the partition holds it open.
		{"completed without its marker", 300, open, done, true, DanglingRepair, true},
		{"marker landed while the coordinator was read", 300, open, done, false, DanglingNone, false},
		{"markers in flight", 300, open, with(func(c *CoordinatorView) { c.State = "PrepareCommit" }), true, DanglingWait, false},
		{"coordinator unreadable", 300, open, CoordinatorView{DescribeError: errors.New("boom")}, true, DanglingWait, false},
		// Someone re-initialised the id: its transaction may be writing into this one.
		{"another writer's epoch", 300, open, with(func(c *CoordinatorView) { c.Epoch = 16 }), true, DanglingLeave, false},
		{"id moved to another producer id", 300, open, with(func(c *CoordinatorView) { c.ProducerID = 7 }), true, DanglingLeave, false},
		// This producer's next transaction runs (its epoch): the check runs before each of its writes.
		{"the next transaction runs", 300, open, with(func(c *CoordinatorView) { c.State = "Ongoing" }), true, DanglingRepair, true},
		{"the next transaction already wrote there", 300, &OpenTxn{ProducerID: 4, Epoch: 14}, with(func(c *CoordinatorView) { c.State = "Ongoing" }), true, DanglingNone, false},
		{"a dead id", 300, open, with(func(c *CoordinatorView) { c.State = "Dead" }), true, DanglingLeave, false},
		// The running transaction's own records, after the previous one's.
		{"the running transaction's records", 250, open, with(func(c *CoordinatorView) { c.State = "Ongoing" }), true, DanglingNone, false},
		// The offsets partition (offset unknown) under transaction version 2: the epoch tells.
		{"offsets partition, version 2", -1, open, done, true, DanglingRepair, true},
		{"an older transaction is open", 300, &OpenTxn{ProducerID: 4, Epoch: 11}, done, true, DanglingLeave, false},
		{"coordinator aborted what this producer committed", 300, open, with(func(c *CoordinatorView) { c.State = "CompleteAbort" }), true, DanglingLeave, false},
	}
	// Transaction version 1 keeps the epoch: the running transaction's own
	// records look the same, so no marker.
	v1 := LastTxn{ProducerID: 4, DataEpoch: 13, EpochAfter: 13}
	v1co := with(func(c *CoordinatorView) { c.Epoch = 13; c.State = "Ongoing" })
	if v := DecideDangling(v1, -1, open, v1co, true); v.Action != DanglingNone {
		t.Errorf("version 1, offset unknown: got %v (%s), want none", v.Action, v.Reason)
	}
	if v := DecideDangling(v1, 300, open, v1co, true); v.Action != DanglingNone {
		t.Errorf("version 1, open before the previous transaction's last record: got %v (%s), want none (a re-sent write of the running transaction may have joined it)", v.Action, v.Reason)
	}
	for _, c := range cases {
		v := DecideDangling(last, c.lastOff, c.open, c.co, c.stillOpen)
		if v.Action != c.want || v.Commit != c.commit {
			t.Errorf("%s: got %v (commit %v, %q), want %v (commit %v)", c.name, v.Action, v.Commit, v.Reason, c.want, c.commit)
		}
	}
}

// recordingOps is danglingOps scripted per call: opens[i] answers the i-th
// open call, views[j] the j-th coordinator call; it records the markers.
type recordingOps struct {
	opens   []map[topicPartition]OpenTxn
	views   []CoordinatorView
	asked   [][]topicPartition
	markers []string
	fail    int // the first fail open calls fail
}

func (r *recordingOps) open(_ context.Context, _ int64, parts []topicPartition) (map[topicPartition]OpenTxn, error) {
	r.asked = append(r.asked, parts)
	if r.fail > 0 {
		r.fail--
		r.opens = r.opens[1:]
		return nil, errors.New("NOT_LEADER_OR_FOLLOWER")
	}
	if len(r.opens) == 0 {
		return nil, errors.New("unscripted open call")
	}
	o := r.opens[0]
	r.opens = r.opens[1:]
	return o, nil
}

func (r *recordingOps) coordinator(context.Context, int64) CoordinatorView {
	v := r.views[0]
	if len(r.views) > 1 {
		r.views = r.views[1:]
	}
	return v
}

func (r *recordingOps) writeMarker(_ context.Context, o OpenTxn, commit bool, parts []topicPartition) error {
	for _, tp := range parts {
		r.markers = append(r.markers, fmt.Sprintf("%s[%d] pid %d epoch %d commit %v", tp.Topic, tp.Partition, o.ProducerID, o.Epoch, commit))
	}
	return nil
}

// The check writes the missing marker only where the coordinator completed
// the previous transaction and the partition still holds it open; it waits
// while the markers are being written, and writes nothing then.
func TestCheckDanglingWritesOnlyTheMissingMarker(t *testing.T) {
	last := LastTxn{ProducerID: 4, DataEpoch: 13, EpochAfter: 14}
	snaps := topicPartition{Topic: "ledger-snapshots", Partition: 1}
	outs := topicPartition{Topic: "ledger-outputs", Partition: 1}
	offs := topicPartition{Topic: offsetsTopic, Partition: 39}
	parts := map[topicPartition]int64{snaps: 300, outs: 200, offs: -1}
	openSnaps := map[topicPartition]OpenTxn{snaps: {ProducerID: 4, Epoch: 13, StartOffset: 273}}
	done := CoordinatorView{Known: true, TxnID: "ledger-ledger-1", ProducerID: 4, Epoch: 14, State: "CompleteCommit"}

	t.Run("nothing open", func(t *testing.T) {
		ops := &recordingOps{opens: []map[topicPartition]OpenTxn{{}}}
		n, err := checkDangling(context.Background(), ops, zap.NewNop(), last, parts)
		if err != nil || n != 0 || len(ops.markers) != 0 || len(ops.asked) != 1 || len(ops.asked[0]) != 3 {
			t.Fatalf("n %d err %v markers %v asked %v: want one read of the 3 partitions, nothing written", n, err, ops.markers, ops.asked)
		}
	})

	t.Run("completed without its marker on the snapshot partition", func(t *testing.T) {
		core, logs := observer.New(zap.WarnLevel)
		ops := &recordingOps{opens: []map[topicPartition]OpenTxn{openSnaps, openSnaps}, views: []CoordinatorView{done}}
		n, err := checkDangling(context.Background(), ops, zap.New(core), last, parts)
		want := "ledger-snapshots[1] pid 4 epoch 13 commit true"
		if err != nil || n != 1 || len(ops.markers) != 1 || ops.markers[0] != want {
			t.Fatalf("n %d err %v markers %v: want the one marker %q", n, err, ops.markers, want)
		}
		if logs.FilterMessageSnippet("without its marker").Len() != 1 {
			t.Errorf("want one warning naming the repair, got %v", logs.All())
		}
	})

	t.Run("markers in flight, then landed", func(t *testing.T) {
		ops := &recordingOps{
			opens: []map[topicPartition]OpenTxn{openSnaps, openSnaps, {}},
			views: []CoordinatorView{{Known: true, ProducerID: 4, Epoch: 14, State: "PrepareCommit"}},
		}
		n, err := checkDangling(context.Background(), ops, zap.NewNop(), last, parts)
		if err != nil || n != 0 || len(ops.markers) != 0 || len(ops.asked) != 3 {
			t.Fatalf("n %d err %v markers %v asked %d times: want a wait and a re-read, nothing written", n, err, ops.markers, len(ops.asked))
		}
	})

	t.Run("another writer re-initialised the id", func(t *testing.T) {
		core, logs := observer.New(zap.ErrorLevel)
		moved := done
		moved.Epoch = 20
		ops := &recordingOps{opens: []map[topicPartition]OpenTxn{openSnaps, openSnaps}, views: []CoordinatorView{moved}}
		n, err := checkDangling(context.Background(), ops, zap.New(core), last, parts)
		if err != nil || n != 0 || len(ops.markers) != 0 || logs.Len() != 1 {
			t.Fatalf("n %d err %v markers %v logs %d: want nothing written and one error logged", n, err, ops.markers, logs.Len())
		}
	})

	t.Run("an unreadable cluster is read again", func(t *testing.T) {
		ops := &recordingOps{
			opens: []map[topicPartition]OpenTxn{nil, openSnaps, openSnaps},
			views: []CoordinatorView{done},
		}
		ops.fail = 1
		n, err := checkDangling(context.Background(), ops, zap.NewNop(), last, parts)
		if err != nil || n != 1 || len(ops.asked) != 3 {
			t.Fatalf("n %d err %v asked %d times: want a failed read, a re-read and the repair", n, err, len(ops.asked))
		}
	})

	t.Run("wait ends with the context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ops := &recordingOps{opens: []map[topicPartition]OpenTxn{openSnaps, openSnaps}, views: []CoordinatorView{{Known: true, ProducerID: 4, Epoch: 14, State: "PrepareCommit"}}}
		if _, err := checkDangling(ctx, ops, zap.NewNop(), last, parts); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v: want context.Canceled", err)
		}
	})
}

// writtenPartitions keeps each written partition's last offset, partitions
// told apart by topic and number, however the records interleave.
func TestWrittenPartitionsKeepsEachPartitionsLastOffset(t *testing.T) {
	rec := func(topic string, p int32, off int64) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Offset: off}
	}
	got := writtenPartitions([]*kgo.Record{
		rec("snaps", 3, 10), rec("snaps", 3, 11), rec("out", 3, 5), rec("out", 1, 7),
		rec("out", 3, 9), rec("snaps", 3, 12), rec("out", 1, 6), rec("out", 0, 2),
	})
	want := map[topicPartition]int64{
		{Topic: "snaps", Partition: 3}: 12,
		{Topic: "out", Partition: 3}:   9,
		{Topic: "out", Partition: 1}:   7,
		{Topic: "out", Partition: 0}:   2,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("written %v, want %v", got, want)
	}
	if got := writtenPartitions(nil); len(got) != 0 {
		t.Fatalf("no records wrote %v", got)
	}
}
