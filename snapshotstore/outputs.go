package snapshotstore

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/actorflow/actorflow/internal/panicerr"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Outputs in the transactional mode: a batch's outputs are produced by the
// partition's transactional producer, in the transaction of the snapshots
// that cover the folds which emitted them, so that a read_committed
// consumer sees each exactly once (issue 10; the read-process-write
// pattern of ../shared/seeds/002_e0bd084231fec92a.txt).

// CommitsOutputs implements Partition: every transaction produces its
// batch's outputs.
func (t *txnPartition) CommitsOutputs() bool { return true }

// RecordLimiter is implemented by a Partition whose producer limits the
// size of what it sends: the transactional Kafka partitions, whose producer
// refuses a record batch above its ProducerBatchMaxBytes (kgo's default
// 1 000 012, the broker's message.max.bytes default; KafkaConfig.ClientOpts
// can raise it, per topic with ProducerBatchMaxBytesFn). The key actors
// refuse a larger output at Emit, where the fold error policy handles it,
// instead of letting it fail its transaction at every attempt. A Partition
// that wraps another should forward it (actorflow's metrics wrapper does);
// without it outputs meet the limit only at the commit.
type RecordLimiter interface {
	// MaxRecordBytes is the largest record batch, in bytes, the producer
	// sends to topic; 0: no limit known.
	MaxRecordBytes(topic string) int
}

// SnapshotLimiter is implemented by a Partition whose producer limits the
// size of a snapshot record: the Kafka partitions, both modes (see
// RecordLimiter). The key actors check a state's encoding against it after
// each call that changed it under a fold error policy that can undo the
// call (Skip, DeadLetter), which then handles the call that made the state
// too large, and before each write otherwise, failing the key with an
// error that names it; without it a state too large fails its write at
// every attempt. A wrapper should forward it (actorflow's metrics wrapper
// does).
type SnapshotLimiter interface {
	// MaxSnapshotBytes is the largest record batch, in bytes, the producer
	// sends to the snapshot topic; 0: no limit known.
	MaxSnapshotBytes() int
}

// MaxRecordBytes implements RecordLimiter: every Emit asks, so the limit
// is read from the producer once, at open (kgo's OptValue looks options
// up by their function names: far too slow per output).
func (t *txnPartition) MaxRecordBytes(topic string) int {
	if t.maxBatch == nil {
		return 0
	}
	return t.maxBatch(topic)
}

// TopicRules implements TopicRuler.
func (t *txnPartition) TopicRules(topic string) TopicRules { return t.k.rules.get(topic) }

// TopicRules implements TopicRuler: the rules bind the application's
// producer of outputs as well.
func (p *plainPartition) TopicRules(topic string) TopicRules { return p.k.rules.get(topic) }

// TopicRulesRefused implements RulesRefuser.
func (t *txnPartition) TopicRulesRefused(rec *kgo.Record, err error) { t.k.rules.refused(rec, err) }

// TopicRulesRefused implements RulesRefuser.
func (p *plainPartition) TopicRulesRefused(rec *kgo.Record, err error) { p.k.rules.refused(rec, err) }

// MaxSnapshotBytes implements SnapshotLimiter.
func (t *txnPartition) MaxSnapshotBytes() int { return t.MaxRecordBytes(t.k.topic) }

// MaxSnapshotBytes implements SnapshotLimiter: the shared producer's limit
// for the snapshot topic, read when asked (once per partition start).
func (p *plainPartition) MaxSnapshotBytes() int {
	if fn := recbytes.ProducerLimit(p.k.producer.client()); fn != nil {
		return fn(p.k.topic)
	}
	return 0
}

// txnPartitioner routes the transactional producer's records: snapshot
// (and marker) records to their explicit partition, outputs by the
// configured output partitioner.
type txnPartitioner struct {
	snapshots string
	manual    kgo.Partitioner
	outputs   kgo.Partitioner
	// guard: the outputs' partitioner is the application's
	// (KafkaConfig.OutputPartitioner), whose panics are recovered;
	// panicked holds the first one's message, and from then on every
	// output is refused (the partition fails). log gets its stack.
	guard    bool
	panicked atomic.Pointer[string]
	log      *zap.Logger
	where    string
}

func (k *Kafka) txnPartitioner() *txnPartitioner {
	return &txnPartitioner{snapshots: k.topic, manual: kgo.ManualPartitioner(), outputs: k.cfg.outPartitions,
		guard: k.cfg.userPartitioner, log: k.cfg.log}
}

// recovered records a panic of the application's partitioner (call it
// deferred): the first one's message is kept, and its stack logged.
func (p *txnPartitioner) recovered(what string) {
	if r := recover(); r != nil {
		msg := fmt.Sprintf("%s: %v", what, r)
		if p.panicked.CompareAndSwap(nil, &msg) {
			p.log.Error("the output partitioner panicked; its record fails, and the partition with it",
				zap.String("partition", p.where), zap.String("panic", msg), zap.ByteString("stack", debug.Stack()))
		}
	}
}

// ForTopic implements kgo.Partitioner.
func (p *txnPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.snapshots {
		return p.manual.ForTopic(topic)
	}
	if !p.guard {
		return p.outputs.ForTopic(topic)
	}
	tp := p.forTopic(topic)
	if tp == nil { // ForTopic itself panicked
		return refusingPartitioner{}
	}
	// The wrapper has the optional methods tp has, no more: kgo's path
	// differs with each (OnNewBatch makes it partition a record twice).
	g := guardedTopicPartitioner{tp: tp, p: p}
	b, backup := tp.(kgo.TopicBackupPartitioner)
	nb, newBatch := tp.(kgo.TopicPartitionerOnNewBatch)
	switch {
	case backup && newBatch:
		return guardedBackupNewBatch{guardedBackupPartitioner{g, b}, guardedNewBatch{g, nb}}
	case backup:
		return guardedBackupPartitioner{g, b}
	case newBatch:
		return guardedNewBatchPartitioner{g, guardedNewBatch{g, nb}}
	}
	return g
}

// forTopic is the application's ForTopic, its panic recovered (nil).
func (p *txnPartitioner) forTopic(topic string) (tp kgo.TopicPartitioner) {
	defer p.recovered("ForTopic")
	return p.outputs.ForTopic(topic)
}

// refusingPartitioner refuses every record (partition -1: kgo fails it).
type refusingPartitioner struct{}

func (refusingPartitioner) RequiresConsistency(*kgo.Record) bool { return true }
func (refusingPartitioner) Partition(*kgo.Record, int) int       { return -1 }

// panicErr is the error of a produce that failed on the partitioner's
// panic: ErrPanicked (the partition fails, its failure matching
// keyflow.ErrPanicked), else nil.
func (p *txnPartitioner) panicErr() error {
	if v := p.panicked.Load(); v != nil {
		return fmt.Errorf("output partitioner: %w: %s", panicerr.ErrPanicked, *v)
	}
	return nil
}

// guardedTopicPartitioner recovers a panic of the application's output
// partitioner: kgo calls it on its own goroutines (the first produce to a
// topic partitions it on the metadata update's), outside any guard of the
// runtime, and the panic ended the process (found by a review). The record
// gets partition -1, which kgo fails cleanly ("invalid record partitioning
// choice"), so the transaction fails and the partition with it.
type guardedTopicPartitioner struct {
	tp kgo.TopicPartitioner
	p  *txnPartitioner
}

// failed: a panic was recovered; every later record is refused (a
// partitioner that panicked once is not trusted to place the next ones
// where their keys' others went).
func (g guardedTopicPartitioner) failed() bool { return g.p.panicked.Load() != nil }

func (g guardedTopicPartitioner) RequiresConsistency(r *kgo.Record) (c bool) {
	c = true // on a panic: no choice among writable partitions only
	defer g.p.recovered("RequiresConsistency")
	return g.tp.RequiresConsistency(r)
}

func (g guardedTopicPartitioner) Partition(r *kgo.Record, n int) (p int) {
	if g.failed() {
		return -1
	}
	p = -1
	defer g.p.recovered("Partition")
	return g.tp.Partition(r, n)
}

// guardedNewBatch is the guarded OnNewBatch of a partitioner that has one.
type guardedNewBatch struct {
	g  guardedTopicPartitioner
	nb kgo.TopicPartitionerOnNewBatch
}

func (n guardedNewBatch) OnNewBatch() {
	defer n.g.p.recovered("OnNewBatch")
	n.nb.OnNewBatch()
}

// guardedNewBatchPartitioner is a guarded partitioner with OnNewBatch.
type guardedNewBatchPartitioner struct {
	guardedTopicPartitioner
	guardedNewBatch
}

// guardedBackupNewBatch is a guarded backup partitioner with OnNewBatch.
type guardedBackupNewBatch struct {
	guardedBackupPartitioner
	guardedNewBatch
}

// guardedBackupPartitioner is a guarded kgo.TopicBackupPartitioner.
type guardedBackupPartitioner struct {
	guardedTopicPartitioner
	b kgo.TopicBackupPartitioner
}

func (g guardedBackupPartitioner) PartitionByBackup(r *kgo.Record, n int, it kgo.TopicBackupIter) (p int) {
	if g.failed() {
		return -1
	}
	p = -1
	defer g.p.recovered("PartitionByBackup")
	return g.b.PartitionByBackup(r, n, it)
}

// batchRecords returns a transaction's records: its snapshots, then its
// outputs (encodeBatch), with room for the marker.
func (t *txnPartition) batchRecords(b Batch) ([]*kgo.Record, error) {
	for _, o := range b.Outputs {
		if o.Topic == "" || o.Topic == t.k.topic {
			return nil, fmt.Errorf("%s: output to topic %q: outputs need a topic other than the snapshot topic", t.info, o.Topic)
		}
	}
	return encodeBatch(t.k.topic, t.info.Partition, b.Writes, b.Outputs, 1, t.k.cfg.tombstoneDeleted), nil
}
