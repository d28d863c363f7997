package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/actorflow/actorflow/internal/topicread"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The verifier's transaction audit: whether the broker kept each transaction
// atomic, read from the data alone. A transaction of the workers writes to
// a snapshot partition, output partitions (and the group's offsets, which
// are not read here); every partition it wrote to gets its control record,
// and a read_committed reader must see its records exactly when that
// record is a commit. A chaos run's duplicate or mismatch has two kinds of
// cause: the runtime (it wrote or recovered the wrong thing) or the broker
// (a transaction committed on one partition and aborted on another, or an
// aborted transaction's records visible to read_committed). The audit tells
// them apart. It is reported, not a verdict of its own: what a user sees
// is what the output and state checks judge (the chaos run's verdict line
// says whether the audit was clean).

// txnAudit is the audit's result.
type txnAudit struct {
	// Transactions: transactions seen (a producer ID and the epoch of its
	// data: transaction version 2 bumps the epoch at every transaction).
	Transactions int `json:"transactions"`
	// Disagreements: transactions committed on one partition and aborted
	// on another.
	Disagreements int `json:"disagreements"`
	// VisibleAborted: records of an aborted transaction a read_committed
	// reader saw; HiddenCommitted: records of a committed one it did not.
	VisibleAborted  int `json:"visible_aborted"`
	HiddenCommitted int `json:"hidden_committed"`
	// Open: transactional records with no control record yet.
	Open int `json:"open"`
	// Merged: control records that closed the data of more than one
	// transaction of a producer in one partition (transaction version 2:
	// more than one data epoch before one marker). The earlier
	// transaction's own marker never landed there, so its records took the
	// outcome of a later transaction of the same producer: a commit hides
	// the broker's loss, an abort turns the earlier transaction's commit
	// elsewhere into a Disagreement.
	Merged int `json:"merged"`
	// PerTransaction: the producers' epochs name single transactions
	// (transaction version 2, KIP-890: a control record carries the epoch
	// after its data's), so Disagreements is counted; under version 1 a
	// producer keeps its epoch across transactions and it is not.
	PerTransaction bool     `json:"per_transaction"`
	Examples       []string `json:"examples,omitempty"`
}

func (a *txnAudit) clean() bool {
	return a.Disagreements == 0 && a.VisibleAborted == 0 && a.HiddenCommitted == 0
}

func (a *txnAudit) String() string {
	if !a.PerTransaction {
		return fmt.Sprintf("%d producer epochs (transaction version 1: epochs span transactions, so no agreement check): %d records of aborted transactions visible to read_committed, %d of committed ones hidden, %d records still open",
			a.Transactions, a.VisibleAborted, a.HiddenCommitted, a.Open)
	}
	return fmt.Sprintf("%d transactions: %d committed on one partition and aborted on another, %d records of aborted transactions visible to read_committed, %d of committed ones hidden, %d records still open, %d markers closing more than one transaction",
		a.Transactions, a.Disagreements, a.VisibleAborted, a.HiddenCommitted, a.Open, a.Merged)
}

func (a *txnAudit) example(format string, args ...any) {
	if len(a.Examples) < 40 {
		a.Examples = append(a.Examples, fmt.Sprintf(format, args...))
	}
}

type txnKey struct {
	producer int64
	epoch    int16
}

type partKey struct {
	topic     string
	partition int32
}

// auditTxns reads every partition of topics twice — read_uncommitted with
// the control records (each transactional record's outcome: the next
// control record of its producer in the partition), then read_committed
// (what a reader sees) — and compares (auditRecords).
func auditTxns(ctx context.Context, brokers []string, topics ...string) (*txnAudit, error) {
	var all, visible []auditRec
	for _, topic := range topics {
		if err := scanTopic(ctx, brokers, topic, kgo.ReadUncommitted(), func(r *kgo.Record) { all = append(all, auditRecOf(r)) }); err != nil {
			return nil, fmt.Errorf("audit %s read_uncommitted: %w", topic, err)
		}
		if err := scanTopic(ctx, brokers, topic, kgo.ReadCommitted(), func(r *kgo.Record) { visible = append(visible, auditRecOf(r)) }); err != nil {
			return nil, fmt.Errorf("audit %s read_committed: %w", topic, err)
		}
	}
	return auditRecords(all, visible), nil
}

// auditRec is what the audit needs of a record.
type auditRec struct {
	Topic         string
	Partition     int32
	Offset        int64
	ProducerID    int64
	ProducerEpoch int16
	Transactional bool
	Control       bool
	Commit        bool // a control record's type
}

func auditRecOf(r *kgo.Record) auditRec {
	return auditRec{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch,
		Transactional: r.Attrs.IsTransactional(), Control: r.Attrs.IsControl(), Commit: isCommitMarker(r)}
}

// isCommitMarker: r is a control record of type commit (its key is its
// version, int16, and its type, int16: 0 abort, 1 commit).
func isCommitMarker(r *kgo.Record) bool {
	return r.Attrs.IsControl() && len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1
}

// auditRecords decides the audit from every record read_uncommitted (with
// the control records, in offset order per partition) and those a
// read_committed reader saw. Plain Go: the unit tests feed it records.
func auditRecords(all, visible []auditRec) *txnAudit {
	a := &txnAudit{}
	type rec struct {
		pk      partKey
		offset  int64
		txn     txnKey
		outcome string // commit, abort, open
	}
	var data []*rec
	outcomes := map[txnKey]map[string]partKey{}
	pending := map[partKey]map[int64][]*rec{} // per partition, per producer: records awaiting their control record
	for _, r := range all {
		if !r.Transactional {
			continue
		}
		pk := partKey{r.Topic, r.Partition}
		if pending[pk] == nil {
			pending[pk] = map[int64][]*rec{}
		}
		if r.Control {
			outcome := "abort"
			if r.Commit {
				outcome = "commit"
			}
			var epochs []int16
			for _, d := range pending[pk][r.ProducerID] {
				if r.ProducerEpoch == d.txn.epoch+1 {
					a.PerTransaction = true
				}
				d.outcome = outcome
				outcomes[d.txn][outcome] = pk
				if len(epochs) == 0 || epochs[len(epochs)-1] != d.txn.epoch {
					epochs = append(epochs, d.txn.epoch)
				}
			}
			if len(epochs) > 1 {
				a.Merged++
				first := pending[pk][r.ProducerID][0]
				a.example("%s[%d]@%d: one %s marker (producer %d epoch %d) closed the data of epochs %v from offset %d: epoch %d's own marker never landed there",
					pk.topic, pk.partition, r.Offset, outcome, r.ProducerID, r.ProducerEpoch, epochs, first.offset, epochs[0])
			}
			delete(pending[pk], r.ProducerID)
			continue
		}
		d := &rec{pk: pk, offset: r.Offset, txn: txnKey{r.ProducerID, r.ProducerEpoch}, outcome: "open"}
		data = append(data, d)
		pending[pk][r.ProducerID] = append(pending[pk][r.ProducerID], d)
		if outcomes[d.txn] == nil {
			outcomes[d.txn] = map[string]partKey{}
		}
	}
	seen := map[partKey]map[int64]bool{}
	for _, r := range visible {
		if r.Transactional && !r.Control {
			pk := partKey{r.Topic, r.Partition}
			if seen[pk] == nil {
				seen[pk] = map[int64]bool{}
			}
			seen[pk][r.Offset] = true
		}
	}
	for _, d := range data {
		switch v := seen[d.pk][d.offset]; {
		case d.outcome == "open":
			a.Open++
		case d.outcome == "abort" && v:
			a.VisibleAborted++
			a.example("%s[%d]@%d (producer %d epoch %d) is visible to read_committed, but its transaction aborted in that partition",
				d.pk.topic, d.pk.partition, d.offset, d.txn.producer, d.txn.epoch)
		case d.outcome == "commit" && !v:
			a.HiddenCommitted++
			a.example("%s[%d]@%d (producer %d epoch %d) is hidden from read_committed, but its transaction committed in that partition",
				d.pk.topic, d.pk.partition, d.offset, d.txn.producer, d.txn.epoch)
		}
	}
	a.Transactions = len(outcomes)
	if !a.PerTransaction {
		return a
	}
	keys := make([]txnKey, 0, len(outcomes))
	for k, o := range outcomes {
		if len(o) > 1 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].producer < keys[j].producer || keys[i].producer == keys[j].producer && keys[i].epoch < keys[j].epoch
	})
	for _, k := range keys {
		a.Disagreements++
		c, ab := outcomes[k]["commit"], outcomes[k]["abort"]
		a.example("transaction of producer %d epoch %d committed on %s[%d] and aborted on %s[%d]", k.producer, k.epoch, c.topic, c.partition, ab.topic, ab.partition)
	}
	return a
}

// scanTopic reads topic to its end offsets at isolation iso, control
// records included (topicread.Scan).
func scanTopic(ctx context.Context, brokers []string, topic string, iso kgo.IsolationLevel, fn func(*kgo.Record)) error {
	return topicread.Scan(ctx, brokers, topic, iso, fn)
}
