package keyflow

import (
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrUndecodable marks a record as undecodable input: the error of a
// NewTyped flow's Decoder is wrapped in it, and a fold that cannot decode
// its record returns an error wrapping it (fmt.Errorf("...: %w: %w",
// keyflow.ErrUndecodable, err)). WithUndecodablePolicy, not
// WithFoldErrorPolicy, then decides what the record does.
var ErrUndecodable = keyactor.ErrUndecodable

// ErrPanicked is matched by a partition's failure (Run's *PartitionError,
// Status.Failed) when a fold, timer, load hook or codec panicked — or the
// output partitioner (actorflow.WithOutputPartitioner) or an application's
// store did (hooks given to kgo are not guarded). A panic always fails its
// partition, whatever the policies: it is a bug, not bad input; the stack
// is logged.
var ErrPanicked = keyactor.ErrPanicked

// Headers of a dead-letter record. The __streams.errors.* names are those
// of Kafka Streams' dead-letter queues (KIP-1034), so that tools written for
// them read ours; stacktrace is not written (a Go error carries none, and a
// panic always fails the partition).
const (
	HeaderErrorTopic     = "__streams.errors.topic"     // source topic
	HeaderErrorPartition = "__streams.errors.partition" // source partition, decimal
	HeaderErrorOffset    = "__streams.errors.offset"    // source offset, decimal
	// HeaderErrorException names the kind of failure (the Java client's
	// exception class): one of the DeadLetterKind values.
	HeaderErrorException = "__streams.errors.exception"
	HeaderErrorMessage   = "__streams.errors.message" // the error, with topic, partition, offset and key
	// HeaderErrorTime is actorflow's own: when the record was dead-lettered,
	// Unix milliseconds, decimal (the record's timestamp stays the source
	// record's, as in KIP-1034, unless its topic refuses it:
	// HeaderErrorSourceTime).
	HeaderErrorTime = "actorflow.errors.time"
	// HeaderErrorSourceTime is actorflow's own, on a dead letter whose
	// source record's timestamp its topic's brokers would refuse (beyond
	// the dead-letter topic's message.timestamp.before.max.ms or
	// .after.max.ms: snapshotstore.TopicRules.CheckTimestamp): the source's
	// timestamp, Unix milliseconds, decimal. The dead letter then carries
	// the producer's clock instead: refused, it would stop its partition at
	// every attempt. It comes after the other headers, and stays when the
	// dead letter shrinks to fit (HeaderErrorOmitted). Absent: the dead
	// letter has the source's timestamp.
	HeaderErrorSourceTime = keyactor.HeaderSourceTime
)

// DeadLetterKind is the value of HeaderErrorException.
type DeadLetterKind string

// The kinds of dead letters.
const (
	KindFoldError   DeadLetterKind = "actorflow.FoldError"        // the fold returned an error
	KindUndecodable DeadLetterKind = "actorflow.UndecodableInput" // the fold's error wraps ErrUndecodable
	KindNilKey      DeadLetterKind = "actorflow.NilKey"           // the record has no usable key (WithNilKeyPolicy)
	// KindUndecodableState: a key's snapshot whose state the flow's Codec
	// cannot decode (WithUndecodableStatePolicy); the dead letter holds the
	// snapshot's key and value, and its __streams.errors.* headers name the
	// snapshot topic, partition and offset.
	KindUndecodableState DeadLetterKind = "actorflow.UndecodableState"
)

// DeadLetterRecord returns the dead letter of rec for topic: rec's key,
// value and timestamp, its headers kept first, then the KIP-1034 headers
// naming rec's topic, partition and offset, the kind and the error, and
// HeaderErrorTime at `at`. Its partition is left to the producer's
// partitioner (by key).
func DeadLetterRecord(topic string, rec *kgo.Record, kind DeadLetterKind, err error, at time.Time) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(rec.Headers)+6)
	hs = append(hs, rec.Headers...)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderErrorTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: HeaderErrorPartition, Value: strconv.AppendInt(nil, int64(rec.Partition), 10)},
		kgo.RecordHeader{Key: HeaderErrorOffset, Value: strconv.AppendInt(nil, rec.Offset, 10)},
		kgo.RecordHeader{Key: HeaderErrorException, Value: []byte(kind)},
		kgo.RecordHeader{Key: HeaderErrorMessage, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderErrorTime, Value: strconv.AppendInt(nil, at.UnixMilli(), 10)},
	)
	return &kgo.Record{Topic: topic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: hs}
}

// runtimeDeadLetter is DeadLetterRecord for the key actors
// (keyactor.Config.DeadLetterRecord), whose kinds are keyactor's, shrunk to
// fit a record batch of max bytes (fitDeadLetter; 0: unchecked).
func runtimeDeadLetter(topic string, rec *kgo.Record, kind keyactor.Kind, err error, at time.Time, max int) (*kgo.Record, string) {
	k := KindFoldError
	switch kind {
	case keyactor.KindUndecodable:
		k = KindUndecodable
	case keyactor.KindNilKey:
		k = KindNilKey
	case keyactor.KindUndecodableState:
		k = KindUndecodableState
	}
	dl := DeadLetterRecord(topic, rec, k, err, at)
	return dl, fitDeadLetter(dl, len(rec.Headers), max)
}

// DefaultDeadLetterTopic is the dead-letter topic of an input topic when
// WithDeadLetterTopic sets none.
func DefaultDeadLetterTopic(input string) string { return input + ".dlq" }

// DeadLetterInfo is what a dead letter's headers say of its source record
// and its error (ParseDeadLetter).
type DeadLetterInfo struct {
	// Topic, Partition and Offset name the source record: an input record,
	// or for KindUndecodableState the snapshot record.
	Topic     string
	Partition int32
	Offset    int64
	Kind      DeadLetterKind
	// Message is the error, naming topic, partition, offset and key.
	Message string
	// Time is when the record was dead-lettered (HeaderErrorTime).
	Time time.Time
	// SourceTime is the source record's timestamp where the dead letter
	// carries its producer's clock instead (HeaderErrorSourceTime); zero:
	// the dead letter's timestamp is the source's.
	SourceTime time.Time
	// Omitted lists what the dead letter dropped to fit its producer's
	// record batch (HeaderErrorOmitted); "": nothing.
	Omitted string
}

// ParseDeadLetter reads the headers DeadLetterRecord (and a worker's dead
// letters) add, from a record read from a dead-letter topic. The source
// record's own headers come first and may carry headers of the same names
// (a dead letter of a dead letter): the dead letter's own are those from
// the last HeaderErrorTopic on, which DeadLetterRecord writes first of
// them. It fails, naming the header, when the source's topic, partition,
// offset or the kind is missing there, or a number or time does not parse:
// not a dead letter of KIP-1034's shape.
func ParseDeadLetter(r *kgo.Record) (DeadLetterInfo, error) {
	own := -1
	for i, h := range r.Headers {
		if h.Key == HeaderErrorTopic {
			own = i
		}
	}
	if own < 0 {
		return DeadLetterInfo{}, fmt.Errorf("keyflow: dead letter %s[%d] offset %d: no header %s", r.Topic, r.Partition, r.Offset, HeaderErrorTopic)
	}
	var dl DeadLetterInfo
	const topic, partition, offset, kind = 1, 2, 4, 8
	seen := 0
	ms := func(v string) (time.Time, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		return time.UnixMilli(n).UTC(), err
	}
	for _, h := range r.Headers[own:] {
		v := string(h.Value)
		var err error
		switch h.Key {
		case HeaderErrorTopic:
			dl.Topic, seen = v, seen|topic
		case HeaderErrorPartition:
			var p int64
			p, err = strconv.ParseInt(v, 10, 32)
			dl.Partition, seen = int32(p), seen|partition
		case HeaderErrorOffset:
			dl.Offset, err = strconv.ParseInt(v, 10, 64)
			seen |= offset
		case HeaderErrorException:
			dl.Kind, seen = DeadLetterKind(v), seen|kind
		case HeaderErrorMessage:
			dl.Message = v
		case HeaderErrorTime:
			dl.Time, err = ms(v)
		case HeaderErrorSourceTime:
			dl.SourceTime, err = ms(v)
		case HeaderErrorOmitted:
			dl.Omitted = v
		}
		if err != nil {
			return DeadLetterInfo{}, fmt.Errorf("keyflow: dead letter %s[%d] offset %d: header %s %q: %w", r.Topic, r.Partition, r.Offset, h.Key, v, err)
		}
	}
	for _, h := range []struct {
		bit  int
		name string
	}{{partition, HeaderErrorPartition}, {offset, HeaderErrorOffset}, {kind, HeaderErrorException}} {
		if seen&h.bit == 0 {
			return DeadLetterInfo{}, fmt.Errorf("keyflow: dead letter %s[%d] offset %d: no header %s", r.Topic, r.Partition, r.Offset, h.name)
		}
	}
	return dl, nil
}
