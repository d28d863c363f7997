package keyactor

import (
	"fmt"
	"runtime/debug"

	"github.com/actorflow/actorflow/internal/panicerr"
	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// ErrPanicked is matched by the failure of a key whose fold, timer or load
// hook panicked. A panic fails the key's partition whatever the policy (it
// is a bug in the flow, not bad input a policy may skip), naming the
// topic, partition, offset (for a fold), key and call; the stack goes to
// the log.
var ErrPanicked = panicerr.ErrPanicked

// protect runs fn and returns what it panicked with, and the stack (nil
// when it did not panic).
func protect(fn func()) (v any, stack []byte) {
	defer func() {
		if r := recover(); r != nil {
			v, stack = r, debug.Stack()
		}
	}()
	fn()
	return nil, nil
}

// panicked fails the key for a panic of the call named where. Its effects
// are not applied: the key is failed, and its partition stops.
func (k *Core) panicked(ctx actor.Context, where string, v any, stack []byte) {
	err := fmt.Errorf("%s: %w: %v", where, ErrPanicked, v)
	k.env.Logger.Error("the flow panicked; failing its partition", zap.Error(err), zap.ByteString("stack", stack))
	k.fail(ctx, err)
}

// GuardCodec returns c with its panics turned into errors matching
// ErrPanicked (a *codecPanic, whose stack the key's failure logs): a panic
// of the flow's Codec — a custom one, or a MarshalJSON that panics —
// escaped the key actor's guards, and its partition failed naming neither
// the offset nor the call, with no stack (found by a review). The callers
// fail the key on an encode or decode error, naming it.
func GuardCodec[S any](c Codec[S]) Codec[S] {
	if g, ok := c.(guardedCodec[S]); ok {
		return g
	}
	return guardedCodec[S]{c}
}

type guardedCodec[S any] struct{ c Codec[S] }

func (g guardedCodec[S]) Encode(s *S) (b []byte, err error) {
	if v, stack := protect(func() { b, err = g.c.Encode(s) }); stack != nil {
		return nil, &codecPanic{op: "encode", v: v, stack: stack}
	}
	return b, err
}

func (g guardedCodec[S]) Decode(data []byte) (s *S, err error) {
	if v, stack := protect(func() { s, err = g.c.Decode(data) }); stack != nil {
		return nil, &codecPanic{op: "decode", v: v, stack: stack}
	}
	return s, err
}

// codecPanic is a panic of the flow's Codec.
type codecPanic struct {
	op    string
	v     any
	stack []byte
}

func (e *codecPanic) Error() string { return fmt.Sprintf("codec %s: %v: %v", e.op, ErrPanicked, e.v) }

// Is makes errors.Is(err, ErrPanicked) true.
func (e *codecPanic) Is(target error) bool { return target == ErrPanicked }

// Guard runs fn, a call into the store on a goroutine of the runtime's own
// (a store's Open, a transaction's commit, the recovery read), and turns a
// panic there into fn's error, matching ErrPanicked, its stack logged. User
// code runs in those calls: an application's store, and in the Kafka store
// the output partitioner when kgo calls it synchronously in Produce (on
// its own goroutines the store recovers it: snapshotstore/outputs.go).
// Outside any actor such a panic escaped supervision and ended
// the process, where a fold's panic fails only its partition (found by a
// review).
func Guard(log *zap.Logger, what string, fn func() error) (err error) {
	if v, stack := protect(func() { err = fn() }); stack != nil {
		err = fmt.Errorf("%s: %w: %v", what, ErrPanicked, v)
		log.Error("a store call panicked; failing its partition", zap.Error(err), zap.ByteString("stack", stack))
	}
	return err
}
