package keyflow

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ErrNoOutput is returned by Context.Emit when the flow has no producer
// (WithOutput).
var ErrNoOutput = errors.New("keyflow: no output producer configured (WithOutput)")

// ErrNoTimerHandler is returned by Context.SetTimer when the flow has no
// timer handler (WithTimers).
var ErrNoTimerHandler = errors.New("keyflow: no timer handler configured (WithTimers)")

// Context is a key's handle inside FoldFunc and TimerFunc. It is only valid
// during the call; it must not be retained or used from another goroutine.
type Context struct{ k *keyCore }

// Key returns the key being folded.
func (c *Context) Key() string { return c.k.key }

// Topic returns the input topic.
func (c *Context) Topic() string { return c.k.env.Topic }

// Partition returns the input partition.
func (c *Context) Partition() int32 { return c.k.env.Partition }

// Logger returns the partition's logger with the key attached.
func (c *Context) Logger() *zap.Logger { return c.k.env.Logger.With(zap.String("key", c.k.key)) }

// SetTimer schedules the processing-time timer name to fire at `at` (now if
// in the past), replacing a timer of the same name. It fires on the key's
// actor through the flow's TimerFunc. A key with pending timers is not
// unloaded. The timer is set when the fold (or timer) calling SetTimer
// returns without error: a failing or skipped call sets none. Fails with
// ErrNoTimerHandler without WithTimers.
func (c *Context) SetTimer(name string, at time.Time) error {
	if !c.k.cfg.timers {
		return ErrNoTimerHandler
	}
	c.k.fx.timers = append(c.k.fx.timers, timerOp{name: name, at: at})
	return nil
}

// CancelTimer cancels the timer name; a no-op if it is not pending. Like
// SetTimer it takes effect when the calling fold returns without error.
func (c *Context) CancelTimer(name string) {
	c.k.fx.timers = append(c.k.fx.timers, timerOp{name: name, cancel: true})
}

// Emit produces rec through the flow's output producer. rec.Topic defaults
// to the output topic of WithOutput. Fails with ErrNoOutput without
// WithOutput, and when neither rec nor WithOutput names a topic.
//
// The record is handed to the producer when the fold (or timer) calling
// Emit returns without error; outputs of a call that fails are never
// produced (under WithFoldErrorPolicy(Skip) a skipped record emits
// nothing).
//
// Outputs are at-least-once: the input record's offset stays uncommitted,
// and the key's snapshot is not written, until the broker acknowledges rec;
// a restart replays the record and emits again. An output that fails, or is
// not acknowledged within the output timeout (WithOutputTimeout, default
// DefaultOutputTimeout), fails the key and its partition with an error
// naming the input topic, partition, offset, key and output topic
// (ErrOutputTimeout for a timeout); its input offset is never committed by
// this owner.
func (c *Context) Emit(rec *kgo.Record) error {
	k := c.k
	if k.cfg.output == nil {
		return ErrNoOutput
	}
	if rec.Topic == "" {
		rec.Topic = k.cfg.outputTopic
	}
	if rec.Topic == "" {
		return fmt.Errorf("keyflow: emit for key %q: record has no topic and WithOutput set none", k.key)
	}
	k.fx.emits = append(k.fx.emits, rec)
	return nil
}
