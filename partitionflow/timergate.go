package partitionflow

import (
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// backlogStalled is how long a partition that has not read its input to
// the end may go without a batch, its keys folding nothing, before
// timerGate takes it for caught up. A batch short of the end says the
// backlog is not read; none at all may mean an empty backlog (the consumer
// hands over records only, so a partition with nothing to read gets no
// batch) or a first fetch that comes late. Only a stall this long (or a
// tail the consumer never hands over, such as compacted-away offsets)
// opens the gate then. It was 2 s: a partition whose next fetch came late
// (the consumer paused on its in-flight budget until the keys folded, a
// loaded host) opened with 150 000 records unread, and after a takeover
// whose old copies outlived their teardown bound, partitions that had read
// nothing opened 2 s after their recovery with 245 000 unread: 32 545 and
// 270 660 timers fired before records stamped before their due time
// (helper-127's and helper-128's 1M-key trials on Kafka 4.4.0). A partition
// with an empty backlog now fires its overdue timers 30 s after its start,
// unless a record comes. A variable for tests.
var backlogStalled = 30 * time.Second

// timerGate holds the overdue timers back while the partition reads the
// backlog it started with (a restart, a rebalance, a takeover: the records
// produced while no one owned it), until the records it delivered reach
// the timer's due time. Without it a key with an overdue timer fired it
// before its own records of the backlog's later batches, produced before
// the due time, which would have reset or cancelled it (an inactivity
// timer's click): a session closed early, a dedup window cleared before a
// duplicate. At a takeover that was every such key: the partition recovers
// before its first fetch returns, and the cold keys' due timers loaded
// them at once (helper-120's trial on Kafka 4.4.0: 67 timers fired before
// the first record). Under the gate a timer due at t fires once a record
// stamped after t was delivered (records are appended in about their
// timestamps' order), or once the partition has caught up: a batch that
// read to the input's end (Records.AtEnd), or backlogStalled without a
// batch and without records to fold (quietLeft).
// From then on, for the rest of the partition's life, timers go by the
// wall clock alone. The cold keys' timers wait in their heap (coldDue); a
// loaded key keeps its own past its delivery (and an armed timer coming
// due meanwhile: keyactor's holdForBacklog) and says so
// (keyactor.OverdueHeld), judging by the gate as its partition's last
// message to it carried (keyactor.Backlog.View), and the partition wakes
// it (heldTimers); a key's record stamped after its timer's due time fires
// it first (internal/keyactor's fireOverdueBefore). The partition logs the
// gate's opening, and Status.TimersGated says whether it is closed.
//
// Plain logic, without time of its own: the partition passes the batches
// and the clock, and arms the quiet check (gateCheck) when quietLeft asks.
type timerGate struct {
	// b holds the gate's state (the latest record timestamp delivered,
	// caught up or not); the partition's messages to its keys carry its
	// View (Deliver.Gate, Wake.Gate), and Env.Backlog is b (nil: no gate).
	b     *keyactor.Backlog
	last  time.Time // when the last batch came, or the partition started
	start time.Time // when the partition's actor started (its recovery ahead)
	// behind: a batch came that did not read to the input's end (logged
	// when the quiet check opens the gate).
	behind bool
}

func newTimerGate() timerGate { return timerGate{b: keyactor.NewBacklog()} }

// started notes the partition's start (its recovery done) at now.
func (g *timerGate) started(now time.Time) { g.last = now }

// batch notes a batch of records at now; true when it lets more timers
// through (the stream time moved on, or the partition caught up).
func (g *timerGate) batch(recs []*kgo.Record, atEnd bool, now time.Time) bool {
	if g.b.CaughtUp() {
		return false
	}
	g.last = now
	if atEnd {
		g.b.CatchUp()
		return true
	}
	g.behind = true
	// The batch's last record: records are in offset order, and their
	// timestamps nearly so; the gate needs no more precision than that.
	// Not a transaction marker, stamped with its commit's wall-clock time:
	// an input of event-time stamps (a backfill) jumped ahead (a review).
	for i := len(recs) - 1; i >= 0; i-- {
		if !recs[i].Attrs.IsControl() {
			return g.b.Advance(recs[i].Timestamp)
		}
	}
	return false
}

// admits: a timer due at at may fire now.
func (g *timerGate) admits(at time.Time) bool { return g.b.Admits(at) }

// quietLeft is how long until the quiet check may open the gate at now
// (0: it opens it now, and the gate is open after); ok false once open.
// The quiet is backlogStalled without a batch and without records to fold:
// counted
// from the last batch or from idle, when the keys last folded every record
// delivered (zero: never). busy: they have records not folded yet. No batch
// came then because the consumer paused on the in-flight budget, in the
// middle of a backlog maybe, and it fetches again only once they fold: the
// quiet starts then. Counted from the last batch alone, a check right after
// the keys folded a long delivery opened the gate before the next fetch
// came (helper-127's trial).
func (g *timerGate) quietLeft(now time.Time, busy bool, idle time.Time) (left time.Duration, ok bool) {
	if g.b.CaughtUp() {
		return 0, false
	}
	quiet := backlogStalled
	if busy {
		return quiet, true
	}
	if left = quiet - now.Sub(latest(g.last, idle)); left > 0 {
		return left, true
	}
	g.b.CatchUp()
	return 0, true
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
