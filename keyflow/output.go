package keyflow

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produce hands one output to the producer, held at input offset at (-1:
// from a timer) until its acknowledgement reaches the key actor.
func (k *keyCore) produce(rec *kgo.Record, at int64) {
	k.addOutput(at)
	self, sys := k.self, k.env.System
	k.cfg.output.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		sys.Root.Send(self, &outputAck{offset: at, err: err, topic: r.Topic})
	})
}
