package snapshotstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

const offsetsTopic = "__consumer_offsets"

// topicPartition names one partition of any topic.
type topicPartition struct {
	Topic     string
	Partition int32
}

// hangingResolver ends hanging transactions of this store's transactional
// ids (hanging.go). Its client connects on first use.
type hangingResolver struct {
	brokers []string
	opts    []kgo.Opt
	log     *zap.Logger
	ours    func(txnID string) bool
	cl      *kgo.Client
	adm     *kadm.Client
	// lookback is how long before the hanging record's timestamp the
	// scans start: a minute of clock difference, plus failover (set by the
	// store: its failover timeout, how long a redo's outputs may keep
	// their first attempt's timestamps).
	lookback time.Duration
}

func newHangingResolver(brokers []string, opts []kgo.Opt, log *zap.Logger, ours func(string) bool, failover time.Duration) (*hangingResolver, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), kgo.SeedBrokers(brokers...))...)
	if err != nil {
		return nil, err
	}
	return &hangingResolver{brokers: brokers, opts: opts, log: log, ours: ours, cl: cl, adm: kadm.NewClient(cl),
		lookback: time.Minute + failover}, nil
}

func (h *hangingResolver) close() { h.cl.Close() }

// offsetsPartitionOf is the group's __consumer_offsets partition.
func (h *hangingResolver) offsetsPartitionOf(ctx context.Context, group string) (topicPartition, error) {
	td, err := h.adm.ListTopicsWithInternal(ctx, offsetsTopic)
	if err != nil {
		return topicPartition{}, fmt.Errorf("describe %s: %w", offsetsTopic, err)
	}
	t, ok := td[offsetsTopic]
	switch {
	case !ok:
		return topicPartition{}, fmt.Errorf("describe %s: not in the answer", offsetsTopic)
	case t.Err != nil:
		return topicPartition{}, fmt.Errorf("describe %s: %w", offsetsTopic, t.Err)
	case len(t.Partitions) == 0:
		return topicPartition{}, fmt.Errorf("describe %s: no partitions listed", offsetsTopic)
	}
	return topicPartition{Topic: offsetsTopic, Partition: OffsetsPartition(group, int32(len(t.Partitions)))}, nil
}

// endHanging finds the open transactions on the group's offsets partition
// that DecideHanging calls hanging, and ends each with a marker of its
// outcome (DecideOutcome) written to that partition (KIP-664
// WriteTxnMarkers; needs CLUSTER_ACTION on the cluster where ACLs are on).
// It returns how many it ended. Every transaction found is logged with its
// verdict; one it cannot end is logged at error with the way to end it by
// hand.
func (h *hangingResolver) resolve(ctx context.Context, tp topicPartition) (int, error) {
	first, err := h.openTxns(ctx, tp)
	if err != nil || len(first) == 0 {
		return 0, err
	}
	// The coordinator's view is read between the partition's two reports
	// (DecideHanging's contract).
	views := make(map[int64]CoordinatorView, len(first))
	for _, o := range first {
		views[o.ProducerID] = h.coordinatorView(ctx, o.ProducerID, tp)
	}
	second, err := h.openTxns(ctx, tp)
	if err != nil {
		return 0, err
	}
	still := make(map[OpenTxn]bool, len(second))
	for _, o := range second {
		still[o] = true
	}
	aborted := 0
	for _, o := range first {
		v := DecideHanging(o, views[o.ProducerID])
		fields := []zap.Field{zap.String("partition", fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition)),
			zap.Int64("producer_id", o.ProducerID), zap.Int16("producer_epoch", o.Epoch),
			zap.Int64("txn_start_offset", o.StartOffset), zap.String("transactional_id", views[o.ProducerID].TxnID),
			zap.String("coordinator_state", views[o.ProducerID].State), zap.String("reason", v.Reason)}
		if !v.Hanging || !still[o] {
			h.log.Info("open transaction on the offsets partition is not hanging", fields...)
			continue
		}
		outcome, open, why := h.hangingOutcome(ctx, tp, o, views[o.ProducerID].TxnID)
		fields = append(fields, zap.Stringer("outcome", outcome), zap.String("outcome_reason", why),
			zap.Any("open_on", open.Sorted()))
		manual := fmt.Sprintf("for each partition in open_on: kafka-transactions.sh --bootstrap-server <broker> abort --topic <topic> --partition <partition> --producer-id %d --producer-epoch %d --coordinator-epoch <its coordinator epoch> (an abort is right only if no partition of the transaction committed it)",
			o.ProducerID, o.Epoch)
		if outcome == OutcomeUnknown {
			h.log.Error("a hanging transaction blocks a partition and its outcome is not known; end it by hand",
				append(fields, zap.String("command", manual))...)
			continue
		}
		if err := h.writeMarkers(ctx, o, outcome == OutcomeCommit, open); err != nil {
			h.log.Error("cannot end a hanging transaction that blocks a partition; end it by hand",
				append(fields, zap.Error(err), zap.String("command", manual))...)
			continue
		}
		aborted++
		h.log.Warn("ended a hanging transaction that blocked a partition (KIP-664 marker)", fields...)
	}
	return aborted, nil
}

// writeMarkers ends the open transaction o on every partition of topics
// with a KIP-664 marker (WriteTxnMarkers) of the given type; the first
// partition's error is returned.
func (h *hangingResolver) writeMarkers(ctx context.Context, o OpenTxn, commit bool, topics kadm.TopicsSet) error {
	rs, err := h.adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: o.ProducerID, ProducerEpoch: o.Epoch,
		Commit: commit, CoordinatorEpoch: max(o.CoordinatorEpoch, 0), Topics: topics})
	if err != nil {
		return err
	}
	rs.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
		if err == nil && p.Err != nil {
			err = fmt.Errorf("%s[%d]: %w", p.Topic, p.Partition, p.Err)
		}
	})
	return err
}

// openTxns reads the transactions a partition's leader reports open.
func (h *hangingResolver) openTxns(ctx context.Context, tp topicPartition) ([]OpenTxn, error) {
	open, err := h.openTxnsOn(ctx, []topicPartition{tp})
	return open[tp], err
}

// openTxnsOn reads the transactions the leaders of parts report open
// (DescribeProducers: a producer with a current transaction start offset),
// per partition; the first partition's error fails the read.
func (h *hangingResolver) openTxnsOn(ctx context.Context, parts []topicPartition) (map[topicPartition][]OpenTxn, error) {
	s := kadm.TopicsSet{}
	for _, tp := range parts {
		s.Add(tp.Topic, tp.Partition)
	}
	dp, err := h.adm.DescribeProducers(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("describe producers: %w", err)
	}
	out := map[topicPartition][]OpenTxn{}
	for _, p := range dp.SortedPartitions() {
		if p.Err != nil {
			return nil, fmt.Errorf("describe producers of %s[%d]: %w", p.Topic, p.Partition, p.Err)
		}
		tp := topicPartition{Topic: p.Topic, Partition: p.Partition}
		for _, pr := range p.ActiveProducers.Sorted() {
			if pr.CurrentTxnStartOffset >= 0 {
				out[tp] = append(out[tp], OpenTxn{ProducerID: pr.ProducerID, Epoch: pr.ProducerEpoch,
					CoordinatorEpoch: pr.CoordinatorEpoch, StartOffset: pr.CurrentTxnStartOffset})
			}
		}
	}
	return out, nil
}

// coordinatorView reads what the transaction coordinator reports for a
// producer id; a failed read is carried in DescribeError.
func (h *hangingResolver) coordinatorView(ctx context.Context, pid int64, tp topicPartition) CoordinatorView {
	lt, err := h.adm.ListTransactions(ctx, []int64{pid}, nil)
	if err != nil {
		return CoordinatorView{DescribeError: fmt.Errorf("list transactions of producer id %d: %w", pid, err)}
	}
	var id string
	for _, t := range lt.Sorted() {
		if t.ProducerID == pid {
			id = t.TxnID
		}
	}
	if id == "" {
		return CoordinatorView{}
	}
	return h.describeTxn(ctx, id, tp)
}

// describeTxn reads the coordinator's view of the transactional id id
// (HasPartition: tp is in its transaction); a failed read is carried in
// DescribeError.
func (h *hangingResolver) describeTxn(ctx context.Context, id string, tp topicPartition) CoordinatorView {
	dt, err := h.adm.DescribeTransactions(ctx, id)
	if err != nil {
		return CoordinatorView{DescribeError: fmt.Errorf("describe transaction %q: %w", id, err)}
	}
	d, ok := dt[id]
	switch {
	case !ok:
		return CoordinatorView{DescribeError: fmt.Errorf("describe transaction %q: not in the answer", id)}
	case d.Err != nil:
		return CoordinatorView{DescribeError: fmt.Errorf("describe transaction %q: %w", id, d.Err)}
	}
	return CoordinatorView{Known: true, TxnID: id, ProducerID: d.ProducerID, Epoch: d.ProducerEpoch,
		State: d.State, HasPartition: d.Topics.Lookup(tp.Topic, tp.Partition)}
}

// hangingOutcome finds where a hanging transaction is still open (every
// partition of the cluster, DescribeProducers) and decides the outcome of
// its missing markers from the partitions where it may have ended: each is
// scanned, with control records and uncommitted data, from lookback before
// the hanging record's time (client and broker clocks differ; a redo keeps
// its first attempt's output timestamps) to its end.
// Only this store's transactional ids are ended.
func (h *hangingResolver) hangingOutcome(ctx context.Context, offsets topicPartition, o OpenTxn, txnID string) (TxnOutcome, kadm.TopicsSet, string) {
	open := kadm.TopicsSet{}
	open.Add(offsets.Topic, offsets.Partition)
	if txnID == "" || !h.ours(txnID) {
		return OutcomeUnknown, open, fmt.Sprintf("transactional id %q is not one of this store's", txnID)
	}
	sctx, cancel := context.WithTimeout(ctx, hangingScanTimeout)
	defer cancel()
	var at time.Time
	if err := h.readPartition(sctx, offsets, o.StartOffset, o.StartOffset+1, func(r *kgo.Record) bool {
		at = r.Timestamp
		return false
	}); err != nil || at.IsZero() {
		return OutcomeUnknown, open, fmt.Sprintf("read the hanging record at %s[%d]@%d: %v", offsets.Topic, offsets.Partition, o.StartOffset, err)
	}
	dp, err := h.adm.DescribeProducers(sctx, nil)
	if err != nil {
		return OutcomeUnknown, open, fmt.Sprintf("describe producers: %v", err)
	}
	// The partitions where it may have ended, each with whether its leader
	// lists the epoch right after the open one (its marker's under
	// version 2: DataScan.Bumped).
	type endedAt struct {
		tp     topicPartition
		bumped bool
	}
	var maybeEnded []endedAt
	var undescribed error
	dp.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil && undescribed == nil {
			// Its producers unknown (a leader moving: NOT_LEADER_OR_FOLLOWER),
			// it may hold the transaction's only landed marker.
			undescribed = fmt.Errorf("%s[%d]: %w", p.Topic, p.Partition, p.Err)
		}
		for _, pr := range p.ActiveProducers {
			switch {
			case pr.ProducerID != o.ProducerID:
			case pr.CurrentTxnStartOffset >= 0 && pr.ProducerEpoch == o.Epoch:
				open.Add(p.Topic, p.Partition)
			case pr.CurrentTxnStartOffset < 0 && pr.ProducerEpoch >= o.Epoch:
				maybeEnded = append(maybeEnded, endedAt{topicPartition{Topic: p.Topic, Partition: p.Partition}, pr.ProducerEpoch == o.Epoch+1})
			}
		}
	})
	if undescribed != nil {
		return OutcomeUnknown, open, fmt.Sprintf("describe producers: a partition did not answer: %v", undescribed)
	}
	// From before the hanging record's time by the client's and broker's
	// clock difference and a redo's whole failover (its outputs keep the
	// first attempt's timestamps).
	since := at.Add(-h.lookback)
	scans := make([]DataScan, 0, len(maybeEnded))
	for _, q := range maybeEnded {
		sc := h.scanForMarker(sctx, q.tp, o, since)
		sc.Bumped = q.bumped
		scans = append(scans, sc)
	}
	tv := int16(-1) // read only when it matters, on its own time (the scans may have spent sctx's)
	if slices.ContainsFunc(scans, func(sc DataScan) bool { return sc.SameEpochMarker || sc.Bumped && !sc.SawData }) {
		vctx, vcancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		if tv, err = h.transactionVersion(vctx); err != nil {
			h.log.Warn("cannot read the cluster's transaction version; a marker with the data's epoch tells no outcome", zap.Error(err))
		}
		vcancel()
	}
	out, why := DecideOutcome(scans, tv)
	return out, open, fmt.Sprintf("%s (%d partitions scanned)", why, len(maybeEnded))
}

// transactionVersion reads the cluster's finalized transaction.version
// feature (ApiVersions v3+, KIP-584): 0 when the cluster finalizes none
// (brokers before 4.0, or not upgraded), -1 with the error when it cannot
// be read.
func (h *hangingResolver) transactionVersion(ctx context.Context) (int16, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "actorflow", "1"
	resp, err := req.RequestWith(ctx, h.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return -1, fmt.Errorf("api versions: %w", err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel, nil
		}
	}
	return 0, nil
}

// scanForMarker reads tp from the first record at or after since to its
// end for the producer's data at the open epoch and the control record
// after it.
func (h *hangingResolver) scanForMarker(ctx context.Context, tp topicPartition, o OpenTxn, since time.Time) DataScan {
	from, err := h.adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), tp.Topic)
	if err != nil {
		return DataScan{}
	}
	ends, err := h.adm.ListEndOffsets(ctx, tp.Topic)
	if err != nil {
		return DataScan{}
	}
	f, ok1 := from.Lookup(tp.Topic, tp.Partition)
	e, ok2 := ends.Lookup(tp.Topic, tp.Partition)
	if !ok1 || !ok2 || f.Err != nil || e.Err != nil {
		return DataScan{}
	}
	return scanProducer(ctx, h.brokers, h.opts, tp, f.Offset, e.Offset, o.ProducerID, o.Epoch)
}

// scanProducer reads tp's records in [from, to) for the producer's data at
// epoch and the control record after it (with the same or a later epoch:
// transaction version 2 writes markers with the bumped epoch, a fence
// aborts with a later one). Both the hanging-transaction repair and the
// settling of a lost commit answer (lost_commit_kafka.go) decide from it.
func scanProducer(ctx context.Context, brokers []string, opts []kgo.Opt, tp topicPartition, from, to, producerID int64, epoch int16) DataScan {
	var sc DataScan
	err := readPartitionRaw(ctx, brokers, opts, tp, from, to, func(r *kgo.Record) bool {
		if r.ProducerID != producerID {
			return true
		}
		switch {
		case !r.Attrs.IsControl() && r.ProducerEpoch == epoch:
			sc.SawData = true
		case r.Attrs.IsControl() && sc.SawData && r.ProducerEpoch >= epoch:
			sc.Closed = true
			sc.SameEpochMarker = r.ProducerEpoch == epoch
			// The control record's key: version int16, type int16 (0 abort, 1 commit).
			sc.Committed = len(r.Key) >= 4 && r.Key[3] == 1
			return false
		}
		return true
	})
	sc.Complete, sc.Err = err == nil, err
	return sc
}

// hangingScanTimeout bounds the reads that decide a hanging transaction's
// outcome.
const hangingScanTimeout = 30 * time.Second

// readPartition calls fn for each record (control records included,
// uncommitted data too) of tp from offset from until fn returns false or
// the record before offset to was read, with the recovery's one-partition
// reader; transient fetch errors are retried until ctx ends.
func (h *hangingResolver) readPartition(ctx context.Context, tp topicPartition, from, to int64, fn func(*kgo.Record) bool) error {
	return readPartitionRaw(ctx, h.brokers, h.opts, tp, from, to, fn)
}

// readPartitionRaw is readPartition for any caller: every record of tp in
// [from, to), control records and uncommitted data included.
func readPartitionRaw(ctx context.Context, brokers []string, opts []kgo.Opt, tp topicPartition, from, to int64, fn func(*kgo.Record) bool) error {
	r, err := newKafkaLogReader(brokers, tp.Topic, tp.Partition, false, opts)
	if err != nil {
		return err
	}
	defer r.Close()
	r.keepControl, r.pos = true, from
	for r.pos < to {
		recs, _, err := r.Poll(ctx)
		if err != nil {
			if !Transient(err) || ctx.Err() != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(minFetchBackoff):
			}
			continue
		}
		for _, rec := range recs {
			if !fn(rec) || rec.Offset >= to-1 {
				return nil
			}
		}
	}
	return nil
}
