package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// A failed partition stops alone: see PartitionFailed.

// healthyAfter: a restarted partition that runs this long without failing
// starts its next failure streak (and backoff) from the beginning.
const healthyAfter = 5 * time.Minute

// Failure is a failed partition waiting to be started again.
type Failure struct {
	TopicPartition
	Err      error
	Attempts int       // consecutive failures
	Since    time.Time // first of the consecutive failures
	RetryAt  time.Time
	// Committed is the partition's committed offset as it last reported
	// it (or as it was assigned), HighWatermark its high watermark as of
	// its latest fetch or its assignment's list of end offsets
	// (Consumer.HighWatermark): -1 when unknown (Failures fills them).
	Committed, HighWatermark int64
	// Evicted: not a failure — the group coordinator evicted this member
	// (PartitionEvicted); the partition waits for the consumer to rejoin.
	Evicted bool
	// answer is the coordinator's last answer to the restart's question
	// (stillMember), once asked: a new answer is logged at warn, a repeated
	// one at debug.
	answer memberAnswer
	asked  bool
}

// testHookFailedRecorded runs in PartitionFailed right after the failure is
// recorded and the lock released: a test stops the partition there, as a
// revoke racing the failure can.
var testHookFailedRecorded func(TopicPartition)

// failPartition reports a failure the consumer found itself through
// Config.OnFailure (the worker's path: counted, fatal under fail-fast),
// else PartitionFailed.
func (c *Consumer) failPartition(tp TopicPartition, err error) {
	if c.cfg.OnFailure != nil {
		c.cfg.OnFailure(tp, err)
		return
	}
	c.PartitionFailed(tp, err)
}

// PartitionFailed isolates a failed partition: its subtree has stopped, or
// is stopping (a panic reported through ChildFailed comes before the stop
// ends), committing nothing past its persisted state (a copy that fails
// after a newer one started is not reported: actors.Supervisor). Its
// fetches pause; it stays owned, and it is started again — the takeover
// fence, the committed offset, a fresh recovery — after a backoff that
// doubles per consecutive failure (RetryBackoff up to MaxRetryBackoff),
// while the other partitions keep processing. A poison record thus fails
// again at each retry, visible in Failures and the log, without stopping
// anything else. Goroutine-safe and non-blocking. Partitions not owned any
// more are ignored.
func (c *Consumer) PartitionFailed(tp TopicPartition, err error) {
	c.mu.Lock()
	if !c.owned[tp] {
		c.mu.Unlock()
		return
	}
	f := c.failed[tp]
	now := time.Now()
	if f == nil {
		f = &Failure{TopicPartition: tp, Since: now}
		if prev := c.streak[tp]; prev != nil && now.Sub(prev.RetryAt) < healthyAfter {
			f.Attempts, f.Since = prev.Attempts, prev.Since
		}
		c.failed[tp] = f
		c.streak[tp] = f
	}
	f.Err = err
	f.Attempts++
	if f.Evicted { // an evicted partition's restart failed: a failure from here
		f.Evicted = false
		c.streak[tp] = f
	}
	wait := retryWait(c.cfg.RetryBackoff, c.cfg.MaxRetryBackoff, f.Attempts)
	f.RetryAt = now.Add(wait)
	attempts := f.Attempts
	// Paused under the lock that recorded the failure: a revoke or a loss
	// (stop) racing this one either sees the partition not failed yet and
	// finds it not owned here, or deletes the failure and resumes after
	// this pause. Paused after the unlock, a stop in between resumed first
	// and the pause, which kgo keeps across assignments, stayed: a later
	// assignment of the partition here never fetched it.
	// Its budget goes with its copy (its in-flight records die with its
	// subtree; the restart tracks a new one at its seek): a release of the
	// stopped copy's records would resume the partition (Budget.Done), and
	// kgo would fetch it for nobody. Removed before the pause: a release
	// between a pause and the removal resumed it (found by a review); after
	// the removal a release resumes nothing.
	c.fc.Remove(tp, func() {})
	c.cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	c.mu.Unlock()
	if testHookFailedRecorded != nil {
		testHookFailedRecorded(tp)
	}
	c.log.Error("partition failed; the other partitions keep processing; it starts again after a backoff from its last committed state",
		zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int("consecutive_failures", attempts),
		zap.Duration("retry_in", wait), zap.Error(err))
	select {
	case c.retry <- struct{}{}:
	default:
	}
}

// retryWait is the backoff before the attempts-th restart: first doubled
// attempts-1 times, at most the most (doubled in steps: a shift overflowed a
// first backoff of some 39 hours into a negative wait, a restart at once).
func retryWait(first, most time.Duration, attempts int) time.Duration {
	wait := first
	for i := 1; i < attempts && wait < most; i++ {
		if wait > most/2 {
			return most // doubling would pass most, or overflow
		}
		wait *= 2
	}
	return min(wait, most)
}

// defaultSessionTimeout is kgo's session.timeout.ms and the broker's
// group.consumer.session.timeout.ms (KIP-848) default.
const defaultSessionTimeout = 45 * time.Second

// evictionWait is how long an evicted partition waits for the consumer's
// membership to change before it is started again under the same one: the
// session timeout, by when kgo's heartbeats have reached a coordinator
// that would have refused them as well, had it evicted this member. Under
// KIP-848 the broker's group config sets it, which the client does not
// know: the default, unless the configured one is longer.
func (c *Consumer) evictionWait() time.Duration {
	if c.cfg.Protocol == ConsumerProtocol {
		return max(c.cfg.SessionTimeout, defaultSessionTimeout)
	}
	if c.cfg.SessionTimeout > 0 {
		return c.cfg.SessionTimeout
	}
	return defaultSessionTimeout
}

// PartitionEvicted isolates a partition whose commit the group coordinator
// refused because it no longer knows this member
// (snapshotstore.ErrEvicted: its session expired, e.g. while the
// coordinator failed over) before kgo learned it: its subtree has stopped
// without flushing, nothing of the commit landed. Not a failure: its
// fetches pause, it stays owned, and it waits for the consumer's
// membership to change — kgo's next heartbeat is refused the same way, kgo
// rejoins as a new member, the watcher stops the partition as lost, and
// the next assignment starts it again from its committed offset (here, or
// on its new owner). Only if the membership is unchanged a session timeout
// later (a refusal kgo's heartbeats never confirmed) and the group
// coordinator lists the member again (stillMember) is it started again as
// a failed partition would be. Not sooner: a restart's InitProducerID
// fences the partition's new owner's producer (which then aborts and
// redoes its transaction), and an evicted member restarting at a backoff
// would do that at every attempt until kgo noticed. Goroutine-safe and
// non-blocking; partitions not owned any more are ignored.
func (c *Consumer) PartitionEvicted(tp TopicPartition, err error) {
	c.mu.Lock()
	if !c.owned[tp] {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	wait := c.evictionWait()
	retryAt := now.Add(wait)
	if u := c.own.EvictedUntil(tp); !u.IsZero() {
		// Refused by an earlier refusal's mark (Ownership.Evict): it
		// starts again with that refusal's partition, not a wait later.
		retryAt = u
	}
	f := c.failed[tp]
	if f == nil {
		f = &Failure{TopicPartition: tp, Since: now, Evicted: true}
		c.failed[tp] = f
	}
	f.Err = err
	f.RetryAt = retryAt
	// Under the lock, as PartitionFailed's budget and pause (see there).
	c.fc.Remove(tp, func() {})
	c.cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	c.mu.Unlock()
	c.log.Warn("partition stopped: the group coordinator evicted this member; it starts again once the consumer has rejoined the group and been given it",
		zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Duration("restart_unless_rejoined_in", retryAt.Sub(now)),
		zap.Error(err))
	// The member's other partitions: their writes are refused from here
	// as this one's commit was (each then stops and waits the same way),
	// not only when their own commits reach the coordinator or kgo's next
	// heartbeat is refused. Only the broker's refusal marks: a refusal by
	// the mark itself carries no membership of its own (and marking again
	// from the live binding could hit a newer one).
	if m, ok := refusedMembership(err); ok {
		if marked := c.own.Evict(m, retryAt); len(marked) > 1 {
			c.log.Warn("the member's other partitions write nothing more under the evicted membership; each stops at its next write and waits for the rejoin",
				zap.String("member", m.MemberID), zap.Int32("generation", m.Generation), zap.Int("partitions", len(marked)),
				zap.Time("until", retryAt))
		}
	}
	c.kickWatcher()
	select {
	case c.retry <- struct{}{}:
	default:
	}
}

// refusedMembership is the membership a refused commit carried, when err
// says (a *snapshotstore.FencedError).
func refusedMembership(err error) (snapshotstore.GroupMetadata, bool) {
	var fe *snapshotstore.FencedError
	if errors.As(err, &fe) && fe.Meta.MemberID != "" {
		return fe.Meta, true
	}
	return snapshotstore.GroupMetadata{}, false
}

// probeBound bounds the question stillMember asks the group coordinator: it
// runs before the restart takes the rebalance lock, but a pass of
// restartFailed waits for it.
const probeBound = 5 * time.Second

// memberProbes memoises stillMember's answers within one pass of
// restartFailed, per membership, for a backoff at most (a pass can take a
// while: each restart has its bound).
type memberProbes map[snapshotstore.GroupMetadata]memberProbe

type memberProbe struct {
	answer memberAnswer
	at     time.Time
}

// memberAnswer is stillMember's answer; its zero value holds the restart
// back.
type memberAnswer int

const (
	memberUnknown     memberAnswer = iota // no answer (unreachable, stopping): wait
	memberNotListed                       // the coordinator does not list it: wait
	memberListedAgain                     // listed, or the question refused: start
)

// stillMember is asked before an evicted partition (or a failed one whose
// binding an eviction marked) starts again under the membership m, kgo
// still reporting m after the eviction wait: a restart's InitProducerID
// fences the partition's new owner (it aborts the new owner's open
// transaction), so it runs only when the group coordinator lists m's member
// again (a refusal kgo's heartbeats never confirmed). When the coordinator
// does not list it — kgo has not learned the eviction, e.g. its heartbeat is
// stuck on a connection — or cannot be reached, the partition waits another
// backoff; a coordinator that refuses the question (no DESCRIBE on the group
// or its topics, a request it does not support) leaves the restart to go
// ahead, as it did before this check.
func (c *Consumer) stillMember(ctx context.Context, tp TopicPartition, m snapshotstore.GroupMetadata, f *Failure, memo memberProbes) memberAnswer {
	if p, ok := memo[m]; ok && time.Since(p.at) < c.cfg.RetryBackoff {
		c.mu.Lock()
		f.answer, f.asked = p.answer, true // logged for the partition that asked
		c.mu.Unlock()
		return p.answer
	}
	probe := c.probeMember
	if probe == nil {
		probe = func(ctx context.Context, m snapshotstore.GroupMetadata) (bool, error) {
			return c.memberListedAs(ctx, c.cfg.Protocol, m)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, min(c.restartBound(), probeBound))
	defer cancel()
	listed, err := probe(pctx, m)
	if ctx.Err() != nil {
		return memberUnknown // stopping: nothing to say
	}
	a := memberListedAgain
	switch {
	case err != nil && refusedQuestion(err):
	case err != nil:
		a = memberUnknown
	case !listed:
		a = memberNotListed
	}
	c.mu.Lock()
	lvl := zap.DebugLevel
	if !f.asked || a != f.answer {
		lvl = zap.WarnLevel // a new answer
	}
	f.answer, f.asked = a, true
	c.mu.Unlock()
	fields := []zap.Field{zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.String("member", m.MemberID)}
	switch a {
	case memberListedAgain:
		if err != nil {
			c.log.Log(lvl, "the group coordinator refuses to say whether this member is still in the group; starting the partition again", append(fields, zap.Error(err))...)
		}
	case memberUnknown:
		c.log.Log(lvl, "cannot ask the group coordinator whether this member is still in the group; the partition waits (starting it could fence its new owner; the same answer again at debug)",
			append(fields, zap.Duration("retry_in", c.cfg.RetryBackoff), zap.Error(err))...)
	case memberNotListed:
		c.log.Log(lvl, "the group coordinator does not list this member, though the consumer has not learned it; the partition waits (starting it would fence its new owner; the same answer again at debug)",
			append(fields, zap.Duration("retry_in", c.cfg.RetryBackoff))...)
	}
	if memo != nil {
		memo[m] = memberProbe{answer: a, at: time.Now()}
	}
	return a
}

// refusedQuestion: the coordinator will not answer stillMember's question,
// now or later.
func refusedQuestion(err error) bool {
	return errors.Is(err, kerr.GroupAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.UnsupportedVersion)
}

// memberListedAs asks the group coordinator whether it lists m's member
// (read-only: the DESCRIBE on the group that the offset fetch needs too):
// under KIP-848 ConsumerGroupDescribe and, unless it lists the member,
// DescribeGroups too (kgo falls back to the classic protocol by itself
// against a broker without KIP-848; ConsumerGroupDescribe then answers
// GROUP_ID_NOT_FOUND, or kgo refuses it as too new for the broker). The
// answers are read by decideListed.
func (c *Consumer) memberListedAs(ctx context.Context, proto Protocol, m snapshotstore.GroupMetadata) (bool, error) {
	has := func(id string) bool { return id == m.MemberID }
	var d848 groupDescription
	if proto == ConsumerProtocol {
		ds, err := c.adm.DescribeConsumerGroups(ctx, c.cfg.Group)
		if err == nil {
			err = ds.Error()
		}
		d848.err = err
		if err == nil {
			g := ds[c.cfg.Group]
			d848.listed = slices.ContainsFunc(g.Members, func(mem kadm.ConsumerGroupMember) bool { return has(mem.MemberID) })
		}
		if d848.listed {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
	}
	ds, err := c.adm.DescribeGroups(ctx, c.cfg.Group)
	if err == nil {
		err = ds.Error()
	}
	dClassic := groupDescription{err: err}
	if err == nil {
		g := ds[c.cfg.Group]
		dClassic.dead = g.State == "Dead"
		dClassic.listed = slices.ContainsFunc(g.Members, func(mem kadm.DescribedGroupMember) bool { return has(mem.MemberID) })
	}
	return decideListed(proto, d848, dClassic)
}

// groupDescription is one description's answer for memberListedAs.
type groupDescription struct {
	err    error
	listed bool // the member is among the group's
	dead   bool // classic: the group is described as Dead (no such classic group)
}

// decideListed reads memberListedAs's descriptions (d848 only under
// KIP-848): listed if either lists the member; "not listed" only from a
// description that returned the group, or from both saying there is no such
// group; otherwise an error, a refused question's (refusedQuestion) if
// either was refused.
func decideListed(proto Protocol, d848, dClassic groupDescription) (bool, error) {
	if d848.listed || dClassic.listed {
		return true, nil
	}
	if proto != ConsumerProtocol {
		return false, dClassic.err // nil: the classic description answered
	}
	noGroup := func(d groupDescription) bool { return errors.Is(d.err, kerr.GroupIDNotFound) }
	switch {
	case d848.err == nil:
		return false, nil // ConsumerGroupDescribe returned the group without the member
	case noGroup(d848) && (dClassic.err == nil || noGroup(dClassic)):
		return false, nil // neither kind of group lists it (a Dead or empty classic group, or none)
	case refusedQuestion(d848.err):
		return false, d848.err // not allowed to ask; DescribeGroups of a KIP-848 group says GROUP_ID_NOT_FOUND
	case dClassic.err == nil && !dClassic.dead:
		return false, nil // the classic description returned the group without the member
	case dClassic.err == nil:
		// Dead: an older DescribeGroups' answer for a KIP-848 group too,
		// not evidence when ConsumerGroupDescribe could not answer.
		return false, fmt.Errorf("ConsumerGroupDescribe: %w (DescribeGroups: no classic group)", d848.err)
	}
	return false, fmt.Errorf("%w (ConsumerGroupDescribe: %w)", dClassic.err, d848.err)
}

// Failures returns the failed partitions waiting to be started again.
func (c *Consumer) Failures() []Failure {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Failure, 0, len(c.failed))
	for tp, f := range c.failed {
		g := *f
		g.Committed, g.HighWatermark = -1, -1
		if s, ok := c.started[tp]; ok {
			g.Committed = s.committed
		}
		if h, ok := c.hwm[tp]; ok {
			g.HighWatermark = h
		}
		out = append(out, g)
	}
	return out
}

// restartFailed starts failed partitions again when their backoff is due.
func (c *Consumer) restartFailed(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		var due []TopicPartition
		next := time.Hour
		now := time.Now()
		for tp, f := range c.failed {
			if d := f.RetryAt.Sub(now); d <= 0 {
				due = append(due, tp)
			} else {
				next = min(next, d)
			}
		}
		c.mu.Unlock()
		memo := memberProbes{} // one question per membership per pass
		for _, tp := range due {
			c.restartWith(ctx, tp, memo)
		}
		if len(due) > 0 {
			continue
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-c.retry:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// restartBound bounds a restart's Open, offset fetch and Start: what the
// rebalance timeout leaves beside a revoke's teardown bound (a third of it
// by default), at least a second.
func (c *Consumer) restartBound() time.Duration {
	return max(c.cfg.RebalanceTimeout-c.cfg.TeardownTimeout, time.Second)
}

// restartResolveAfter is how long a restart's offset fetch waits out
// unstable offsets before it looks for hanging transactions: within its
// bound, a third of it at most, so that every restart looks (with
// HangingTxnResolveAfter's 10 s against a bound of a few seconds, a
// partition held by a hanging transaction never started again: found by a
// review).
func (c *Consumer) restartResolveAfter() time.Duration {
	if c.cfg.HangingTxnResolveAfter < 0 {
		return c.cfg.HangingTxnResolveAfter
	}
	return min(c.cfg.HangingTxnResolveAfter, c.restartBound()/3)
}

// heldBackByTheCoordinator asks the group coordinator, for an evicted
// partition (or a failed one whose binding an eviction marked), whether the
// membership it would start under is listed again (stillMember), and holds
// the restart back a backoff when not. Before the rebalance lock: the
// question may take its bound, and a revoke waiting for the lock must fit
// the rebalance timeout beside the restart's own bound. What changes
// meanwhile (a rejoin, a loss) the restart's checks under the lock see.
func (c *Consumer) heldBackByTheCoordinator(ctx context.Context, tp TopicPartition, memo memberProbes) bool {
	c.mu.Lock()
	f := c.failed[tp]
	evicted := f != nil && c.owned[tp] && f.Evicted
	c.mu.Unlock()
	if f == nil || !evicted && !c.own.WasEvicted(tp) {
		return false
	}
	m, err := c.meta.Current()
	if err != nil || c.own.Check(tp, m) != nil {
		return false // the checks under the lock handle it
	}
	// The binding asked about, read before the question: a rejoin may
	// bind tp anew meanwhile, and its membership is not the one answered.
	b, _ := c.own.Bound(tp)
	a := c.stillMember(ctx, tp, m, f, memo)
	if a == memberListedAgain {
		return false
	}
	next := time.Now().Add(c.cfg.RetryBackoff)
	if cur, ok := c.own.Bound(tp); ok && cur == b && a == memberNotListed {
		// The coordinator says the member is gone: the partitions bound
		// with this one that did not write while the mark lasted stay
		// refused (a partition assigned later, at a newer generation, is
		// not marked; nor is anything when the coordinator could not be
		// asked).
		c.own.Evict(b, next)
	}
	c.mu.Lock()
	f.RetryAt = next
	c.mu.Unlock()
	return true
}

// restartWith starts one failed partition again, under the rebalance lock (no
// callback runs meanwhile), only while it is still owned under the
// membership it was assigned under. memo holds the pass's answers of the
// group coordinator (stillMember; nil: none).
func (c *Consumer) restartWith(ctx context.Context, tp TopicPartition, memo memberProbes) {
	if c.heldBackByTheCoordinator(ctx, tp, memo) {
		return
	}
	c.rebalance.Lock()
	defer c.rebalance.Unlock()
	c.mu.Lock()
	f := c.failed[tp]
	owned := c.owned[tp]
	c.mu.Unlock()
	if f == nil || c.closing || ctx.Err() != nil {
		return
	}
	if !owned {
		c.mu.Lock()
		delete(c.failed, tp)
		c.mu.Unlock()
		return
	}
	m, err := c.meta.Current()
	if err == nil {
		err = c.own.Check(tp, m)
	}
	if err != nil {
		// Lost: the watcher or the next callback stops it. Until then, not
		// due again at once (restartFailed would spin on it). Marked
		// evicted (a failed partition of a member whose commit was refused
		// meanwhile): not before the mark ends, as the evicted ones — a
		// restart's InitProducerID would fence the partition's new owner.
		retryAt := time.Now().Add(c.cfg.RetryBackoff)
		if u := c.own.EvictedUntil(tp); !u.IsZero() {
			retryAt = u
		}
		c.mu.Lock()
		f.RetryAt = retryAt
		c.mu.Unlock()
		return
	}
	c.log.Info("starting a failed partition again", zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition),
		zap.Int("consecutive_failures", f.Attempts))
	// The rebalance lock is held from here (the fence of Open must not race
	// a revoke), so a revoke callback waits for this restart and then takes
	// up to TeardownTimeout itself: bounded so that both fit the rebalance
	// timeout. Unbounded, an InitProducerID retrying against a broker that
	// is down, or an offset fetch waiting out a hanging transaction, held
	// every rebalance of the member back (a failed restart is retried
	// after its backoff).
	rctx, cancel := context.WithTimeout(ctx, c.restartBound())
	defer cancel()
	// The failed copy has stopped, or its report is being made: Stop waits
	// for that, and stops a copy still listed. A failure recorded while a
	// copy ran (a second report of one copy, landing after the restart
	// before it had deleted the failure) made the next restart start a
	// second copy beside it (found by a review).
	sctx, scancel := context.WithTimeout(rctx, min(c.cfg.TeardownTimeout, c.restartBound()/2)) // the rest for Open and Start
	c.h.Stop(sctx, []TopicPartition{tp}, false)
	scancel()
	// Not bound again: the restarted copy writes under its assignment's
	// token (Consumer.Writes), as the failed copy did, which has stopped.
	c.readInputCount(rctx) // the count it starts under (routeCheck)
	err = c.h.Open(rctx, []TopicPartition{tp})
	var offsets map[TopicPartition]snapshotstore.Assignment
	if err == nil {
		offsets, err = c.assignedOffsets(rctx, []TopicPartition{tp}, c.restartResolveAfter())
	}
	if err == nil {
		// Fetch from the committed offset again, with no poll's delivery
		// in progress (seekAssigned).
		c.deliver.Lock()
		c.seekAssigned([]TopicPartition{tp}, offsets) // a new start, from offsets
		c.fc.Track(tp)
		// Not failed from before the start: a failure the new copy
		// reports during or right after it is its own (it was deleted
		// with this one after the start, leaving the partition owned,
		// running nothing, and never restarted).
		c.mu.Lock()
		delete(c.failed, tp)
		c.mu.Unlock()
		err = c.h.Start(rctx, offsets)
		if err != nil {
			c.mu.Lock()
			if c.failed[tp] == nil && c.owned[tp] {
				c.failed[tp] = f
			}
			c.mu.Unlock()
		}
		c.deliver.Unlock()
	}
	if err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.TeardownTimeout)
		// Closes an opened store: it has started no transaction, so there
		// is no re-initialisation for its Close to wait for.
		c.h.Stop(sctx, []TopicPartition{tp}, false)
		cancel()
		if ctx.Err() != nil {
			return // stopping: the partition's own failure stays the one reported
		}
		if f.Evicted && rctx.Err() != nil {
			// The bound, not a failure: an evicted partition waits again.
			c.log.Warn("starting an evicted partition again did not finish within the restart's bound; trying again after a backoff",
				zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Duration("bound", c.restartBound()), zap.Error(err))
			c.mu.Lock()
			f.RetryAt = time.Now().Add(c.cfg.RetryBackoff)
			c.mu.Unlock()
			return
		}
		if f.Evicted {
			// An eviction is not a failure; this is: it becomes the one
			// reported, through the path of every other failure.
			ferr := fmt.Errorf("%s[%d]: starting it again after an eviction: %w", tp.Topic, tp.Partition, err)
			c.log.Warn("starting an evicted partition again failed", // the failure's path logs it at error
				zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
			c.failPartition(tp, ferr)
			return
		}
		// The partition's own failure stays the one reported (Run's caller
		// gets it); the restart's cause goes to the log. Through OnFailure,
		// as every failure: a restart that keeps failing (a broker down in
		// Open, an offset fetch held) is counted in the worker's failure
		// metric, which stood still while the partition was down.
		// At warn: PartitionFailed logs the retry at error.
		c.log.Warn("starting a failed partition again failed",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
		c.failPartition(tp, f.Err)
		return
	}
	c.resumeAfterSeek([]TopicPartition{tp})
}
