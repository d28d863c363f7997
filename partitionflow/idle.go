package partitionflow

import (
	"sync/atomic"
	"time"
)

// idleFlush decides when a partition that went quiet persists without
// waiting for its ticks: its last batch read the input to its end
// (Records.AtEnd), nothing came for Config.IdleFlushAfter, and its keys
// have folded every record it sent them (a backlog in their mailboxes is
// still work: flushing before it is folded would persist a part and leave
// the rest to the tick). Then the partition flushes its dirty keys and
// commits its offset as soon as they are persisted, as the persist and
// commit ticks would up to PersistEvery later (5 s by default): a quiet
// input is durable and shows no lag within milliseconds, and a restart
// replays nothing of it.
//
// At most one idle flush per persist tick: traffic with gaps just above
// IdleFlushAfter would otherwise cost a transaction per gap; this way it
// costs at most twice the ticks' transactions.
//
// Free of timers and actors: the ticks goroutine waits on arm and answers
// with a tickIdle, which the partition hands to due; a backlog's end is
// told by the key that folds its last record (folded), not polled for.
type idleFlush struct {
	after time.Duration // ≤ 0: off
	now   func() time.Time
	arm   chan time.Duration // to the ticks goroutine: a tickIdle is wanted after this
	last  time.Time          // when the last batch came
	atEnd bool               // it read the input to its end
	armed bool               // a tickIdle is on its way (or folded will send one)
	spent bool               // an idle flush ran since the last persist tick
	// foldWait: due found a backlog; the key goroutine whose fold empties
	// it takes the flag (folded) and sends the tickIdle. A pointer: the
	// struct is built by value.
	foldWait *atomic.Bool
}

func newIdleFlush(after time.Duration) idleFlush {
	return idleFlush{after: after, now: time.Now, arm: make(chan time.Duration, 1), foldWait: new(atomic.Bool)}
}

// batch notes a batch of records.
func (f *idleFlush) batch(atEnd bool) {
	if f.after <= 0 {
		return
	}
	f.last, f.atEnd = f.now(), atEnd
	if atEnd && !f.spent && !f.armed {
		f.request(f.after)
	}
}

// due answers a tickIdle: true when the partition should flush now. busy
// tells whether its keys have records not folded yet. A batch that came
// since the request asks for another wait; a backlog hands the wait to
// folded: the fold that ends it sends the next tickIdle (the poll this
// replaced came up to its interval after the last fold).
func (f *idleFlush) due(busy func() bool) bool {
	f.armed = false
	switch {
	case !f.atEnd || f.spent:
		return false
	case f.now().Sub(f.last) < f.after:
		f.request(f.after)
		return false
	}
	if busy() {
		f.foldWait.Store(true)
		// Looked at again after the flag is up: a backlog that ended in
		// between saw no flag, and then only this can take it back.
		if busy() || !f.foldWait.CompareAndSwap(true, false) {
			f.armed = true // folded sends the tickIdle
			return false
		}
	}
	f.spent = true
	return true
}

// folded is called (on any goroutine) when the partition's keys have
// folded every record sent to them: true if due waits for that, and then
// the caller sends the tickIdle (once: the flag is taken).
func (f *idleFlush) folded() bool {
	return f.foldWait.Load() && f.foldWait.CompareAndSwap(true, false)
}

// ticked notes a persist tick: the next quiet spell may flush again.
func (f *idleFlush) ticked() { f.spent = false }

func (f *idleFlush) request(d time.Duration) {
	f.armed = true
	select {
	case f.arm <- d:
	default: // one is pending already
	}
}
