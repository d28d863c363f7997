package partitionflow

import (
	"fmt"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/logkey"
	"go.uber.org/zap"
)

// DefaultCommitHeldWarning is the default of Config.CommitHeldWarning.
const DefaultCommitHeldWarning = 30 * time.Second

// maxHeldStacks bounds the stacks a held-commit warning carries.
const maxHeldStacks = 8

// heldWatch notices a committable offset that stands still while records
// past it wait: a key's fold (or timer, or load hook) that never returns —
// an HTTP call without timeout, a deadlock — or an output, write or
// transaction that never ends holds its partition's commits, and, but for
// the lag, nothing said so; the revoke then gave up on its flush naming
// no key. Pure logic: the partition feeds it at every commit tick.
type heldWatch struct {
	warnAfter time.Duration // the first warning; each next one after twice as long (0: none)
	at        int64         // the committable offset watched
	since     time.Time     // when it was first seen held there (zero: not held)
	next      time.Duration // how long held when the next warning is due
	warned    bool          // a warning was logged for this hold
}

// observe takes the committable offset c and whether a hold keeps it there
// (records past it are not yet persisted), at now. It returns how long c
// has been held (0: not held, or just found held) and whether a warning is
// due: after warnAfter, then after twice as long as at the last one (30 s,
// 60 s, 120 s, … by default). was is how long a hold that ended had lasted
// when a warning had named it (0: none), so that its end is logged too.
func (w *heldWatch) observe(c int64, holding bool, now time.Time) (held time.Duration, warn bool, was time.Duration) {
	if holding && c == w.at && !w.since.IsZero() {
		held = now.Sub(w.since)
		if w.warnAfter > 0 && held >= w.next {
			w.warned, w.next = true, 2*held
			return held, true, 0
		}
		return held, false, 0
	}
	if w.warned {
		was = now.Sub(w.since)
	}
	w.at, w.next, w.warned, w.since = c, w.warnAfter, false, time.Time{}
	if holding {
		w.since = now
	}
	return 0, false, was
}

// watchHeld feeds the partition's heldWatch at a commit tick and logs a
// warning when it says so, naming the key and the record that hold the
// committable offset, and the stacks of the flow's calls in progress (one
// that never returns shows where it waits).
func (p *partition) watchHeld(now time.Time) {
	c := p.tracker.Committable()
	h := p.tracker.oldest()
	at := p.heldW.at
	held, warn, was := p.heldW.observe(c, h != nil && h.first <= c, now)
	p.heldFor = held
	if was > 0 {
		p.log.Info("committable offset moving again", zap.Int64("was_held_at", at), zap.String("key", logkey.Clip(p.heldBy)),
			zap.Duration("held_for", was), zap.Int64("committable_offset", c))
	}
	if !warn {
		if held == 0 {
			p.heldBy = ""
		}
		return
	}
	key, state, loaded := p.holder(h)
	p.heldBy = key
	fields := []zap.Field{zap.Int64("offset", c), zap.String("key", logkey.Clip(key)), zap.String("key_state", state),
		zap.Duration("held_for", held.Round(time.Millisecond)), zap.Int64("records_waiting", p.tracker.LastConsumed()+1-c),
		zap.Int64("committed_offset", p.committed)}
	if loaded { // else no call of the flow's is the key's
		if stacks := keyactor.CallStacks(maxHeldStacks); len(stacks) > 0 {
			// The process's, not only this partition's: the longest
			// blocked first.
			fields = append(fields, zap.Strings("process_calls_in_progress", stacks))
		}
	}
	p.log.Warn("committable offset held: a key's record is not yet persisted (a call of the flow that does not return, an output or a snapshot write that does not end); nothing past it commits", fields...)
}

// holder names the key of hold h, the oldest, and what the partition knows
// of it; loaded: the key has an actor, which may be in a call of the flow.
// A scan of the keys: only when a warning is due.
func (p *partition) holder(h *Hold) (key, state string, loaded bool) {
	for k, s := range p.keys {
		e := s.e
		if e == nil || &e.hold != h {
			continue
		}
		switch {
		case e.held:
			return k, fmt.Sprintf("waiting for the live-key budget to load it, %d records pending", len(e.pending)), false
		case e.unloading:
			return k, "unloading", true
		case e.mb != nil:
			return k, "loaded: in a call of the flow, or its output or snapshot write not yet persisted", true
		}
		return k, "unloaded", false
	}
	return "", "unknown", false
}

// heldWarnAfter is the watch's first warning: cfg's, but never within
// what a healthy hold lasts — a record folded waits for the next persist
// tick and its write, and its offset for the next commit tick — so a
// PersistEvery raised near the warning does not make every partition warn
// at every persist cycle, blaming whichever key came first. 0: none.
func heldWarnAfter(cfg Config) time.Duration {
	if cfg.CommitHeldWarning < 0 {
		return 0
	}
	return max(cfg.CommitHeldWarning, 2*cfg.PersistEvery+cfg.CommitOffsetsInterval)
}

// notFlushed names at most n of the keys that did not answer the revoke's
// flush (the log of a revoke that gave up on it).
func (p *partition) notFlushed(n int) []string {
	keys := make([]string, 0, min(n, len(p.flushOf)))
	for k := range p.flushOf {
		if len(keys) == n {
			break
		}
		keys = append(keys, logkey.Clip(k))
	}
	return keys
}
