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
// Each further idle flush within a persist tick waits for twice the quiet
// of the one before (50 ms, 100, 200, ...; the tick starts again from
// IdleFlushAfter): traffic with gaps just above IdleFlushAfter would
// otherwise cost a transaction per gap, and at most one per tick left
// trickling traffic's last records unpersisted and its offset uncommitted
// for up to PersistEvery (a user's trial: WaitCaughtUp returned 4 s after
// the last record of records 100 ms apart). This way a tick costs at most
// log2(PersistEvery/IdleFlushAfter)+1 idle flushes (8 with the defaults), and
// the input's last records are persisted within twice its largest gap
// since the tick (or at the tick).
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
	quiet time.Duration      // the quiet the next idle flush waits for: after, doubled by each since the tick
	// foldWait: due found a backlog; the key goroutine whose fold empties
	// it takes the flag (folded) and sends the tickIdle. A pointer: the
	// struct is built by value.
	foldWait *atomic.Bool
}

func newIdleFlush(after time.Duration) idleFlush {
	return idleFlush{after: after, quiet: after, now: time.Now, arm: make(chan time.Duration, 1), foldWait: new(atomic.Bool)}
}

// batch notes a batch of records.
func (f *idleFlush) batch(atEnd bool) {
	if f.after <= 0 {
		return
	}
	f.last, f.atEnd = f.now(), atEnd
	if atEnd && !f.armed {
		f.request(f.quiet)
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
	case !f.atEnd:
		return false
	case f.now().Sub(f.last) < f.quiet:
		f.request(f.quiet - f.now().Sub(f.last))
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
	f.quiet = min(2*f.quiet, time.Hour) // bounded for persist ticks that never come
	return true
}

// folded is called (on any goroutine) when the partition's keys have
// folded every record sent to them: true if due waits for that, and then
// the caller sends the tickIdle (once: the flag is taken).
func (f *idleFlush) folded() bool {
	return f.foldWait.Load() && f.foldWait.CompareAndSwap(true, false)
}

// ticked notes a persist tick: the next idle flush waits for IdleFlushAfter
// again, and a wait armed for a longer quiet is shortened.
func (f *idleFlush) ticked() {
	if f.quiet == f.after {
		return
	}
	f.quiet = f.after
	if f.armed && !f.foldWait.Load() {
		f.request(max(f.after-f.now().Sub(f.last), 0))
	}
}

// request asks the ticks goroutine for a tickIdle after d, replacing a
// request it has not taken yet (the partition is the only sender).
func (f *idleFlush) request(d time.Duration) {
	f.armed = true
	select {
	case <-f.arm:
	default:
	}
	f.arm <- d
}
