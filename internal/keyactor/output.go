package keyactor

import (
	"context"
	"errors"
	"fmt"

	"github.com/actorflow/actorflow/internal/logkey"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrOutputTimeout: keyflow.ErrOutputTimeout, documented there.
var ErrOutputTimeout = errors.New("keyflow: output not acknowledged")

// produce hands one output to the producer, held at input offset at (-1:
// from a timer) until its outcome reaches the key actor as one outputAck.
//
// The deadline is given to kgo, which then fails a record still buffered
// (waiting for its topic's metadata, its broker, or buffer space) with the
// context's error. kgo cannot fail a record once an idempotent producer has
// sent its batch (the broker may have written it; dropping it would break
// the sequence numbers), so the deadline is also enforced here: whichever of
// the promise and the deadline comes first sends the one outputAck; a late
// acknowledgement is dropped (the key has failed; a replay emits again).
func (k *Core) produce(rec *kgo.Record, at int64) { k.produceVia(k.cfg.Output, rec, at) }

// produceVia is produce through the producer cl (a dead letter's).
func (k *Core) produceVia(cl *kgo.Client, rec *kgo.Record, at int64) {
	k.addOutput(at)
	self, topic := k.toSelf(), rec.Topic
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.OutputTimeout)
	stop := context.AfterFunc(ctx, func() {
		self.send(&outputAck{offset: at, topic: topic, err: context.DeadlineExceeded, timedOut: true})
	})
	refused := k.env.OutputRefused
	if cl != k.cfg.Output {
		refused = k.env.DeadLetterRefused // a dead letter through the worker's producer: the store's rules
	}
	cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
		if err != nil && refused != nil {
			refused(r, err)
		}
		if stop() {
			// An error after our deadline is the deadline (kgo failed the
			// buffered record through ctx), even if AfterFunc lost the race.
			timedOut := err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
			self.send(&outputAck{offset: at, topic: topic, err: err, timedOut: timedOut})
		}
		cancel()
	})
}

// outputError is the error of a failed or timed-out output.
func (k *Core) outputError(m *outputAck) error {
	where := fmt.Sprintf("offset %d", m.offset)
	if m.offset < 0 {
		where = "timer, load hook or dropped state" // none holds an input offset
	}
	what := "emit output to"
	if m.topic == k.cfg.deadLetterTopic(k.env.Topic) {
		what = "dead letter to"
	}
	if m.timedOut {
		return fmt.Errorf("%s[%d] %s key %s: %s %s: %w within %s (WithOutputTimeout): %w",
			k.env.Topic, k.env.Partition, where, logkey.Quote(k.key), what, m.topic, ErrOutputTimeout, k.cfg.OutputTimeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s[%d] %s key %s: %s %s: %w", k.env.Topic, k.env.Partition, where, logkey.Quote(k.key), what, m.topic, m.err)
}
