package keyflow

import (
	"testing"
	"time"
)

// SetTimerUnloadHorizon lowers the unload horizon of keys with timers for
// the test (restored at its end; set it before starting partitions).
func SetTimerUnloadHorizon(t *testing.T, d time.Duration) {
	old := minTimerUnloadHorizon
	minTimerUnloadHorizon = d
	t.Cleanup(func() { minTimerUnloadHorizon = old })
}
