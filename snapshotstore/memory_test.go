package snapshotstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/actorflow/actorflow/snapshotstore"
)

func openMem(t *testing.T, m *snapshotstore.Memory, topic string, partition int32) snapshotstore.Partition {
	t.Helper()
	p, err := m.Open(context.Background(), snapshotstore.PartitionInfo{Topic: topic, Partition: partition})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMemoryCommitLatestCommitted(t *testing.T) {
	m := snapshotstore.NewMemory()
	if got := m.Committed("in", 0); got != -1 {
		t.Fatalf("Committed before any commit = %d, want -1", got)
	}
	if got := m.Latest("in", 0); len(got) != 0 {
		t.Fatalf("Latest before any commit = %v, want empty", got)
	}
	p := openMem(t, m, "in", 0)
	ctx := context.Background()
	batches := []snapshotstore.Batch{
		{Writes: []snapshotstore.Snapshot{{Key: "a", Value: []byte("a1"), Offset: 1}, {Key: "b", Value: []byte("b1"), Offset: 2}}, Offset: 3, OffsetAdvanced: true},
		{Writes: []snapshotstore.Snapshot{{Key: "a", Value: []byte("a2"), Offset: 4}, {Key: "b", Value: nil, Offset: 5}}, Offset: 3},
		{Offset: 6, OffsetAdvanced: true}, // offset only
		{Writes: []snapshotstore.Snapshot{{Key: "c", Value: []byte{}, Offset: 7}}, Offset: 6},
	}
	for i, b := range batches {
		if err := p.Commit(ctx, b); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if got := m.Committed("in", 0); got != 6 {
		t.Fatalf("Committed = %d, want 6", got)
	}
	if got := m.Commits("in", 0); got != len(batches) {
		t.Fatalf("Commits = %d, want %d", got, len(batches))
	}
	latest := m.Latest("in", 0)
	if len(latest) != 3 {
		t.Fatalf("Latest has %d keys, want 3 (tombstones included): %v", len(latest), latest)
	}
	if a := latest["a"]; string(a.Value) != "a2" || a.Offset != 4 {
		t.Errorf("a = %+v, want the later snapshot a2@4", a)
	}
	if b := latest["b"]; !b.Tombstone() || b.Offset != 5 {
		t.Errorf("b = %+v, want a tombstone at offset 5", b)
	}
	if c := latest["c"]; c.Tombstone() || c.Offset != 7 {
		t.Errorf("c = %+v, want an empty non-tombstone state at 7", c)
	}
	if got := m.Latest("in", 1); len(got) != 0 {
		t.Errorf("another partition sees %v", got)
	}
}

func TestMemoryRecoverReplaysLogOrder(t *testing.T) {
	m := snapshotstore.NewMemory()
	p := openMem(t, m, "in", 2)
	ctx := context.Background()
	for i := range 3 {
		if err := p.Commit(ctx, snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "k", Value: fmt.Appendf(nil, "v%d", i), Offset: int64(i)}}, Offset: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// A reopened partition (a new owner) recovers what was committed.
	var got []string
	err := openMem(t, m, "in", 2).Recover(ctx, func(s snapshotstore.Snapshot) error {
		got = append(got, fmt.Sprintf("%s=%s@%d src=%v", s.Key, s.Value, s.Offset, s.Source))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "[k=v0@0 src=in[2]@0 k=v1@1 src=in[2]@1 k=v2@2 src=in[2]@2]"
	if fmt.Sprint(got) != want {
		t.Fatalf("Recover replayed %v, want %s", got, want)
	}

	stop := errors.New("stop")
	n := 0
	if err := p.Recover(ctx, func(snapshotstore.Snapshot) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Recover with a failing fn = %v after %d calls, want the fn error after 1", err, n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Recover(cctx, func(snapshotstore.Snapshot) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recover with a cancelled context = %v", err)
	}
}

func TestMemoryCommitCopiesValues(t *testing.T) {
	m := snapshotstore.NewMemory()
	p := openMem(t, m, "in", 0)
	v := []byte("before")
	if err := p.Commit(context.Background(), snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "k", Value: v}}}); err != nil {
		t.Fatal(err)
	}
	copy(v, "AFTER!")
	if got := string(m.Latest("in", 0)["k"].Value); got != "before" {
		t.Fatalf("stored value %q changed with the caller's buffer", got)
	}
}

func TestMemoryBeforeCommitFaultLeavesNothingPersisted(t *testing.T) {
	m := snapshotstore.NewMemory()
	p := openMem(t, m, "in", 0)
	ctx := context.Background()
	if err := p.Commit(ctx, snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "a", Value: []byte("a1")}}, Offset: 5}); err != nil {
		t.Fatal(err)
	}
	injected := fmt.Errorf("injected: %w", snapshotstore.ErrFenced)
	var seen []snapshotstore.Batch
	var seenInfo snapshotstore.PartitionInfo
	m.BeforeCommit = func(info snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
		seenInfo = info
		seen = append(seen, b)
		return injected
	}
	err := p.Commit(ctx, snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "a", Value: []byte("a2")}, {Key: "b", Value: []byte("b1")}}, Offset: 9, OffsetAdvanced: true})
	if !errors.Is(err, injected) || !errors.Is(err, snapshotstore.ErrFenced) {
		t.Fatalf("Commit = %v, want the injected error", err)
	}
	if len(seen) != 1 || len(seen[0].Writes) != 2 || seen[0].Offset != 9 || seenInfo.Topic != "in" || seenInfo.Partition != 0 {
		t.Fatalf("hook saw %v for %v, want the one batch of partition in[0]", seen, seenInfo)
	}
	if got := m.Committed("in", 0); got != 5 {
		t.Errorf("Committed = %d after a failed commit, want the previous 5", got)
	}
	if got := m.Commits("in", 0); got != 1 {
		t.Errorf("Commits = %d after a failed commit, want 1", got)
	}
	latest := m.Latest("in", 0)
	if string(latest["a"].Value) != "a1" || len(latest) != 1 {
		t.Errorf("Latest = %v after a failed commit, want only a=a1", latest)
	}
	n := 0
	_ = p.Recover(ctx, func(snapshotstore.Snapshot) error { n++; return nil })
	if n != 1 {
		t.Errorf("the log has %d snapshots after a failed commit, want 1", n)
	}
}

func TestMemoryCommitWithCancelledContextPersistsNothing(t *testing.T) {
	m := snapshotstore.NewMemory()
	p := openMem(t, m, "in", 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := p.Commit(ctx, snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "a", Value: []byte("x")}}, Offset: 3})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit = %v, want context.Canceled", err)
	}
	if m.Committed("in", 0) != -1 || len(m.Latest("in", 0)) != 0 || m.Commits("in", 0) != 0 {
		t.Fatal("a cancelled commit persisted something")
	}
}

func TestMemoryConcurrentPartitions(t *testing.T) {
	m := snapshotstore.NewMemory()
	const partitions, commits = 4, 50
	var wg sync.WaitGroup
	for pn := range int32(partitions) {
		p := openMem(t, m, "in", pn)
		wg.Go(func() {
			for i := range commits {
				err := p.Commit(context.Background(), snapshotstore.Batch{
					Writes: []snapshotstore.Snapshot{{Key: fmt.Sprint("k", i%5), Value: []byte{byte(i)}, Offset: int64(i)}},
					Offset: int64(i + 1),
				})
				if err != nil {
					t.Error(err)
					return
				}
				_ = m.Latest("in", pn)
			}
		})
	}
	wg.Wait()
	for pn := range int32(partitions) {
		if m.Commits("in", pn) != commits || m.Committed("in", pn) != commits || len(m.Latest("in", pn)) != 5 {
			t.Errorf("partition %d: commits %d, committed %d, keys %d", pn, m.Commits("in", pn), m.Committed("in", pn), len(m.Latest("in", pn)))
		}
	}
}
