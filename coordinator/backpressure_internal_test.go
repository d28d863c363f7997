package coordinator

import "testing"

// A release between Add's crossing of a high mark and its pause sees the
// partition running and resumes nothing: the pause must then not happen,
// or the partition stays paused with nothing in flight to resume it.
func TestAddDoesNotPauseAfterAReleaseToTheLowMark(t *testing.T) {
	for _, tc := range []struct {
		name            string
		high, highBytes int
		n, bytes        int
	}{
		{"record mark", 4, 0, 4, 0},
		{"byte mark", 100, 1000, 1, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := TopicPartition{Topic: "in", Partition: 0}
			fc := NewFlowControl(tc.high, tc.highBytes)
			fc.Track(tp)
			testHookCrossedMark = func(b *Budget) {
				testHookCrossedMark = nil
				b.Done(tc.n, tc.bytes, func() { t.Fatal("resume of a partition not paused") })
			}
			defer func() { testHookCrossedMark = nil }()
			paused := false
			fc.Add(tp, tc.n, tc.bytes, func() { paused = true })
			if paused || fc.Paused(tp) {
				t.Fatalf("paused (fetch %v, FlowControl %v) with %d records, %d bytes in flight: nothing would resume it",
					paused, fc.Paused(tp), fc.InFlight(tp), fc.InFlightBytes(tp))
			}
		})
	}
}
