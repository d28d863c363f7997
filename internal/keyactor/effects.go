package keyactor

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow/internal/logkey"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// A call of the user's code (a fold or a timer) takes effect only if it
// returns without error: the outputs it emits and the timers it sets or
// cancels are buffered during the call and applied after it, and under the
// Skip policy the state it may have mutated in place is restored from its
// encoding. So a skipped record or timer leaves no effect, and a failing
// one (policy Fail) emits nothing either.

// effects are the buffered side effects of the call in progress.
type effects struct {
	emits  []*kgo.Record
	timers []timerOp
}

// timerOp is a buffered SetTimer (cancel false) or CancelTimer.
type timerOp struct {
	name   string
	at     time.Time
	cancel bool
}

// applyEffects runs the buffered effects in call order. Outputs go to the
// outbox in the transactional mode; otherwise to the application's
// producer, held at input offset k.cur (-1 in a timer) until acknowledged.
func (k *Core) applyEffects() {
	for _, op := range k.fx.timers {
		if op.cancel {
			k.cancelTimer(op.name)
		} else {
			k.setTimer(op.name, op.at)
		}
	}
	if k.env.TxnOutputs && len(k.outbox) == 0 && len(k.fx.emits) > 0 {
		// The key's next write carries them: hand the array over (the
		// common case, one call's outputs per write) instead of copying
		// them into a new one, one allocation fewer per emitting key.
		k.outbox, k.fx.emits = k.fx.emits, nil
		k.outboxAdded(k.outbox)
	}
	for _, rec := range k.fx.emits {
		if k.env.TxnOutputs {
			k.toOutbox(rec) // the key's next write carries it
			continue
		}
		k.produce(rec, k.cur)
	}
	k.discardEffects()
}

// discardEffects drops the buffered effects and returns how many outputs
// were dropped.
func (k *Core) discardEffects() int {
	n := len(k.fx.emits)
	clear(k.fx.emits) // release the records
	k.fx.emits, k.fx.timers = k.fx.emits[:0], k.fx.timers[:0]
	return n
}

// undo is the encoding of the state at the start of a call, kept under the
// Skip policy to restore it when the call fails. It stays valid (and is
// reused without encoding again) until a call succeeds.
type undo struct {
	valid bool
	null  bool   // the state is nil
	data  []byte // its encoding otherwise
}

// undoError is a failure to take or restore the undo encoding: it fails the
// key whatever the policy.
type undoError struct{ err error }

func (e *undoError) Error() string { return e.err.Error() }
func (e *undoError) Unwrap() error { return e.err }

// keep records the encoding of the current state, already made by the
// caller (a persist, an unload, a loaded snapshot).
func (a *keyActor[S]) keep(s snapshotstore.Snapshot) {
	a.undo = undo{valid: true, null: s.Tombstone(), data: s.Value}
}

// beginCall prepares a call: under Skip it makes sure the undo encoding is
// current, which costs one Codec.Encode per call after a successful one.
func (a *keyActor[S]) beginCall() error {
	if !a.cfg.mayRestore() || a.undo.valid {
		return nil
	}
	if a.state == nil {
		a.undo = undo{valid: true, null: true}
		return nil
	}
	b, err := a.encodeState()
	if err != nil {
		return &undoError{fmt.Errorf("encode state to undo a failing call (policy skip): %w", err)}
	}
	a.undo = undo{valid: true, data: b}
	return nil
}

// endCall takes the outcome of a call: on success the new state and the
// buffered effects; on error nothing, the state restored under Skip. The
// error returned is the call's (an *undoError when the restore failed).
func (a *keyActor[S]) endCall(ns *S, err error) error {
	next := undo{} // the new state's encoding, when made here
	switch {
	case err != nil || a.env.MaxSnapshotBytes <= 0 || !a.cfg.mayRestore():
	case ns == nil:
		// A deleted state's snapshot keeps the key's timers (an empty
		// value marked deleted): only they can make it too large.
		next = undo{valid: true, null: true}
		if len(a.timers)+len(a.fx.timers) > 0 {
			err = a.callStateTooLarge(nil)
		}
	default:
		// The new state's encoding, made now instead of by the next
		// call's beginCall or the next write (which reuse it), is checked
		// against the snapshot's limit (statesize.go): a state that would
		// not fit is this call's failure, which the policy undoes. An
		// encoding error is left to the write, which fails the key naming
		// the offset (encode), as without the check.
		if b, eerr := a.flow.Codec.Encode(ns); eerr == nil {
			if b == nil {
				b = []byte{}
			}
			next = undo{valid: true, data: b}
			err = a.callStateTooLarge(b)
		}
	}
	if err == nil {
		a.state = ns
		a.undo = next
		a.applyEffects()
		return nil
	}
	dropped := a.discardEffects()
	if !a.cfg.policyFor(err).restores() {
		a.undo.valid = false // the call may have mutated the state (the key fails)
		return err
	}
	a.droppedOutputs = dropped
	if a.undo.null {
		a.state = nil
		return err
	}
	s, derr := a.flow.Codec.Decode(a.undo.data)
	if derr != nil {
		return &undoError{fmt.Errorf("%w; decode state to undo it (policy skip): %w", err, derr)}
	}
	a.state = s
	return err
}

// callFailed skips a failed call under Skip (and DeadLetter: a timer or a
// load hook has no record to dead-letter), or fails the key. err names the
// call's position.
func (a *keyActor[S]) callFailed(ctx actor.Context, err error, what string) {
	var ue *undoError
	pol := a.cfg.policyFor(err)
	if !pol.restores() || errors.As(err, &ue) {
		a.fail(ctx, err)
		return
	}
	if a.env.OnSkip != nil {
		a.env.OnSkip(a.key, err)
	}
	a.env.Logger.Warn(what+" failed; skipped with no effect (policy "+pol.String()+")", zap.Error(err), zap.Int("outputs_dropped", a.droppedOutputs))
}

// recordFailed handles a failed fold of rec: dead-lettered under
// DeadLetter, else as callFailed.
func (a *keyActor[S]) recordFailed(ctx actor.Context, rec *kgo.Record, err error) {
	var ue *undoError
	if a.cfg.policyFor(err) != DeadLetter || errors.As(err, &ue) {
		a.callFailed(ctx, err, "fold")
		if a.failed == nil {
			// Skipped: remembered in the key's next snapshot, as a dead
			// letter is, so that a replay does not fold the record again —
			// a fold that succeeds the second time (a transient error, a
			// clock read) took effect after the skip was logged (found by a
			// review).
			a.lastFolded = rec.Offset
			a.markDirty(rec.Offset)
		}
		return
	}
	kind, what := KindFoldError, "fold failed"
	if errors.Is(err, ErrUndecodable) {
		kind, what = KindUndecodable, "record undecodable"
	}
	a.env.Logger.Warn(what+"; record sent to the dead-letter topic with no other effect (policy dead-letter)",
		zap.Int64("offset", rec.Offset), zap.String("key", logkey.Clip(a.key)), zap.Error(err), zap.Int("outputs_dropped", a.droppedOutputs))
	a.deadLetter(ctx, rec, kind, err)
}

// deadLetter writes rec's dead letter and marks rec handled: the key's
// next snapshot covers its offset, so a replay neither folds nor
// dead-letters it again, and the key holds the offset until that snapshot
// (transactional mode: with the dead letter in its transaction) or the
// dead letter's acknowledgement (plain mode) is persisted.
func (k *Core) deadLetter(ctx actor.Context, rec *kgo.Record, kind Kind, err error) {
	topic := k.cfg.deadLetterTopic(k.env.Topic)
	cl, max, rules := k.deadLetterProducer(topic)
	src, stamp := k.restamp(rules, topic, rec)
	if stamp != nil && max > 0 {
		max -= len(stamp.Key) + len(stamp.Value) + recbytes.HeaderFraming // its room, kept when the rest shrinks
	}
	dl, omitted := k.cfg.DeadLetterRecord(topic, src, kind, err, k.Now(), max)
	if stamp != nil {
		dl.Headers = append(dl.Headers, *stamp)
	}
	if omitted != "" {
		// The record with its error headers would not fit the producer's
		// record batch, and its transaction (or produce) would fail at
		// every attempt: the dead letter keeps where to read the rest.
		k.env.Logger.Warn("dead letter shrunk to fit the producer's record batch",
			zap.String("source", fmt.Sprintf("%s[%d] offset %d", rec.Topic, rec.Partition, rec.Offset)),
			zap.String("key", logkey.Clip(k.key)), zap.Int("max_bytes", max), zap.String("omitted", omitted))
	}
	if !k.sendDeadLetter(ctx, cl, dl, rec.Offset, fmt.Sprintf("%s[%d] offset %d key %s", rec.Topic, rec.Partition, rec.Offset, logkey.Quote(k.key)), err) {
		return
	}
	k.lastFolded = rec.Offset
	k.markDirty(rec.Offset)
}

// HeaderSourceTime is keyflow.HeaderErrorSourceTime.
const HeaderSourceTime = "actorflow.errors.source.time"

// restamp is rec, the source of a dead letter to topic, or, when topic's
// brokers (by the dead letter's producer's rules) would refuse its timestamp (TopicRules.CheckTimestamp: a record
// from far in the past or future), a copy without it, which the producer
// stamps with its clock, and the header HeaderSourceTime keeping the
// original, for the caller to add after the dead letter's own headers
// (where a shrink to fit leaves it): a dead letter refused at every
// attempt would stop its partition for ever.
func (k *Core) restamp(rules func(string) snapshotstore.TopicRules, topic string, rec *kgo.Record) (*kgo.Record, *kgo.RecordHeader) {
	if rec.Timestamp.IsZero() || rules == nil {
		return rec, nil
	}
	err := rules(topic).CheckTimestampNow(rec.Timestamp)
	if err == nil {
		return rec, nil
	}
	k.env.Logger.Warn("dead letter stamped with the producer's clock: its topic's brokers would refuse the source record's timestamp, which header "+HeaderSourceTime+" keeps",
		zap.String("source", fmt.Sprintf("%s[%d] offset %d", rec.Topic, rec.Partition, rec.Offset)), zap.String("dead_letter_topic", topic), zap.Error(err))
	c := *rec
	c.Timestamp = time.Time{}
	return &c, &kgo.RecordHeader{Key: HeaderSourceTime, Value: strconv.AppendInt(nil, rec.Timestamp.UnixMilli(), 10)}
}

// sendDeadLetter hands dl to the key's next write (transactional mode) or
// produces it through cl, holding input offset at (-1: none) until it is
// acknowledged (plain mode); false when the key failed (no producer; where
// names the source in the error).
func (k *Core) sendDeadLetter(ctx actor.Context, cl *kgo.Client, dl *kgo.Record, at int64, where string, err error) bool {
	if k.env.TxnOutputs {
		k.toOutbox(dl) // the key's next write carries it
		return true
	}
	if cl == nil {
		k.fail(ctx, fmt.Errorf("%s: %w (%v)", where, ErrNoDeadLetterProducer, err))
		return false
	}
	k.produceVia(cl, dl, at)
	return true
}

// deadLetterProducer is the producer of the plain mode's dead letters to
// topic (nil under TxnOutputs, or with none), the largest record batch a
// dead letter's producer sends there (0: unchecked) and that producer's
// topic rules (nil: unknown): the store's transactional producer under
// TxnOutputs, else Env.DeadLetters (the worker's, on the store's cluster),
// else the flow's output producer.
func (k *Core) deadLetterProducer(topic string) (*kgo.Client, int, func(string) snapshotstore.TopicRules) {
	switch {
	case k.env.TxnOutputs:
		return nil, k.MaxOutputBytes(topic), k.env.TopicRules
	case k.env.DeadLetters != nil:
		n := 0
		if fn := k.env.DeadLetterMaxBytes; fn != nil {
			n = fn(topic)
		}
		return k.env.DeadLetters, topicBound(k.env.TopicRules, topic, n), k.env.TopicRules
	default:
		return k.cfg.Output, k.MaxOutputBytes(topic), k.env.OutputRules // the flow's output producer's
	}
}
