package partitionflow

import "time"

// idleFlush decides when a partition that went quiet persists without
// waiting for its ticks: its last batch read the input to its end
// (Records.AtEnd), nothing came for Config.IdleFlushAfter, and its keys
// have folded every record it sent them (a backlog in their mailboxes is
// still work: flushing before it is folded would persist a part and leave
// the rest to the tick). Then the
// partition flushes its dirty keys and commits its offset as soon as they
// are persisted, as the persist and commit ticks would up to PersistEvery
// later (5 s by default): a quiet input is durable and shows no lag within
// milliseconds, and a restart replays nothing of it.
//
// At most one idle flush per persist tick: traffic with gaps just above
// IdleFlushAfter would otherwise cost a transaction per gap; this way it
// costs at most twice the ticks' transactions.
//
// Free of timers and actors: the ticks goroutine waits on arm and answers
// with a tickIdle, which the partition hands to due.
type idleFlush struct {
	after time.Duration // ≤ 0: off
	now   func() time.Time
	arm   chan time.Duration // to the ticks goroutine: a tickIdle is wanted after this
	last  time.Time          // when the last batch came
	atEnd bool               // it read the input to its end
	armed bool               // a tickIdle is on its way
	spent bool               // an idle flush ran since the last persist tick
	poll  time.Duration      // the next wait for a backlog (doubling up to after)
}

func newIdleFlush(after time.Duration) idleFlush {
	return idleFlush{after: after, now: time.Now, arm: make(chan time.Duration, 1)}
}

// batch notes a batch of records.
func (f *idleFlush) batch(atEnd bool) {
	if f.after <= 0 {
		return
	}
	f.last, f.atEnd, f.poll = f.now(), atEnd, 0
	if atEnd && !f.spent && !f.armed {
		f.request(f.after)
	}
}

// due answers a tickIdle: true when the partition should flush now. busy:
// its keys have records not folded yet. A batch that came since the request,
// or a backlog, asks for another wait: for the backlog a short one at
// first (it ends without a batch to notice it), doubling up to after (a
// backlog of held keys can last seconds).
func (f *idleFlush) due(busy bool) bool {
	f.armed = false
	switch {
	case !f.atEnd || f.spent:
		return false
	case f.now().Sub(f.last) < f.after:
		f.request(f.after)
		return false
	case busy:
		f.poll = min(max(2*f.poll, f.after/10, time.Millisecond), f.after)
		f.request(f.poll)
		return false
	}
	f.spent = true
	return true
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
