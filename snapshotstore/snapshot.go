package snapshotstore

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record header names of the snapshot format. See ARCHITECTURE.md, "Snapshot
// record format": a foreign client needs nothing else to read a snapshot topic.
const (
	// HeaderOffset carries, as decimal ASCII, the input offset of the last
	// record folded into the snapshot. Replayed records at or below it are
	// skipped, so state effects apply exactly once.
	HeaderOffset = "actorflow.offset"
	// HeaderFormat carries the format version ("1").
	HeaderFormat = "actorflow.format"
	// HeaderKind is "offset-marker" on the marker record every transaction of
	// the transactional mode writes (absent on snapshots).
	HeaderKind = "actorflow.kind"

	formatVersion = "1"
	kindMarker    = "offset-marker"
)

// MarkerKey is the key of the per-partition offset-marker record of the
// transactional mode. Input records with this key are rejected.
const MarkerKey = "\x00actorflow.offset-marker"

// Snapshot is the persisted state of one key.
type Snapshot struct {
	Key string
	// Value is the codec-encoded state; nil is a tombstone (the key was
	// deleted), which still carries Offset.
	Value []byte
	// Offset is the input offset of the last record folded into Value.
	Offset int64
	// Source is where the snapshot was read from (zero for new writes); it
	// names the record in errors.
	Source Position
}

// Position names a record in a topic.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

func (p Position) String() string {
	return fmt.Sprintf("%s[%d]@%d", p.Topic, p.Partition, p.Offset)
}

// Tombstone reports whether the snapshot deletes its key.
func (s Snapshot) Tombstone() bool { return s.Value == nil }

// EncodeRecord returns the snapshot record for topic/partition.
func EncodeRecord(topic string, partition int32, s Snapshot) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: partition,
		Key:       []byte(s.Key),
		Value:     s.Value,
		Headers: []kgo.RecordHeader{
			{Key: HeaderOffset, Value: strconv.AppendInt(nil, s.Offset, 10)},
			{Key: HeaderFormat, Value: []byte(formatVersion)},
		},
	}
}

// markerRecord is written in every transaction of the transactional mode so
// that kgo always sends EndTxn (see ../shared/notes/franz-go.md: an
// offset-only transaction is otherwise never ended). Compaction keeps one.
func markerRecord(topic string, partition int32, committed int64) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: partition,
		Key:       []byte(MarkerKey),
		Value:     strconv.AppendInt(nil, committed, 10),
		Headers: []kgo.RecordHeader{
			{Key: HeaderKind, Value: []byte(kindMarker)},
			{Key: HeaderFormat, Value: []byte(formatVersion)},
		},
	}
}

// DecodeRecord parses a snapshot record. ok is false for marker records,
// which carry no key state. An error names the record's position.
func DecodeRecord(r *kgo.Record) (s Snapshot, ok bool, err error) {
	pos := Position{r.Topic, r.Partition, r.Offset}
	var offset []byte
	haveOffset := false
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderKind:
			if string(h.Value) == kindMarker {
				return Snapshot{}, false, nil
			}
		case HeaderOffset:
			offset, haveOffset = h.Value, true
		case HeaderFormat:
			if string(h.Value) != formatVersion {
				return Snapshot{}, false, fmt.Errorf("snapshot %s key %q: unsupported format %q", pos, r.Key, h.Value)
			}
		}
	}
	if string(r.Key) == MarkerKey {
		return Snapshot{}, false, nil
	}
	if !haveOffset {
		return Snapshot{}, false, fmt.Errorf("snapshot %s key %q: missing header %s", pos, r.Key, HeaderOffset)
	}
	off, perr := strconv.ParseInt(string(offset), 10, 64)
	if perr != nil {
		return Snapshot{}, false, fmt.Errorf("snapshot %s key %q: bad header %s: %w", pos, r.Key, HeaderOffset, perr)
	}
	return Snapshot{Key: string(r.Key), Value: r.Value, Offset: off, Source: pos}, true, nil
}
