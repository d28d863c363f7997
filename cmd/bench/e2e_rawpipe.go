package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawPipe is the E2E ceiling: the same work as an actorflow worker without
// the actor tree, written as directly as franz-go allows, with a goroutine
// per partition (franz-go's goroutine-per-partition pattern) so it folds on
// every core like the worker does. One client of the group polls and hands
// each partition's records to its goroutine, which folds them into a
// per-key ledger.State map (and, with output set, produces one
// ledger.Output per record). Every persist interval the poll loop asks each
// partition for the keys changed since the last time — produced to the
// snapshot topic in the snapshot format — and for its next offset, flushes
// the client and commits those offsets: at-least-once, the plain mode's
// guarantee, at the cadence of the worker's flush and commit ticks, and
// with its idle flush (once every partition's input was read to its end and
// nothing came for 50 ms, each further one within a persist interval after
// twice the quiet of the one before).
// processed counts folded records. It returns nil when ctx ends, or the
// first error.
func rawPipe(ctx context.Context, brokers []string, input, group, snapshot, output string, persist time.Duration, processed *atomic.Int64) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.DisableAutoCommit(),
	}, childKgoLog()...)...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var (
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
	onProduced := func(_ *kgo.Record, err error) {
		if err != nil {
			fail(fmt.Errorf("produce: %w", err))
		}
	}

	parts := map[int32]*rawPartition{}
	var workers sync.WaitGroup
	defer func() {
		for _, p := range parts {
			close(p.in)
		}
		workers.Wait()
	}()
	partition := func(n int32) *rawPartition {
		p := parts[n]
		if p == nil {
			p = &rawPartition{n: n, in: make(chan rawMsg, 16), states: map[string]*rawKey{}, dirty: map[string]*rawKey{}, next: -1}
			parts[n] = p
			workers.Go(func() { p.run(ctx, cl, snapshot, output, processed, onProduced, fail) })
		}
		return p
	}

	// The worker's idle flush (actorflow.WithIdleFlush, its default): once
	// every partition's last fetch reached its end and nothing came for
	// idleFlush, flush and commit at once; each further idle flush within
	// a persist interval waits for twice the quiet (partitionflow/idle.go).
	// Without it the ceiling's drain would wait for its tick while the
	// worker's did not.
	const idleFlush = partitionflow.DefaultIdleFlushAfter
	var (
		last      = time.Now()
		atEnd     = map[int32]bool{}
		idleQuiet = idleFlush // the quiet the next idle flush waits for
		fresh     bool        // records came since the last flush
	)
	allAtEnd := func() bool {
		for _, e := range atEnd {
			if !e {
				return false
			}
		}
		return len(atEnd) > 0
	}
	for {
		wait := persist // so the persist tick fires when idle
		if fresh && allAtEnd() {
			wait = min(idleQuiet, persist)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		got := false
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if n := len(ftp.Records); n > 0 {
				got = true
				// Read uncommitted (kgo's default): the end is the high watermark.
				atEnd[ftp.Partition] = ftp.HighWatermark >= 0 && ftp.Records[n-1].Offset+1 >= ftp.HighWatermark
				partition(ftp.Partition).in <- rawMsg{recs: ftp.Records}
			}
		})
		if err := failed(); err != nil {
			return err
		}
		fresh = fresh || got
		idle := !got && fresh && allAtEnd()
		if time.Since(last) < persist && !idle {
			continue
		}
		fresh = false
		if idle {
			idleQuiet *= 2
		} else {
			last, idleQuiet = time.Now(), idleFlush
		}
		// A barrier: each partition produces its changed keys and reports the
		// offset after its last folded record.
		replies := make(map[int32]chan int64, len(parts))
		for n, p := range parts {
			replies[n] = make(chan int64, 1)
			p.in <- rawMsg{flush: replies[n]}
		}
		offsets := map[string]map[int32]kgo.EpochOffset{}
		for n, c := range replies {
			if next := <-c; next >= 0 {
				if offsets[input] == nil {
					offsets[input] = map[int32]kgo.EpochOffset{}
				}
				offsets[input][n] = kgo.EpochOffset{Epoch: -1, Offset: next}
			}
		}
		if err := cl.Flush(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := failed(); err != nil {
			return err
		}
		if len(offsets) == 0 {
			continue
		}
		var cerr error
		cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
						cerr = fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, err)
					}
				}
			}
		})
		if cerr != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("commit: %w", cerr)
		}
	}
}

type rawKey struct {
	s      *ledger.State
	offset int64
}

type rawMsg struct {
	recs  []*kgo.Record
	flush chan<- int64 // produce the changed keys, then reply with the next offset
}

// rawPartition is one partition's goroutine of the raw pipe.
type rawPartition struct {
	n      int32
	in     chan rawMsg
	states map[string]*rawKey
	dirty  map[string]*rawKey
	next   int64 // the offset after the last folded record, -1 before any
}

func (p *rawPartition) run(ctx context.Context, cl *kgo.Client, snapshot, output string, processed *atomic.Int64, onProduced func(*kgo.Record, error), fail func(error)) {
	for m := range p.in {
		if m.flush != nil {
			for key, k := range p.dirty {
				v, _ := json.Marshal(k.s)
				cl.Produce(ctx, snapshotstore.EncodeRecord(snapshot, p.n, snapshotstore.Snapshot{Key: key, Value: v, Offset: k.offset}), onProduced)
			}
			clear(p.dirty)
			m.flush <- p.next
			continue
		}
		for _, r := range m.recs {
			key := string(r.Key)
			k := p.states[key]
			if k == nil {
				k = &rawKey{}
				p.states[key] = k
			}
			s, err := ledger.Fold(nil, k.s, r)
			if err != nil {
				fail(fmt.Errorf("%s[%d]@%d key %q: %w", r.Topic, r.Partition, r.Offset, key, err))
				continue
			}
			k.s, k.offset = s, r.Offset
			p.dirty[key] = k
			p.next = r.Offset + 1
			processed.Add(1)
			if output != "" {
				b, _ := json.Marshal(ledger.Output{Account: key, Seq: s.LastSeq, Balance: s.Balance})
				cl.Produce(ctx, &kgo.Record{Topic: output, Key: r.Key, Value: b}, onProduced)
			}
		}
	}
}
