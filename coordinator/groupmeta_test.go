package coordinator_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/snapshotstore"
)

// fakeMembers is a memberSource (the part of *kgo.Client the tracker reads)
// whose answer the test changes between calls.
type fakeMembers struct {
	mu         sync.Mutex
	member     string
	generation int32
	reads      int
}

func (f *fakeMembers) GroupMetadata() (string, int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.member, f.generation
}

func (f *fakeMembers) set(member string, generation int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.member, f.generation = member, generation
}

func (f *fakeMembers) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func TestGroupMetadataPreJoinIsNeverReturnedOrPublished(t *testing.T) {
	for _, tc := range []struct {
		name       string
		member     string
		generation int32
	}{
		{"unknown generation -1", "m-1", -1},
		{"very negative generation", "m-1", -1 << 30},
		{"KIP-848 epoch 0 before the first heartbeat", "m-1", 0},
		{"no member id", "", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeMembers{member: tc.member, generation: tc.generation}
			tr := coordinator.NewGroupMetadataTracker(src, "inst")
			gm, err := tr.Current()
			if !errors.Is(err, snapshotstore.ErrNoGroupMetadata) {
				t.Fatalf("Current() error = %v, want errors.Is(err, ErrNoGroupMetadata)", err)
			}
			if gm != (snapshotstore.GroupMetadata{}) {
				t.Fatalf("Current() returned %+v with the error, want the zero value", gm)
			}
			tr.Refresh()
			if p, ok := tr.Published(); ok {
				t.Fatalf("Published() = %+v, true: a pre-join generation was published", p)
			}
		})
	}
}

func TestGroupMetadataCurrentReadsGenerationLiveEachCall(t *testing.T) {
	src := &fakeMembers{member: "m-1", generation: 3}
	tr := coordinator.NewGroupMetadataTracker(src, "")
	for _, step := range []struct {
		member string
		gen    int32
	}{
		{"m-1", 3},
		{"m-1", 4}, // a silent bump: no callback, no Refresh
		{"m-2", 9}, // rejoined under a new member id
	} {
		src.set(step.member, step.gen)
		before := src.readCount()
		gm, err := tr.Current()
		if err != nil {
			t.Fatalf("Current(): %v", err)
		}
		if gm.MemberID != step.member || gm.Generation != step.gen {
			t.Fatalf("Current() = %s/%d, want %s/%d: the generation must be read live, never cached",
				gm.MemberID, gm.Generation, step.member, step.gen)
		}
		if src.readCount() != before+1 {
			t.Fatalf("Current() read the source %d times, want once per call", src.readCount()-before)
		}
	}
	// Leaving the group (generation back to unknown) fails the next read at
	// once, though a good value was read before.
	src.set("", -1)
	if _, err := tr.Current(); !errors.Is(err, snapshotstore.ErrNoGroupMetadata) {
		t.Fatalf("Current() after leaving: %v, want ErrNoGroupMetadata (no cached value)", err)
	}
}

func TestGroupMetadataRefreshPublishes(t *testing.T) {
	src := &fakeMembers{member: "m-1", generation: -1}
	tr := coordinator.NewGroupMetadataTracker(src, "static-1")
	if _, ok := tr.Published(); ok {
		t.Fatal("Published() before any refresh must be false")
	}
	tr.Refresh()
	if _, ok := tr.Published(); ok {
		t.Fatal("Published() after a pre-join refresh must be false")
	}
	src.set("m-1", 2)
	tr.Refresh()
	want := snapshotstore.GroupMetadata{MemberID: "m-1", Generation: 2, InstanceID: "static-1"}
	if p, ok := tr.Published(); !ok || p != want {
		t.Fatalf("Published() = %+v, %v; want %+v, true", p, ok, want)
	}
	// The published value is a copy: the source moving on does not change
	// it until the next refresh...
	src.set("m-1", 3)
	if p, _ := tr.Published(); p.Generation != 2 {
		t.Fatalf("Published().Generation = %d before the next refresh, want 2", p.Generation)
	}
	tr.Refresh()
	if p, _ := tr.Published(); p.Generation != 3 {
		t.Fatalf("Published().Generation = %d after refresh, want 3", p.Generation)
	}
	// ...and a pre-join read never replaces a published value with it.
	src.set("m-1", -1)
	tr.Refresh()
	if p, ok := tr.Published(); !ok || p.Generation < 1 {
		t.Fatalf("Published() = %+v, %v after a pre-join refresh: a generation < 1 was published", p, ok)
	}
}

func TestGroupMetadataCarriesInstanceID(t *testing.T) {
	for _, inst := range []string{"", "static-7"} {
		tr := coordinator.NewGroupMetadataTracker(&fakeMembers{member: "m", generation: 1}, inst)
		gm, err := tr.Current()
		if err != nil {
			t.Fatal(err)
		}
		if gm.InstanceID != inst {
			t.Fatalf("Current().InstanceID = %q, want %q", gm.InstanceID, inst)
		}
		tr.Refresh()
		if p, _ := tr.Published(); p.InstanceID != inst {
			t.Fatalf("Published().InstanceID = %q, want %q", p.InstanceID, inst)
		}
	}
}

// Refresh runs on the poll goroutine while partitions' transactions read
// Current concurrently.
func TestGroupMetadataConcurrentRefreshAndCurrent(t *testing.T) {
	src := &fakeMembers{member: "m", generation: 1}
	tr := coordinator.NewGroupMetadataTracker(src, "")
	var wg sync.WaitGroup
	wg.Go(func() {
		for g := int32(1); g <= 200; g++ {
			src.set("m", g)
			tr.Refresh()
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 200 {
				gm, err := tr.Current()
				if err != nil || gm.Generation < 1 {
					t.Errorf("Current() = %+v, %v", gm, err)
					return
				}
				if p, ok := tr.Published(); ok && p.Generation < 1 {
					t.Errorf("Published() = %+v", p)
					return
				}
			}
		})
	}
	wg.Wait()
	if gm, _ := tr.Current(); gm.Generation != 200 {
		t.Fatalf("final Current().Generation = %d, want 200", gm.Generation)
	}
}

// A member that had joined and now shows no generation (KIP-848: epoch 0
// after losing its session) is an evicted owner: the error is a fence.
func TestGroupMetadataLostAfterJoinIsAFence(t *testing.T) {
	src := &fakeMembers{}
	src.set("m", 3)
	tr := coordinator.NewGroupMetadataTracker(src, "")
	if _, err := tr.Current(); err != nil {
		t.Fatal(err)
	}
	src.set("m", 0)
	_, err := tr.Current()
	if !errors.Is(err, snapshotstore.ErrFenced) || !errors.Is(err, snapshotstore.ErrNoGroupMetadata) {
		t.Fatalf("got %v, want ErrFenced and ErrNoGroupMetadata", err)
	}
}
