package snapshotstore

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaLogReader reads one snapshot partition from its start with a
// short-lived, group-less client that never commits: a committed offset would
// override the start position on the next recovery and silently shorten it.
type kafkaLogReader struct {
	cl        *kgo.Client
	topic     string
	partition int32
}

func newKafkaLogReader(brokers []string, topic string, partition int32, readCommitted bool, extra []kgo.Opt) (*kafkaLogReader, error) {
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s[%d]: recovery reader: %w", topic, partition, err)
	}
	return &kafkaLogReader{cl: cl, topic: topic, partition: partition}, nil
}

func (r *kafkaLogReader) Close() { r.cl.Close() }

func (r *kafkaLogReader) Ends(ctx context.Context) (hwm, lso int64, err error) {
	// Isolation level 0 (read_uncommitted) lists the high watermark; 1
	// (read_committed) lists the last stable offset.
	if hwm, err = listOffset(ctx, r.cl, r.topic, r.partition, 0, -1); err != nil {
		return 0, 0, err
	}
	if lso, err = listOffset(ctx, r.cl, r.topic, r.partition, 1, -1); err != nil {
		return 0, 0, err
	}
	return hwm, lso, nil
}

// Start returns the log start offset (the read position before any record).
func (r *kafkaLogReader) Start(ctx context.Context) (int64, error) {
	return listOffset(ctx, r.cl, r.topic, r.partition, 0, -2)
}

func (r *kafkaLogReader) Poll(ctx context.Context) ([]*kgo.Record, error) {
	fs := r.cl.PollFetches(ctx)
	var firstErr error
	fs.EachError(func(_ string, _ int32, err error) {
		if firstErr == nil {
			firstErr = err
		}
	})
	return fs.Records(), firstErr
}

// listOffset lists one offset of a partition at an isolation level:
// timestamp -1 is the end, -2 the log start.
func listOffset(ctx context.Context, cl *kgo.Client, topic string, partition int32, isolation int8, timestamp int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("%s[%d]: list offsets: %w", topic, partition, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("%s[%d]: list offsets: %w", topic, partition, err)
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("%s[%d]: list offsets: partition missing from response", topic, partition)
}

// ReadLatest reads one snapshot partition up to its high watermark and
// returns the latest snapshot of every key (tombstones included). It is the
// recovery read, usable by tools and verifiers; readCommitted hides aborted
// writes (and waits on open transactions).
func ReadLatest(ctx context.Context, brokers []string, topic string, partition int32, readCommitted bool, opts ...kgo.Opt) (map[string]Snapshot, error) {
	r, err := newKafkaLogReader(brokers, topic, partition, readCommitted, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := map[string]Snapshot{}
	err = ReadToTarget(ctx, r, ReadOptions{Partition: fmt.Sprintf("%s[%d]", topic, partition)}, func(rec *kgo.Record) error {
		s, ok, err := DecodeRecord(rec)
		if ok {
			out[s.Key] = s
		}
		return err
	})
	return out, err
}
