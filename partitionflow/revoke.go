package partitionflow

import (
	"errors"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// DefaultRevokeTimeout is the default revoke budget (Config.RevokeTimeout):
// 3/4 of the consumer's default teardown bound (2/3 × the 60 s rebalance
// timeout = 40 s), leaving 10 s for the key actors to stop (protoactor took
// 5.3 s for 1M) and the revoke callback to return.
const DefaultRevokeTimeout = 30 * time.Second

// The revoke budget R, measured from the Revoke, as absolute deadlines (a
// phase that ends early leaves its time to the next ones):
//
//	[0, R/2)     the flush: every live key persists its state (outputs
//	             acknowledged first) and answers FlushDone. Late → the
//	             partition stops WITHOUT the final commit: the offset stays
//	             at the last one committed behind persisted state, and the
//	             new owner replays from there.
//	[.., 3R/4)   the final commit of the committable offset. Late → stop;
//	             the commit is abandoned (its transaction aborts).
//	[.., R)      the transaction actor's Stopping, with what remains (at
//	             least R/4): 3/4 of it for the in-flight transaction to
//	             return after its cancellation, the rest for the store's
//	             Close.
//
// Everything a revoke waits on inside the store — the stale-generation
// wait, kgo's retries of a produce, the abort — runs under the transaction
// context that the stop cancels, so it ends with its phase.
type revokeDeadlines struct{ flush, commit, stop time.Time }

func splitRevokeBudget(start time.Time, budget time.Duration) revokeDeadlines {
	return revokeDeadlines{
		flush:  start.Add(budget / 2),
		commit: start.Add(budget * 3 / 4),
		stop:   start.Add(budget),
	}
}

// Revoke phases with a deadline.
const (
	stageNone = iota
	stageFlush
	stageCommit
)

// revokeTimeout: the deadline of stage passed.
type revokeTimeout struct{ stage int }

func (p *partition) revoke(ctx actor.Context, flush bool) {
	if p.phase == phaseRevoking {
		return
	}
	wasRunning := p.phase == phaseRunning
	p.phase = phaseRevoking
	p.deadlines = splitRevokeBudget(time.Now(), p.cfg.RevokeTimeout)
	if p.txnA != nil {
		p.txnA.stopBy(p.deadlines.stop)
		if !flush {
			p.txnA.abandonInFlight() // nothing is flushed: see txnActor.stop (a failure sets it in fail)
		}
	}
	if p.cancel != nil {
		p.cancel() // a recovery read in flight
	}
	if !flush || !wasRunning || p.err != nil {
		ctx.Stop(ctx.Self())
		return
	}
	// Flush every live key (clean keys answer at once), then commit.
	p.round++
	p.flushOf = make(map[string]bool, p.loaded)
	for k, s := range p.keys {
		e := s.e
		if e == nil || e.held {
			continue // cold, or never loaded: nothing to persist (a held key's offsets stay held)
		}
		p.flushOf[k] = true
		e.send(&keyactor.Flush{Round: p.round, Reply: true, Revoke: true})
	}
	p.flushN = len(p.flushOf)
	if p.flushN == 0 {
		p.finalCommit(ctx)
		return
	}
	p.arm(ctx, stageFlush, p.deadlines.flush)
}

func (p *partition) flushAnswered(ctx actor.Context, k string, round uint64, err error) {
	if p.phase != phaseRevoking || round != p.round || !p.flushOf[k] {
		return
	}
	delete(p.flushOf, k)
	if err != nil {
		p.log.Warn("revoke-time flush of key failed", zap.String("key", k), zap.Error(err))
	}
	p.flushN--
	if p.flushN == 0 {
		p.finalCommit(ctx)
	}
}

func (p *partition) finalCommit(ctx actor.Context) {
	p.arm(ctx, stageCommit, p.deadlines.commit)
	c := p.tracker.Committable()
	root, self := ctx.ActorSystem().Root, ctx.Self()
	ctx.Send(p.txn, &commitReq{offset: c, done: func(err error) { root.Send(self, &finalCommit{err: err}) }})
}

func (p *partition) finalCommitted(ctx actor.Context, err error) {
	p.stage = stageNone
	if err != nil {
		if errors.Is(err, snapshotstore.ErrFenced) {
			p.log.Warn("revoke-time offset commit fenced; the new owner replays", zap.Error(err))
		} else {
			p.log.Error("revoke-time offset commit failed; the new owner replays from the last committed offset", zap.Error(err))
		}
	}
	ctx.Stop(ctx.Self())
}

// arm schedules the deadline of stage (replacing the previous one).
func (p *partition) arm(ctx actor.Context, stage int, at time.Time) {
	p.disarm()
	p.stage = stage
	root, self := ctx.ActorSystem().Root, ctx.Self()
	p.stageT = time.AfterFunc(time.Until(at), func() { root.Send(self, &revokeTimeout{stage: stage}) })
}

func (p *partition) disarm() {
	if p.stageT != nil {
		p.stageT.Stop()
		p.stageT = nil
	}
}

func (p *partition) onRevokeTimeout(ctx actor.Context, stage int) {
	if stage != p.stage {
		return // that phase ended in time
	}
	p.stage = stageNone
	budget := zap.Duration("revoke_budget", p.cfg.RevokeTimeout)
	switch stage {
	case stageFlush:
		fields := []zap.Field{zap.Int("keys_not_flushed", p.flushN), zap.Strings("keys_not_flushed_sample", p.notFlushed(10)),
			zap.Int64("committed_offset", p.committed), budget}
		if stacks := keyactor.CallStacks(maxHeldStacks); len(stacks) > 0 {
			fields = append(fields, zap.Strings("process_calls_in_progress", stacks)) // a call that never returns holds its key's flush
		}
		p.log.Error("REVOKE BUDGET: the revoke-time flush did not finish within its share; stopping WITHOUT the final offset commit (nothing is committed past unpersisted state; the new owner replays from the last committed offset)",
			fields...)
	case stageCommit:
		p.log.Error("REVOKE BUDGET: the revoke-time offset commit did not finish within its share; stopping (the new owner replays from the last committed offset)",
			zap.Int64("committable_offset", p.tracker.Committable()), zap.Int64("committed_offset", p.committed), budget)
	}
	if p.txnA != nil {
		p.txnA.abandonInFlight() // nothing more is flushed or committed: see txnActor.stop
	}
	ctx.Stop(ctx.Self())
}
