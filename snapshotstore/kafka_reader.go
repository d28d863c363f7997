package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// kafkaLogReader reads one snapshot partition from its start with raw Fetch
// requests to the partition's leader, parsed by kgo.ProcessFetchPartition.
//
// Why not a kgo consumer: the read position must be the fetch position, and
// kgo's consumer does not expose it. Its cursor advances past batches that
// yield no record (a cleaned batch's preserved last offset, KAFKA-5443;
// emptied batches; batches aborted under read_committed), and a fetch that
// only advances the cursor is never handed to PollFetches, so a position
// tracked from the records received stays behind whenever nothing readable
// follows such batches below the target. (Not seen on Kafka 4.1: its cleaner
// never touches the active segment, so the last batch stays readable;
// itest TestRecoveryCompactedTail. A broker that cleans it would hang the
// read.) ProcessFetchPartition is kgo's public parser for hand-made fetches
// and returns that same next offset, computed by the code kgo's cursor uses.
//
// The client is group-less and never commits: a committed offset would
// override the start position on the next recovery and silently shorten it.
type kafkaLogReader struct {
	cl        *kgo.Client
	topic     string
	partition int32
	isolation kgo.IsolationLevel
	isoLevel  int8 // the same, for the request: 0 read_uncommitted, 1 read_committed
	decomp    kgo.Decompressor
	// keepControl returns transaction markers among the records (the
	// hanging-transaction scans read their type; hanging_kafka.go).
	keepControl bool

	pos     int64    // the next offset to fetch
	start   int64    // the log start Start read; -1: not read
	leader  int32    // the partition's leader; -1: look it up before the next fetch
	topicID [16]byte // Fetch v13+ names topics by id
}

// The fetch bounds: Kafka's consumer defaults (fetch.max.wait.ms 500,
// max.partition.fetch.bytes 1 MiB; a larger batch is still returned whole,
// KIP-74).
const (
	fetchMaxWait           = 500 * time.Millisecond
	fetchMaxPartitionBytes = 1 << 20
)

func newKafkaLogReader(brokers []string, topic string, partition int32, readCommitted bool, extra []kgo.Opt) (*kafkaLogReader, error) {
	iso, level := kgo.ReadUncommitted(), int8(0)
	if readCommitted {
		iso, level = kgo.ReadCommitted(), 1
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%s[%d]: recovery reader: %w", topic, partition, err)
	}
	return &kafkaLogReader{cl: cl, topic: topic, partition: partition, isolation: iso, isoLevel: level,
		decomp: kgo.DefaultDecompressor(), leader: -1, start: -1}, nil
}

func (r *kafkaLogReader) Close() { r.cl.Close() }

// sibling is a reader of partition q of the same topic on r's client (not
// to be closed: r's Close closes the client), positioned nowhere yet: a
// recovery's other read costs no client of its own (no dial, no metadata).
func (r *kafkaLogReader) sibling(q int32) *kafkaLogReader {
	return &kafkaLogReader{cl: r.cl, topic: r.topic, partition: q, isolation: r.isolation, isoLevel: r.isoLevel,
		decomp: r.decomp, leader: -1, start: -1}
}

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

// Start returns the log start offset (the read position before any record)
// and moves the read there.
func (r *kafkaLogReader) Start(ctx context.Context) (int64, error) {
	start, err := listOffset(ctx, r.cl, r.topic, r.partition, 0, -2)
	if err == nil {
		r.pos, r.start = start, start
	}
	return start, err
}

// Poll fetches once from the read position. Every error makes the next poll
// look the leader up again; the position moves only past batches decoded
// whole, or past one kgo could not decode, whose error comes with the
// moved position (ReadToTarget fails on it).
func (r *kafkaLogReader) Poll(ctx context.Context) ([]*kgo.Record, int64, error) {
	recs, err := r.fetch(ctx)
	if err != nil {
		r.leader = -1
		return recs, r.pos, fmt.Errorf("%s[%d]: fetch at %d: %w", r.topic, r.partition, r.pos, err)
	}
	return recs, r.pos, nil
}

func (r *kafkaLogReader) fetch(ctx context.Context) ([]*kgo.Record, error) {
	if r.leader < 0 {
		if err := r.lookupLeader(ctx); err != nil {
			return nil, err
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(fetchMaxWait.Milliseconds())
	req.MinBytes = 1
	req.IsolationLevel = r.isoLevel
	// SessionID 0 with SessionEpoch -1 (the default): a full fetch outside
	// any fetch session (KIP-227); one partition needs no incremental state.
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = r.topic, r.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = r.partition
	rp.FetchOffset = r.pos
	rp.PartitionMaxBytes = fetchMaxPartitionBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := r.cl.Broker(int(r.leader)).RetriableRequest(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", r.leader, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("broker %d: %w", r.leader, err)
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != r.topic && t.TopicID != r.topicID {
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.Partition != r.partition {
				continue
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:             r.pos,
				IsolationLevel:     r.isolation,
				KeepControlRecords: r.keepControl,
				Topic:              r.topic,
				Partition:          r.partition,
			}, p, r.decomp, nil)
			// next only passes batches decoded whole: a truncated or failing
			// batch is fetched again from where it starts.
			r.pos = max(r.pos, next)
			if errors.Is(fp.Err, kerr.OffsetOutOfRange) {
				return fp.Records, r.outOfRange(ctx, fp.Err)
			}
			return fp.Records, fp.Err
		}
	}
	return nil, fmt.Errorf("broker %d: %w (partition missing from the fetch response)", r.leader, kerr.UnknownTopicOrPartition)
}

// outOfRange handles OFFSET_OUT_OF_RANGE. Below the log start (retention or
// DeleteRecords removed the head while the read ran; the cleaner may also
// drop emptied head segments) the records are gone and the read goes on from
// the new start, as a consumer's reset to the earliest offset would. Above
// the log end, records below the read position were truncated (an unclean
// leader election): the read fails, loudly.
func (r *kafkaLogReader) outOfRange(ctx context.Context, err error) error {
	start, serr := listOffset(ctx, r.cl, r.topic, r.partition, 0, -2)
	if serr != nil && Transient(serr) {
		// Retried as the fetch would be: the out-of-range answer alone
		// decides nothing yet.
		return fmt.Errorf("log start after %v: %w", err, serr)
	}
	if serr != nil {
		return fmt.Errorf("%w (log start unknown: %v)", err, serr)
	}
	if start > r.pos {
		// Records not read yet were deleted: the recovery's check of the
		// log start judges the start the read ended up at (a review).
		r.pos, r.start = start, max(r.start, start)
		return nil
	}
	end, eerr := listOffset(ctx, r.cl, r.topic, r.partition, 0, -1)
	if eerr != nil && Transient(eerr) {
		return fmt.Errorf("log end after %v: %w", err, eerr)
	}
	if eerr != nil {
		return fmt.Errorf("%w (log start %d, log end unknown: %v)", err, start, eerr)
	}
	return fmt.Errorf("%w: log start %d, log end %d: records below the read position were truncated", err, start, end)
}

// lookupLeader reads the partition's leader and the topic id from the
// metadata.
func (r *kafkaLogReader) lookupLeader(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(r.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != r.topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		for _, p := range t.Partitions {
			if p.Partition != r.partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			if p.Leader < 0 {
				return fmt.Errorf("metadata: %w", kerr.LeaderNotAvailable)
			}
			r.leader, r.topicID = p.Leader, t.TopicID
			return nil
		}
	}
	return fmt.Errorf("metadata: %w", kerr.UnknownTopicOrPartition)
}

// listOffsets lists one offset of each of a topic's partitions at an
// isolation level (timestamp as listOffset's), in one request: kgo's
// client splits it by leader and merges the answers.
func listOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions []int32, isolation int8, timestamp int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = timestamp
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		name := topic
		if len(partitions) == 1 {
			name = fmt.Sprintf("%s[%d]", topic, partitions[0])
		}
		return nil, fmt.Errorf("%s: list offsets: %w", name, err)
	}
	out := make(map[int32]int64, len(partitions))
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%s[%d]: list offsets: %w", topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	for _, p := range partitions {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("%s[%d]: list offsets: partition missing from response", topic, p)
		}
	}
	return out, nil
}

// listOffset lists one offset of a partition at an isolation level:
// timestamp -1 is the end, -2 the log start.
func listOffset(ctx context.Context, cl *kgo.Client, topic string, partition int32, isolation int8, timestamp int64) (int64, error) {
	offs, err := listOffsets(ctx, cl, topic, []int32{partition}, isolation, timestamp)
	if err != nil {
		return 0, err
	}
	return offs[partition], nil
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
	name := fmt.Sprintf("%s[%d]", topic, partition)
	// The latest record of a key decides, as in a recovery: an undecodable
	// record superseded by a valid one is skipped.
	check := newRecoveryCheck(name, IntegrityOptions{}, zap.NewNop())
	err = ReadToTarget(ctx, r, ReadOptions{Partition: name}, func(rec *kgo.Record) error {
		if s, ok := check.add(rec); ok {
			out[s.Key] = s
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	_, err = check.finish(name, "", -1, nil, -1, 0, recordedCount{}) // no group, no log start: ReadState judges no ownership
	return out, err
}
