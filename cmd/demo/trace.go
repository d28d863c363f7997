package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The verifier's trace of a key that failed (a duplicated output, a
// mismatch): its whole history from the data alone, for a failure seen once
// in a chaos run whose cluster is gone by the time anyone looks. Every
// record is read read_uncommitted, with the transaction that wrote it (the
// producer ID and epoch of its batch) and that transaction's outcome in the
// partition — the control record that ended it — so that an aborted or
// never-ended write shows next to the committed ones, and every snapshot
// write is shown with the offset its transaction committed (the marker
// record the transactional store adds to each transaction,
// snapshotstore.MarkerKey).

// traceEntry is one record of a traced key.
type traceEntry struct {
	ts   time.Time
	kind string // input, snapshot, output
	pos  inputRef
	what string
	txn  txnRef
}

// txnRef is the transaction that wrote a record, as one partition sees it.
type txnRef struct {
	transactional   bool
	producer        int64
	epoch           int16
	outcome         string // commit, abort, open (no control record yet)
	end             int64  // the control record's offset (-1: open)
	markerCommitted int64  // the offset committed by the transaction's marker in this partition, -1 if none
}

func (t txnRef) String() string {
	if !t.transactional {
		return fmt.Sprintf("producer %d epoch %d, not transactional", t.producer, t.epoch)
	}
	s := fmt.Sprintf("producer %d epoch %d, %s", t.producer, t.epoch, t.outcome)
	if t.end >= 0 {
		s += fmt.Sprintf("@%d", t.end)
	}
	if t.markerCommitted >= 0 {
		s += fmt.Sprintf(", commits input offset %d", t.markerCommitted)
	}
	return s
}

// traceKeys returns the history of keys (input events, snapshot writes,
// outputs), one line per record in timestamp order, each key's lines
// prefixed by it. The input partitions of the keys are the partitions of
// their snapshots (one snapshot partition per input partition).
func traceKeys(ctx context.Context, brokers []string, input, snaps, output string, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	entries := map[string][]*traceEntry{}
	add := func(key string, e *traceEntry) { entries[key] = append(entries[key], e) }

	if err := readUncommitted(ctx, brokers, input, want, func(rec *kgo.Record, txn *txnRef) {
		var ev ledger.Event
		what := "undecodable"
		if json.Unmarshal(rec.Value, &ev) == nil {
			what = fmt.Sprintf("seq %d amount %d", ev.Seq, ev.Amount)
		}
		add(string(rec.Key), &traceEntry{ts: rec.Timestamp, kind: "input", pos: refOf(rec), what: what, txn: *txn})
	}); err != nil {
		return nil, fmt.Errorf("trace %s: %w", input, err)
	}
	if err := readUncommitted(ctx, brokers, snaps, want, func(rec *kgo.Record, txn *txnRef) {
		s, ok, err := snapshotstore.DecodeRecord(rec)
		what := ""
		switch {
		case err != nil:
			what = err.Error()
		case !ok:
			return
		case s.Tombstone():
			what = fmt.Sprintf("tombstone through input offset %d", s.Offset)
		default:
			var st ledger.State
			_ = json.Unmarshal(s.Value, &st)
			what = fmt.Sprintf("through input offset %d: last seq %d count %d balance %d", s.Offset, st.LastSeq, st.Count, st.Balance)
		}
		add(string(rec.Key), &traceEntry{ts: rec.Timestamp, kind: "snapshot", pos: refOf(rec), what: what, txn: *txn})
	}); err != nil {
		return nil, fmt.Errorf("trace %s: %w", snaps, err)
	}
	if output != "" {
		if err := readUncommitted(ctx, brokers, output, want, func(rec *kgo.Record, txn *txnRef) {
			var o ledger.Output
			what := "undecodable"
			if json.Unmarshal(rec.Value, &o) == nil {
				what = fmt.Sprintf("seq %d balance %d", o.Seq, o.Balance)
			}
			add(string(rec.Key), &traceEntry{ts: rec.Timestamp, kind: "output", pos: refOf(rec), what: what, txn: *txn})
		}); err != nil {
			return nil, fmt.Errorf("trace %s: %w", output, err)
		}
	}
	var lines []string
	for _, k := range keys {
		es := entries[k]
		sort.SliceStable(es, func(i, j int) bool { return es[i].ts.Before(es[j].ts) })
		lines = append(lines, fmt.Sprintf("%s: %d records (read_uncommitted, by timestamp)", k, len(es)))
		for _, e := range es {
			lines = append(lines, fmt.Sprintf("%s %s %-8s %s %s (%s)", k, e.ts.UTC().Format("15:04:05.000"), e.kind, e.pos, e.what, e.txn))
		}
	}
	return lines, nil
}

func refOf(r *kgo.Record) inputRef { return inputRef{r.Topic, r.Partition, r.Offset} }

// readUncommitted reads every partition of topic to its high watermark,
// read_uncommitted with the control records, and calls fn for each record
// whose key is in want, once the outcome of its transaction in that
// partition is known (its control record, or the partition's end: "open").
// The transaction's marker record (snapshotstore.MarkerKey) fills
// markerCommitted.
func readUncommitted(ctx context.Context, brokers []string, topic string, want map[string]bool, fn func(*kgo.Record, *txnRef)) error {
	type pending struct {
		recs []*kgo.Record
		txn  *txnRef
	}
	// Per partition, per producer: the transaction in progress and its
	// records of interest.
	open := map[int32]map[int64]*pending{}
	flush := func(p *pending) {
		for _, r := range p.recs {
			fn(r, p.txn)
		}
	}
	err := scanTopic(ctx, brokers, topic, kgo.ReadUncommitted(), func(rec *kgo.Record) {
		if !rec.Attrs.IsTransactional() {
			if want[string(rec.Key)] {
				fn(rec, &txnRef{producer: rec.ProducerID, epoch: rec.ProducerEpoch, end: -1, markerCommitted: -1})
			}
			return
		}
		byProducer := open[rec.Partition]
		if byProducer == nil {
			byProducer = map[int64]*pending{}
			open[rec.Partition] = byProducer
		}
		p := byProducer[rec.ProducerID]
		if rec.Attrs.IsControl() {
			if p == nil {
				return
			}
			p.txn.outcome, p.txn.end = "abort", rec.Offset
			if isCommitMarker(rec) {
				p.txn.outcome = "commit"
			}
			delete(byProducer, rec.ProducerID)
			flush(p)
			return
		}
		if p == nil {
			p = &pending{txn: &txnRef{transactional: true, producer: rec.ProducerID, epoch: rec.ProducerEpoch,
				outcome: "open", end: -1, markerCommitted: -1}}
			byProducer[rec.ProducerID] = p
		}
		if string(rec.Key) == snapshotstore.MarkerKey {
			var off int64
			if _, err := fmt.Sscan(string(rec.Value), &off); err == nil {
				p.txn.markerCommitted = off
			}
			return
		}
		if want[string(rec.Key)] {
			p.recs = append(p.recs, rec)
		}
	})
	if err != nil {
		return err
	}
	for _, byProducer := range open {
		for _, p := range byProducer {
			flush(p) // still open at the high watermark
		}
	}
	return nil
}
