package coordinator

import "testing"

// A release between Add's crossing of the high mark and its pause sees the
// partition running and resumes nothing: the pause must then not happen,
// or the partition stays paused with nothing in flight to resume it.
func TestAddDoesNotPauseAfterAReleaseToTheLowMark(t *testing.T) {
	tp := TopicPartition{Topic: "in", Partition: 0}
	fc := NewFlowControl(4)
	fc.Track(tp)
	testHookCrossedMark = func(b *Budget) {
		testHookCrossedMark = nil
		b.Done(4, func() { t.Fatal("resume of a partition not paused") })
	}
	defer func() { testHookCrossedMark = nil }()
	paused := false
	fc.Add(tp, 4, func() { paused = true })
	if paused || fc.Paused(tp) {
		t.Fatalf("paused (fetch %v, FlowControl %v) with %d in flight: nothing would resume it", paused, fc.Paused(tp), fc.InFlight(tp))
	}
}
