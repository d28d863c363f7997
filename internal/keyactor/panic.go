package keyactor

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// ErrPanicked is matched by the failure of a key whose fold, timer or load
// hook panicked. A panic fails the key's partition whatever the policy (it
// is a bug in the flow, not bad input a policy may skip), naming the
// topic, partition, offset (for a fold), key and call; the stack goes to
// the log.
var ErrPanicked = errors.New("panic in the flow")

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
