package partitionflow

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A commit tick that fires while the persist tick's flushes are still in
// their transaction commits what was persisted before them; the rest is
// committed as soon as it is persisted (catchUpCommit), not a whole
// CommitOffsetsInterval later. The ticks are sent by hand (the intervals
// are an hour): commit first, then persist, the order in which the E2E
// drain lost an interval. Without the catch-up, nothing is committed.
func TestCommitCatchesUpOnceTheTickedRecordsArePersisted(t *testing.T) {
	h := newTickHarness(t, 0) // no live-key budget
	h.open()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "in", Offset: int64(i), Key: []byte(fmt.Sprint("k", i%4))})
	}
	h.sys.Root.Send(h.pid, &Records{Records: recs})
	// Every record dispatched (the keys are loaded); the ticks then reach
	// the keys after their records.
	h.await("records dispatched", func(st Status) bool { return st.KeysLoaded == 4 })
	h.sys.Root.Send(h.pid, &tick{tickCommit})
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	timeout := time.After(10 * time.Second)
	for {
		select {
		case off := <-h.committed:
			if off == 20 {
				return
			}
		case <-timeout:
			t.Fatalf("offset 20 not committed after the commit and persist ticks (at %d)", h.mem.Committed("in", 0))
		}
	}
}
