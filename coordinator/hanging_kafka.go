package coordinator

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
)

const offsetsTopic = "__consumer_offsets"

// abortHanging finds the open transactions on the group's offsets partition
// that DecideHanging calls hanging, and aborts each with a marker written
// to that partition (KIP-664 WriteTxnMarkers; needs CLUSTER_ACTION on the
// cluster where ACLs are on). It returns how many it aborted. Every
// transaction found is logged with its verdict; a refused abort is logged
// with the kafka-transactions.sh command that does it by hand.
func (c *Consumer) abortHanging(ctx context.Context) (int, error) {
	td, err := c.adm.ListTopicsWithInternal(ctx, offsetsTopic)
	if err != nil {
		return 0, fmt.Errorf("describe %s: %w", offsetsTopic, err)
	}
	t, ok := td[offsetsTopic]
	if !ok || t.Err != nil || len(t.Partitions) == 0 {
		return 0, fmt.Errorf("describe %s: %v", offsetsTopic, t.Err)
	}
	tp := TopicPartition{Topic: offsetsTopic, Partition: OffsetsPartition(c.cfg.Group, int32(len(t.Partitions)))}
	first, err := c.openTxns(ctx, tp)
	if err != nil || len(first) == 0 {
		return 0, err
	}
	// The coordinator's view is read between the partition's two reports
	// (DecideHanging's contract).
	views := make(map[int64]CoordinatorView, len(first))
	for _, o := range first {
		views[o.ProducerID] = c.coordinatorView(ctx, o.ProducerID, tp)
	}
	second, err := c.openTxns(ctx, tp)
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
		fields := []zap.Field{zap.String("group", c.cfg.Group), zap.String("partition", fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition)),
			zap.Int64("producer_id", o.ProducerID), zap.Int16("producer_epoch", o.Epoch),
			zap.Int64("txn_start_offset", o.StartOffset), zap.String("transactional_id", views[o.ProducerID].TxnID),
			zap.String("coordinator_state", views[o.ProducerID].State), zap.String("reason", v.Reason)}
		if !v.Hanging || !still[o] {
			c.log.Info("open transaction on the offsets partition is not hanging", fields...)
			continue
		}
		s := kadm.TopicsSet{}
		s.Add(tp.Topic, tp.Partition)
		rs, err := c.adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: o.ProducerID, ProducerEpoch: o.Epoch,
			CoordinatorEpoch: max(o.CoordinatorEpoch, 0), Topics: s})
		if err == nil {
			rs.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
				if err == nil && p.Err != nil {
					err = p.Err
				}
			})
		}
		if err != nil {
			c.log.Error("cannot abort a hanging transaction that blocks the group's committed offsets; abort it by hand",
				append(fields, zap.Error(err), zap.String("command", fmt.Sprintf(
					"kafka-transactions.sh --bootstrap-server <broker> abort --topic %s --partition %d --producer-id %d --producer-epoch %d --coordinator-epoch %d",
					tp.Topic, tp.Partition, o.ProducerID, o.Epoch, max(o.CoordinatorEpoch, 0))))...)
			continue
		}
		aborted++
		c.log.Warn("aborted a hanging transaction that blocked the group's committed offsets (KIP-664)", fields...)
	}
	return aborted, nil
}

// openTxns reads the transactions a partition's leader reports open.
func (c *Consumer) openTxns(ctx context.Context, tp TopicPartition) ([]OpenTxn, error) {
	s := kadm.TopicsSet{}
	s.Add(tp.Topic, tp.Partition)
	dp, err := c.adm.DescribeProducers(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("describe producers of %s[%d]: %w", tp.Topic, tp.Partition, err)
	}
	var out []OpenTxn
	for _, p := range dp.SortedPartitions() {
		if p.Err != nil {
			return nil, fmt.Errorf("describe producers of %s[%d]: %w", tp.Topic, tp.Partition, p.Err)
		}
		for _, pr := range p.ActiveProducers.Sorted() {
			if pr.CurrentTxnStartOffset >= 0 {
				out = append(out, OpenTxn{ProducerID: pr.ProducerID, Epoch: pr.ProducerEpoch,
					CoordinatorEpoch: pr.CoordinatorEpoch, StartOffset: pr.CurrentTxnStartOffset})
			}
		}
	}
	return out, nil
}

// coordinatorView reads what the transaction coordinator reports for a
// producer id; a failed read is carried in DescribeError.
func (c *Consumer) coordinatorView(ctx context.Context, pid int64, tp TopicPartition) CoordinatorView {
	lt, err := c.adm.ListTransactions(ctx, []int64{pid}, nil)
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
	dt, err := c.adm.DescribeTransactions(ctx, id)
	if err != nil {
		return CoordinatorView{DescribeError: fmt.Errorf("describe transaction %q: %w", id, err)}
	}
	d, ok := dt[id]
	if !ok || d.Err != nil {
		return CoordinatorView{DescribeError: fmt.Errorf("describe transaction %q: %v", id, d.Err)}
	}
	has := d.Topics.Lookup(tp.Topic, tp.Partition)
	return CoordinatorView{Known: true, TxnID: id, ProducerID: d.ProducerID, Epoch: d.ProducerEpoch,
		State: d.State, HasPartition: has}
}
