package coordinator_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/actorflow/actorflow/coordinator"
)

// fetchState stands in for kgo's per-partition pause state; it records the
// callbacks and fails on a double pause or a resume of a running partition.
// FlowControl runs the callbacks under its lock, as the consumer relies on.
type fetchState struct {
	t               *testing.T
	paused          bool
	pauses, resumes int
	doublePause     bool
	resumeNotPaused bool
}

func (s *fetchState) pause() {
	if s.paused {
		s.doublePause = true
	}
	s.paused = true
	s.pauses++
}

func (s *fetchState) resume() {
	if !s.paused {
		s.resumeNotPaused = true
	}
	s.paused = false
	s.resumes++
}

func (s *fetchState) check() {
	s.t.Helper()
	if s.doublePause {
		s.t.Error("pause called on an already paused partition")
	}
	if s.resumeNotPaused {
		s.t.Error("resume called on a partition that was not paused")
	}
}

var tp0 = coordinator.TopicPartition{Topic: "in", Partition: 0}

func TestFlowControlPausesAtHighMarkExactlyOnce(t *testing.T) {
	fc := coordinator.NewFlowControl(10, 0)
	fc.Track(tp0)
	s := &fetchState{t: t}
	steps := []struct {
		add        int
		wantPauses int
	}{
		{4, 0}, {5, 0}, // 9: below the mark
		{1, 1},         // 10: at the mark
		{5, 1}, {1, 1}, // above: already paused
	}
	total := 0
	for _, st := range steps {
		fc.Add(tp0, st.add, 0, s.pause)
		total += st.add
		if s.pauses != st.wantPauses {
			t.Fatalf("after %d in flight: %d pauses, want %d", total, s.pauses, st.wantPauses)
		}
		if got := fc.InFlight(tp0); got != total {
			t.Fatalf("InFlight = %d, want %d", got, total)
		}
		if fc.Paused(tp0) != (st.wantPauses == 1) {
			t.Fatalf("Paused = %v at %d in flight", fc.Paused(tp0), total)
		}
	}
	s.check()
}

func TestFlowControlResumesAtHalf(t *testing.T) {
	for _, tc := range []struct {
		high, resumeAt int
	}{
		{high: 10, resumeAt: 5},
		{high: 5, resumeAt: 2}, // integer half
		{high: 1, resumeAt: 0},
	} {
		t.Run(fmt.Sprintf("high=%d", tc.high), func(t *testing.T) {
			fc := coordinator.NewFlowControl(tc.high, 0)
			fc.Track(tp0)
			s := &fetchState{t: t}
			fc.Add(tp0, tc.high, 0, s.pause)
			if s.pauses != 1 {
				t.Fatalf("%d pauses at the high mark, want 1", s.pauses)
			}
			for inflight := tc.high - 1; inflight >= 0; inflight-- {
				fc.Done(tp0, 1, 0, s.resume)
				wantResumes := 0
				if inflight <= tc.resumeAt {
					wantResumes = 1
				}
				if s.resumes != wantResumes {
					t.Fatalf("at %d in flight: %d resumes, want %d (resume at <= %d, once)", inflight, s.resumes, wantResumes, tc.resumeAt)
				}
				if fc.Paused(tp0) != (wantResumes == 0) {
					t.Fatalf("at %d in flight: Paused = %v", inflight, fc.Paused(tp0))
				}
			}
			// A second cycle pauses again.
			fc.Add(tp0, tc.high, 0, s.pause)
			if s.pauses != 2 || !fc.Paused(tp0) {
				t.Fatalf("second crossing: %d pauses, Paused=%v; want 2, true", s.pauses, fc.Paused(tp0))
			}
			s.check()
		})
	}
}

func TestFlowControlNonPositiveHighMarkMeansOne(t *testing.T) {
	for _, high := range []int{0, -3} {
		fc := coordinator.NewFlowControl(high, 0)
		fc.Track(tp0)
		s := &fetchState{t: t}
		fc.Add(tp0, 1, 0, s.pause)
		if s.pauses != 1 {
			t.Fatalf("NewFlowControl(%d, 0): one record in flight must pause (high mark 1), got %d pauses", high, s.pauses)
		}
		fc.Done(tp0, 1, 0, s.resume)
		if s.resumes != 1 {
			t.Fatalf("NewFlowControl(%d, 0): zero in flight must resume, got %d resumes", high, s.resumes)
		}
	}
}

// Each count clamps at zero on its own: an over-release of bytes borrows
// nothing from the records (they share one word).
func TestFlowControlDoneClampsAtZero(t *testing.T) {
	fc := coordinator.NewFlowControl(10, 1000)
	fc.Track(tp0)
	fc.Add(tp0, 2, 100, func() { t.Fatal("pause below the mark") })
	fc.Done(tp0, 1, 500, func() { t.Fatal("resume of a running partition") })
	if n, b := fc.InFlight(tp0), fc.InFlightBytes(tp0); n != 1 || b != 0 {
		t.Fatalf("after releasing more bytes than in flight: %d records, %d bytes, want 1, 0", n, b)
	}
	fc.Done(tp0, 5, 0, func() { t.Fatal("resume of a running partition") })
	if got := fc.InFlight(tp0); got != 0 {
		t.Fatalf("InFlight = %d after over-release, want 0", got)
	}
	s := &fetchState{t: t}
	fc.Add(tp0, 10, 0, s.pause)
	if s.pauses != 1 {
		t.Fatal("an over-release must not leave credit: 10 in flight must pause")
	}
}

func TestFlowControlRemoveResumesPausedPartition(t *testing.T) {
	fc := coordinator.NewFlowControl(4, 0)
	fc.Track(tp0)
	s := &fetchState{t: t}
	fc.Add(tp0, 4, 0, s.pause)
	fc.Remove(tp0, s.resume)
	if s.resumes != 1 || s.paused {
		t.Fatalf("Remove of a paused partition: %d resumes, want 1", s.resumes)
	}
	if fc.Paused(tp0) || fc.InFlight(tp0) != 0 {
		t.Fatalf("after Remove: Paused=%v InFlight=%d, want false, 0", fc.Paused(tp0), fc.InFlight(tp0))
	}
	// Records of the removed partition processed late change nothing.
	fc.Done(tp0, 4, 0, func() { t.Fatal("resume after Remove") })
	// Reassignment starts clean.
	fc.Track(tp0)
	fc.Add(tp0, 3, 0, func() { t.Fatal("pause below the mark after reassignment") })
	if got := fc.InFlight(tp0); got != 3 {
		t.Fatalf("InFlight after reassignment = %d, want 3", got)
	}
	s.check()
}

func TestFlowControlRemoveOfRunningPartitionDoesNotResume(t *testing.T) {
	fc := coordinator.NewFlowControl(4, 0)
	fc.Track(tp0)
	fc.Add(tp0, 1, 0, func() { t.Fatal("pause below the mark") })
	fc.Remove(tp0, func() { t.Fatal("resume of a partition that was never paused") })
	fc.Remove(coordinator.TopicPartition{Topic: "in", Partition: 9}, func() { t.Fatal("resume of an unknown partition") })
}

func TestFlowControlDoneOnUnknownPartitionIsNoOp(t *testing.T) {
	fc := coordinator.NewFlowControl(4, 0)
	unknown := coordinator.TopicPartition{Topic: "other", Partition: 3}
	fc.Done(unknown, 7, 0, func() { t.Fatal("resume called for an unknown partition") })
	if fc.InFlight(unknown) != 0 || fc.Paused(unknown) {
		t.Fatalf("unknown partition: InFlight=%d Paused=%v, want 0, false", fc.InFlight(unknown), fc.Paused(unknown))
	}
	// It did not create a negative (or any) balance: tracking it later
	// starts at zero and pauses at the mark.
	fc.Track(unknown)
	s := &fetchState{t: t}
	fc.Add(unknown, 4, 0, s.pause)
	if s.pauses != 1 {
		t.Fatalf("%d pauses at the mark, want 1", s.pauses)
	}
}

func TestFlowControlPartitionsAreIndependent(t *testing.T) {
	fc := coordinator.NewFlowControl(2, 0)
	tp1 := coordinator.TopicPartition{Topic: "in", Partition: 1}
	fc.Track(tp0)
	fc.Track(tp1)
	fc.Add(tp0, 2, 0, func() {})
	fc.Add(tp1, 1, 0, func() { t.Fatal("tp1 paused by tp0's records") })
	if !fc.Paused(tp0) || fc.Paused(tp1) {
		t.Fatalf("Paused tp0=%v tp1=%v, want true, false", fc.Paused(tp0), fc.Paused(tp1))
	}
}

// Concurrent Add/Done (the poll loop and the partition actors) must never
// leave a partition paused with nothing in flight: it would never fetch
// again, since only Done resumes it.
func TestFlowControlConcurrentAddDoneNeverStrandsAPausedPartition(t *testing.T) {
	const (
		high       = 8
		partitions = 4
		workers    = 8
		rounds     = 500
	)
	fc := coordinator.NewFlowControl(high, 0)
	states := make([]*fetchState, partitions)
	tps := make([]coordinator.TopicPartition, partitions)
	for p := range partitions {
		tps[p] = coordinator.TopicPartition{Topic: "in", Partition: int32(p)}
		states[p] = &fetchState{t: t}
		fc.Track(tps[p])
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				p := (w + i) % partitions
				n := 1 + (w*7+i)%5
				// Three deliveries before their processing: up to 15 in
				// flight from one worker alone, over the mark of 8.
				for range 3 {
					fc.Add(tps[p], n, 0, states[p].pause)
				}
				for range 3 {
					fc.Done(tps[p], n, 0, states[p].resume)
				}
			}
		})
	}
	wg.Wait()
	totalPauses := 0
	for p := range partitions {
		totalPauses += states[p].pauses
		s := states[p]
		s.check()
		if fc.InFlight(tps[p]) != 0 {
			t.Errorf("%v: InFlight = %d after every record was processed, want 0", tps[p], fc.InFlight(tps[p]))
		}
		if fc.Paused(tps[p]) || s.paused {
			t.Errorf("%v: left paused with zero in flight (FlowControl %v, fetch %v)", tps[p], fc.Paused(tps[p]), s.paused)
		}
		if s.pauses != s.resumes {
			t.Errorf("%v: %d pauses, %d resumes", tps[p], s.pauses, s.resumes)
		}
	}
	if totalPauses == 0 {
		t.Fatal("no partition ever crossed the high mark: the test exercised nothing")
	}
}

// Records of a partition can be accounted (Add) after it was removed: the
// consumer's owned check and its Add are not atomic with a revoke running on
// kgo's group goroutine. Such a stale Add must not pause the partition, or
// the next assignment of it starts paused with zero in flight.
func TestFlowControlAddAfterRemoveDoesNotStrandReassignedPartition(t *testing.T) {
	fc := coordinator.NewFlowControl(4, 0)
	fc.Track(tp0)
	fc.Remove(tp0, func() {})
	s := &fetchState{t: t}
	fc.Add(tp0, 4, 0, s.pause) // a buffered fetch of the revoked partition
	fc.Track(tp0)              // reassigned
	if fc.Paused(tp0) && fc.InFlight(tp0) == 0 {
		t.Fatal("regression: FlowControl.Add accounts an untracked (removed) partition: it recreates inflight and pauses it; " +
			"Track on reassignment resets inflight to 0 but keeps paused=true, so no Done ever resumes it and kgo keeps " +
			"its fetches paused. Fix: Add ignores partitions with no inflight entry (as Done does), and Track clears paused.")
	}
	if s.pauses != 0 {
		t.Fatalf("a removed partition was paused by a stale Add")
	}
}

// The processors' path: releases through the partition's Budget, from many
// goroutines, while the poll loop adds; no partition is left paused with
// nothing in flight, and pauses and resumes alternate — whichever mark is
// the one crossed.
func TestBudgetConcurrentReleasesNeverStrandAPausedPartition(t *testing.T) {
	const (
		workers = 4
		rounds  = 200000
	)
	type load struct{ n, bytes int }
	for _, tc := range []struct {
		name            string
		high, highBytes int
		load            func(i int) load
	}{
		{"record mark", 2, 0, func(i int) load { return load{1 + i%2, 0} }},
		// Two or three records reach the byte mark of 100.
		{"byte mark", 1 << 30, 100, func(i int) load { return load{1, 40 + i%30} }},
		// Releases where one count or the other is the large one: two
		// releases racing must not each see one count above its low mark
		// while together they brought both below it.
		{"both marks", 4, 400, func(i int) load {
			if i%2 == 0 {
				return load{3, 10}
			}
			return load{1, 300}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := coordinator.NewFlowControl(tc.high, tc.highBytes)
			fc.Track(tp0)
			b := fc.Budget(tp0)
			s := &fetchState{t: t}
			work := make(chan load) // released as soon as added: the race is at the mark
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for l := range work {
						b.Done(l.n, l.bytes, s.resume)
					}
				})
			}
			for i := range rounds {
				l := tc.load(i)
				fc.Add(tp0, l.n, l.bytes, s.pause)
				work <- l
			}
			close(work)
			wg.Wait()
			s.check()
			if fc.InFlight(tp0) != 0 || fc.InFlightBytes(tp0) != 0 || fc.Paused(tp0) || s.paused {
				t.Fatalf("after every release: InFlight=%d InFlightBytes=%d Paused=%v fetch paused=%v, want 0, 0, false, false",
					fc.InFlight(tp0), fc.InFlightBytes(tp0), fc.Paused(tp0), s.paused)
			}
			if s.pauses != s.resumes {
				t.Fatalf("%d pauses, %d resumes", s.pauses, s.resumes)
			}
			if s.pauses == 0 {
				t.Fatal("never crossed the mark: the test exercised nothing")
			}
		})
	}
}

// A Budget belongs to one assignment: releases through the Budget of an
// earlier assignment (its key actors finishing after a revoke) change
// nothing of the next one.
func TestBudgetOfAnEarlierAssignmentIsIgnored(t *testing.T) {
	fc := coordinator.NewFlowControl(4, 0)
	fc.Track(tp0)
	old := fc.Budget(tp0)
	fc.Add(tp0, 4, 0, func() {})
	fc.Remove(tp0, func() {})
	fc.Track(tp0)
	s := &fetchState{t: t}
	fc.Add(tp0, 4, 0, s.pause)
	old.Done(4, 0, func() { t.Fatal("a release of the earlier assignment resumed the new one") })
	if fc.InFlight(tp0) != 4 || !fc.Paused(tp0) {
		t.Fatalf("InFlight=%d Paused=%v, want 4, true", fc.InFlight(tp0), fc.Paused(tp0))
	}
	if fc.Budget(coordinator.TopicPartition{Topic: "in", Partition: 9}) != nil {
		t.Fatal("a Budget for a partition never tracked")
	}
	fc.Budget(tp0).Done(2, 0, s.resume)
	if s.resumes != 1 || fc.Paused(tp0) {
		t.Fatalf("at the low mark: %d resumes, Paused=%v; want 1, false", s.resumes, fc.Paused(tp0))
	}
	s.check()
}

// The byte bound pauses a partition far below its record bound (large
// records), and it resumes only once records and bytes are both down to
// half their marks.
func TestFlowControlByteMarkPausesAndBothMarksResume(t *testing.T) {
	fc := coordinator.NewFlowControl(100, 1000)
	fc.Track(tp0)
	s := &fetchState{t: t}
	fc.Add(tp0, 1, 600, s.pause)
	if s.pauses != 0 {
		t.Fatalf("paused at 600 of 1000 bytes")
	}
	fc.Add(tp0, 1, 400, s.pause) // 2 records, 1000 bytes: the byte mark
	if s.pauses != 1 || !fc.Paused(tp0) {
		t.Fatalf("2 records and %d bytes in flight (marks 100, 1000): %d pauses, Paused=%v, want 1, true", fc.InFlightBytes(tp0), s.pauses, fc.Paused(tp0))
	}
	fc.Done(tp0, 1, 400, s.resume) // 1 record (below 50), 600 bytes (above 500)
	if s.resumes != 0 {
		t.Fatalf("resumed with %d bytes in flight, above half the byte mark", fc.InFlightBytes(tp0))
	}
	fc.Done(tp0, 0, 100, s.resume) // 500 bytes: both at their low marks
	if s.resumes != 1 || fc.Paused(tp0) {
		t.Fatalf("%d records, %d bytes in flight: %d resumes, Paused=%v, want 1, false", fc.InFlight(tp0), fc.InFlightBytes(tp0), s.resumes, fc.Paused(tp0))
	}
	s.check()

	// The record mark is still one: bytes at their low mark do not resume a
	// partition whose records are above theirs.
	fc2 := coordinator.NewFlowControl(4, 1000)
	fc2.Track(tp0)
	s2 := &fetchState{t: t}
	fc2.Add(tp0, 4, 10, s2.pause)
	fc2.Done(tp0, 1, 10, s2.resume) // 3 records (above 2), 0 bytes
	if s2.pauses != 1 || s2.resumes != 0 {
		t.Fatalf("record mark: %d pauses, %d resumes, want 1, 0", s2.pauses, s2.resumes)
	}
	fc2.Done(tp0, 1, 0, s2.resume)
	if s2.resumes != 1 {
		t.Fatalf("2 records, 0 bytes: %d resumes, want 1", s2.resumes)
	}
	s2.check()
}

// A single record larger than the byte mark is still delivered: it pauses
// the partition, which resumes once it is processed, so the partition
// never stalls on it.
func TestFlowControlRecordAboveTheByteMarkPausesUntilProcessed(t *testing.T) {
	fc := coordinator.NewFlowControl(100, 10)
	fc.Track(tp0)
	s := &fetchState{t: t}
	fc.Add(tp0, 1, 50, s.pause)
	if s.pauses != 1 {
		t.Fatalf("one record of 50 bytes (mark 10): %d pauses, want 1", s.pauses)
	}
	fc.Done(tp0, 1, 50, s.resume)
	if s.resumes != 1 || fc.Paused(tp0) || fc.InFlightBytes(tp0) != 0 {
		t.Fatalf("after it was processed: %d resumes, Paused=%v, %d bytes in flight, want 1, false, 0", s.resumes, fc.Paused(tp0), fc.InFlightBytes(tp0))
	}
	s.check()
}

// A byte bound of 0 (or less) bounds records only.
func TestFlowControlWithoutByteMarkCountsRecordsOnly(t *testing.T) {
	for _, mark := range []int{0, -1} {
		fc := coordinator.NewFlowControl(4, mark)
		fc.Track(tp0)
		fc.Add(tp0, 3, 1<<39, func() { t.Fatalf("byte mark %d: paused by bytes", mark) })
		if got := fc.InFlightBytes(tp0); got != 1<<39 {
			t.Fatalf("InFlightBytes = %d, want %d (counted even without a mark)", got, 1<<39)
		}
	}
}

// Two releases racing after a pause, one mostly records and the other mostly
// bytes, together bring both counts to zero: the partition must be resumed
// every time. A guard of the packed counts (Budget.load); it does not
// reproduce the interleaving that two words allowed (one release reading
// the records before the other's release, the other the bytes before the
// first's, neither resuming), which needs one release to overtake the other
// between two atomic operations.
func TestBudgetRacingReleasesResumeOnceBothCountsAreDown(t *testing.T) {
	fc := coordinator.NewFlowControl(2, 200)
	fc.Track(tp0)
	b := fc.Budget(tp0)
	s := &fetchState{t: t}
	for round := range 5000 {
		fc.Add(tp0, 3, 250, s.pause) // over both marks
		if !fc.Paused(tp0) {
			t.Fatalf("round %d: not paused at 3 records, 250 bytes (marks 2, 200)", round)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, l := range [][2]int{{1, 200}, {2, 50}} {
			wg.Go(func() {
				<-start
				b.Done(l[0], l[1], s.resume)
			})
		}
		close(start)
		wg.Wait()
		if fc.Paused(tp0) || s.paused {
			t.Fatalf("round %d: paused with %d records and %d bytes in flight: nothing would resume it", round, fc.InFlight(tp0), fc.InFlightBytes(tp0))
		}
	}
	s.check()
}
