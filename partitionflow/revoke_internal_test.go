package partitionflow

import (
	"testing"
	"time"
)

// The split the doc of revokeDeadlines promises: phases in order, the
// final commit with at least a quarter, the whole within the budget.
func TestSplitRevokeBudget(t *testing.T) {
	start := time.Unix(1000, 0)
	d := splitRevokeBudget(start, 40*time.Second)
	if got := d.flush.Sub(start); got != 20*time.Second {
		t.Errorf("flush share %s, want 20s", got)
	}
	if got := d.commit.Sub(d.flush); got != 10*time.Second {
		t.Errorf("final commit share %s, want 10s", got)
	}
	if got := d.stop.Sub(start); got != 40*time.Second {
		t.Errorf("stop deadline at %s, want the whole budget 40s", got)
	}
}
