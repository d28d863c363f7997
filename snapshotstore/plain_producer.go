package snapshotstore

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// plainProducer is the plain mode's shared snapshot producer, made again
// after the brokers refuse a batch as too large for the snapshot topic.
// kgo asks a partition's batch limit once per client
// (ProducerBatchMaxBytesFn: "topic-config changes at runtime are not
// picked up"), so the producer that met the snapshot topic before its
// max.message.bytes was lowered kept batching to the old limit, and the
// partition failed at every restart, for ever (a probe on kfake: a limit
// lowered to 1 500 bytes under a running plain worker). The transactional
// mode makes a partition's producer at each Open: its restart asks anew.
type plainProducer struct {
	newClient func() (*kgo.Client, error)
	log       *zap.Logger

	mu  sync.Mutex
	cur *producerGen
}

// producerGen is one client and its produces in flight: a replaced client
// closes once they have returned.
type producerGen struct {
	cl    *kgo.Client
	users sync.WaitGroup
}

func newPlainProducer(newClient func() (*kgo.Client, error), log *zap.Logger) (*plainProducer, error) {
	cl, err := newClient()
	if err != nil {
		return nil, err
	}
	return &plainProducer{newClient: newClient, log: log, cur: &producerGen{cl: cl}}, nil
}

// client is the current client (for its options: they do not change).
func (pp *plainProducer) client() *kgo.Client {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.cur.cl
}

// produce is ProduceSync on the current client; a refusal of a record as
// too large for its topic's limits makes the client again for the next
// produce (renew).
func (pp *plainProducer) produce(ctx context.Context, recs ...*kgo.Record) kgo.ProduceResults {
	pp.mu.Lock()
	g := pp.cur
	g.users.Add(1) // under mu: a renew after this waits for it
	pp.mu.Unlock()
	res := g.cl.ProduceSync(ctx, recs...)
	g.users.Done()
	for _, r := range res {
		if r.Err != nil && (errors.Is(r.Err, kerr.MessageTooLarge) || errors.Is(r.Err, kerr.RecordListTooLarge)) {
			pp.renew(g, r.Err)
			break
		}
	}
	return res
}

// renew replaces g, if it is still the current client, with a new one,
// whose partitions ask their batch limit anew (the store's
// ProducerBatchLimit: the refusal marked the topic's rules for a re-read);
// g closes once its produces in flight return. A client that cannot be
// made leaves g in place (logged): the next refusal tries again.
func (pp *plainProducer) renew(g *producerGen, cause error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.cur != g {
		return // renewed by another partition's refusal
	}
	cl, err := pp.newClient()
	if err != nil {
		pp.log.Warn("cannot make the snapshot producer again after the brokers refused a batch as too large; it keeps its batch limits",
			zap.NamedError("refusal", cause), zap.Error(err))
		return
	}
	pp.cur = &producerGen{cl: cl}
	pp.log.Info("the brokers refused a snapshot batch as too large: the snapshot producer is made again, to ask its topics' batch limits anew",
		zap.Error(cause))
	go func() {
		g.users.Wait()
		g.cl.Close()
	}()
}

// close closes the current client (the store's Close: no produce is in
// flight).
func (pp *plainProducer) close() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.cur.cl.Close()
}
