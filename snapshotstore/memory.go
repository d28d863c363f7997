package snapshotstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Memory is an in-memory Store for tests and benchmarks. It keeps, per
// partition, the log of committed snapshots (so recovery replays in log order,
// like a compacted topic before compaction) and the committed offset. Safe
// for concurrent use.
type Memory struct {
	mu      sync.Mutex
	logs    map[PartitionInfoKey][]Snapshot
	offsets map[PartitionInfoKey]int64
	commits map[PartitionInfoKey]int
	outputs map[PartitionInfoKey][]*kgo.Record
	// TransactionalOutputs makes its partitions commit Batch.Outputs with
	// their writes (Partition.CommitsOutputs), as the transactional Kafka store does:
	// a failed commit keeps none of them. Set it before the first Open.
	// Default false: key actors emit through the application's producer.
	TransactionalOutputs bool
	// BeforeCommit, when set, runs before every commit; an error fails the
	// commit with nothing persisted (fault injection in tests).
	BeforeCommit func(p PartitionInfo, b Batch) error
	// AfterCommit, when set, runs after every successful commit, outside the
	// store's lock (tests await commits with it).
	AfterCommit func(p PartitionInfo, b Batch)
}

// PartitionInfoKey names a partition in the memory store.
type PartitionInfoKey struct {
	Topic     string
	Partition int32
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{
		logs:    map[PartitionInfoKey][]Snapshot{},
		offsets: map[PartitionInfoKey]int64{},
		commits: map[PartitionInfoKey]int{},
		outputs: map[PartitionInfoKey][]*kgo.Record{},
	}
}

// Outputs returns the outputs committed by the partitions of input
// partition topic[partition], in commit order.
func (m *Memory) Outputs(topic string, partition int32) []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*kgo.Record(nil), m.outputs[PartitionInfoKey{topic, partition}]...)
}

// Open implements Store.
func (m *Memory) Open(_ context.Context, p PartitionInfo) (Partition, error) {
	return &memPartition{m: m, info: p, key: PartitionInfoKey{p.Topic, p.Partition}}, nil
}

// Committed returns the committed offset of a partition, or -1.
func (m *Memory) Committed(topic string, partition int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.offsets[PartitionInfoKey{topic, partition}]; ok {
		return o
	}
	return -1
}

// Latest returns the latest snapshot of every key of a partition (tombstones
// included).
func (m *Memory) Latest(topic string, partition int32) map[string]Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Snapshot{}
	for _, s := range m.logs[PartitionInfoKey{topic, partition}] {
		out[s.Key] = s
	}
	return out
}

// Commits returns how many batches a partition committed.
func (m *Memory) Commits(topic string, partition int32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits[PartitionInfoKey{topic, partition}]
}

type memPartition struct {
	m    *Memory
	info PartitionInfo
	key  PartitionInfoKey
}

func (p *memPartition) Recover(ctx context.Context, fn func(Snapshot) error) error {
	p.m.mu.Lock()
	log := append([]Snapshot(nil), p.m.logs[p.key]...)
	p.m.mu.Unlock()
	for i, s := range log {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.Source = Position{p.info.Topic, p.info.Partition, int64(i)}
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

func (p *memPartition) Commit(ctx context.Context, b Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if hook := p.m.BeforeCommit; hook != nil {
		if err := hook(p.info, b); err != nil {
			return fmt.Errorf("%s: commit: %w", p.info, err)
		}
	}
	p.m.mu.Lock()
	defer func() {
		if hook := p.m.AfterCommit; hook != nil {
			hook(p.info, b)
		}
	}()
	defer p.m.mu.Unlock()
	for _, w := range b.Writes {
		if w.Value != nil {
			w.Value = append([]byte{}, w.Value...)
		}
		w.Timers = append([]Timer(nil), w.Timers...)
		p.m.logs[p.key] = append(p.m.logs[p.key], w)
	}
	for _, o := range b.Outputs {
		c := *o
		p.m.outputs[p.key] = append(p.m.outputs[p.key], &c)
	}
	p.m.offsets[p.key] = b.Offset
	p.m.commits[p.key]++
	return nil
}

func (p *memPartition) Close(context.Context) error { return nil }

// CommitsOutputs implements Partition (TransactionalOutputs).
func (p *memPartition) CommitsOutputs() bool { return p.m.TransactionalOutputs }
