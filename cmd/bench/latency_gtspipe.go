package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/twmb/franz-go/pkg/kgo"
)

// gtsPipe is experiment L's exactly-once reference: the ledger pipe written
// with franz-go's GroupTransactSession, as its documentation shows it. One
// client is group member and transactional producer; every poll that
// returned records is one transaction (Begin, fold each record into its
// account's in-memory state and produce one ledger.Output, End with
// TryCommit, which flushes and commits the polled offsets in the
// transaction, KIP-447). It reads read_committed. An aborted transaction
// (a rebalance during it) puts back the states it changed, since its
// records are polled again. ready is closed once partitions partitions are
// assigned. Each member of a group needs its own txnID. It returns nil when ctx ends, or the first error.
type gtsPipe struct {
	sess  *kgo.GroupTransactSession
	ready chan struct{}
}

func newGTSPipe(brokers []string, group, txnID, input, output string, partitions int, opts ...kgo.Opt) (*gtsPipe, error) {
	p := &gtsPipe{ready: make(chan struct{})}
	var (
		mu       sync.Mutex
		assigned = map[int32]bool{}
	)
	sess, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(output),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, ps := range m[input] {
				assigned[ps] = true
			}
			if len(assigned) >= partitions {
				select {
				case <-p.ready:
				default:
					close(p.ready)
				}
			}
		}),
	}, opts...)...,
	)
	if err != nil {
		return nil, fmt.Errorf("GroupTransactSession: %w", err)
	}
	p.sess = sess
	return p, nil
}

func (p *gtsPipe) run(ctx context.Context) error {
	defer p.sess.Close()
	states := map[string]*ledger.State{}
	for {
		fs := p.sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, part int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("fetch %s[%d]: %w", t, part, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := p.sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		before := map[string]*ledger.State{} // states as they were before this transaction
		var (
			perrMu sync.Mutex
			perr   error
		)
		var foldErr error
		fs.EachRecord(func(r *kgo.Record) {
			key := string(r.Key)
			s := states[key]
			if _, ok := before[key]; !ok {
				if s != nil {
					c := *s
					before[key] = &c
				} else {
					before[key] = nil
				}
			}
			s, err := ledger.Fold(nil, s, r)
			if err != nil {
				if foldErr == nil {
					foldErr = fmt.Errorf("%s[%d]@%d key %q: %w", r.Topic, r.Partition, r.Offset, key, err)
				}
				return
			}
			states[key] = s
			b, _ := json.Marshal(ledger.Output{Account: key, Seq: s.LastSeq, Balance: s.Balance})
			p.sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: b}, func(_ *kgo.Record, err error) {
				if err != nil {
					perrMu.Lock()
					perr = errors.Join(perr, err)
					perrMu.Unlock()
				}
			})
		})
		if foldErr != nil {
			return foldErr
		}
		committed, err := p.sess.End(ctx, kgo.TryCommit)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
		perrMu.Lock()
		failed := perr
		perrMu.Unlock()
		if !committed || failed != nil {
			// Aborted: the records come again from the committed offsets.
			for k, s := range before {
				if s == nil {
					delete(states, k)
				} else {
					states[k] = s
				}
			}
		}
	}
}
