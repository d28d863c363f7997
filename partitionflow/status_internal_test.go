package partitionflow

import (
	"errors"
	"testing"
)

// A failed partition whose subtree is still stopping reports "stopping",
// not "running" (read as ready by Health and counted running by the
// partitions gauge, for up to a quarter of the revoke bound while its
// transaction drained: found by a review); a revoking one stays
// "revoking".
func TestAFailedPartitionReportsStopping(t *testing.T) {
	p := &partition{phase: phaseRunning, tracker: NewOffsetTracker(0)}
	if got := p.status().Phase; got != phaseRunning {
		t.Fatalf("phase %q, want running", got)
	}
	p.err = errors.New("poison")
	if got := p.status().Phase; got != phaseStopping {
		t.Fatalf("a failed partition's phase %q, want stopping", got)
	}
	p.phase = phaseRevoking
	if got := p.status().Phase; got != phaseRevoking {
		t.Fatalf("a revoking partition's phase %q, want revoking", got)
	}
}
