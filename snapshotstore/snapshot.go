package snapshotstore

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record header names of the snapshot format. See ARCHITECTURE.md, "Snapshot
// record format": a foreign client needs nothing else to read a snapshot topic.
const (
	// HeaderOffset carries, as decimal ASCII, the input offset of the last
	// record folded into the snapshot. Replayed records at or below it are
	// skipped, so state effects apply exactly once.
	HeaderOffset = "actorflow.offset"
	// HeaderFormat carries the format version: "2" is written (it adds
	// HeaderTimers), "3" on a deleted key's record with timers
	// (HeaderDeleted; under KafkaConfig.SnapshotFormat 2 such a record is
	// a format-2 tombstone instead); "1" (no timers) is still read.
	HeaderFormat = "actorflow.format"
	// HeaderDeleted, on a record of format "3", says the key's state is
	// deleted although the record is no tombstone: the state of a key
	// deleted (its fold returned nil) while it has timers pending is
	// written as an empty value with this header ("1"), because
	// compaction removes a tombstone after the topic's
	// delete.retention.ms (a day by default), and the timers with it: a
	// timer due later vanished at the next recovery. The key's first
	// snapshot without timers is a tombstone again. Readers decode it as a
	// tombstone (Snapshot.Value nil).
	HeaderDeleted = "actorflow.deleted"
	// HeaderTimers carries the key's pending timers as a JSON array of
	// {"name": string, "at": Unix milliseconds}, sorted by due time; absent
	// when none is pending. It is a header so that the value stays the
	// flow's codec output and readers of the state need not know it.
	HeaderTimers = "actorflow.timers"
	// HeaderKind is "offset-marker" on the marker record every transaction of
	// the transactional mode writes (absent on snapshots).
	HeaderKind = "actorflow.kind"
	// HeaderInputPartitions carries, on a marker record, the input topic's
	// partition count, as decimal ASCII, when the partition recovered: the
	// count its keys were partitioned by. A recovery under another count
	// refuses to start (ErrInputRepartitioned). Absent when unknown (the
	// count could not be read; markers before it).
	HeaderInputPartitions = "actorflow.input-partitions"
	// HeaderGroup carries, on a marker record, the consumer group whose
	// commit wrote it: a snapshot topic serves one group, and a recovery
	// under another group refuses to start (ErrForeignSnapshots). Absent
	// on markers written before it, and when the group is unknown.
	HeaderGroup = "actorflow.group"
	// HeaderSnapshotsLogStart carries, on a marker record, the snapshot
	// partition's log start offset a recovery accepted, as decimal ASCII:
	// WithResetLostState's after records below it were deleted, or the one
	// a partition with no history found. A recovery refuses a log start
	// above the one its latest marker records (ErrLostState). Absent when 0.
	HeaderSnapshotsLogStart = "actorflow.snapshots-log-start"

	formatVersion = "2"
	// formatV1 is the format before durable timers: read, never written.
	formatV1 = "1"
	// formatDeleted is written only on a deleted key's record with timers
	// (HeaderDeleted): a reader of format 2 alone would decode its empty
	// value as state; it refuses the format instead.
	formatDeleted = "3"
	kindMarker    = "offset-marker"
)

// MarkerKey is the key of the per-partition offset-marker record of the
// transactional mode. Input records with this key are rejected.
const MarkerKey = "\x00actorflow.offset-marker"

// KeylessKey is the snapshot key under which a partition records its
// key-less input records sent to the dead-letter topic
// (keyflow.WithNilKeyPolicy(keyflow.DeadLetter)): a tombstone whose offset
// header is the last such record handled, so that a replay does not
// dead-letter it again. Readers see a tombstone and skip it. Input records
// with this key are rejected.
const KeylessKey = "\x00actorflow.keyless"

// Reserved reports whether key is one of actorflow's own snapshot records'
// keys (MarkerKey, KeylessKey), which no input record's key may be.
func Reserved(key string) bool { return key == MarkerKey || key == KeylessKey }

// ReservedBytes is Reserved of a record's key, for the per-record path: one
// byte compared for almost every key (the reserved ones start with 0x00),
// and no string made (a conversion passed as an argument copies the key).
func ReservedBytes(key []byte) bool {
	return len(key) > 0 && key[0] == 0 && (string(key) == MarkerKey || string(key) == KeylessKey)
}

// Snapshot is the persisted state of one key.
type Snapshot struct {
	Key string
	// Value is the codec-encoded state; nil is a tombstone (the key was
	// deleted), which still carries Offset.
	Value []byte
	// Offset is the input offset of the last record folded into Value.
	Offset int64
	// Timers are the key's pending timers (durable timers: re-armed when
	// the key is loaded), in HeaderTimers.
	Timers []Timer
	// Source is where the snapshot was read from (zero for new writes); it
	// names the record in errors.
	Source Position
}

// Timer is one pending processing-time timer of a key.
type Timer struct {
	Name string
	At   time.Time // due time; persisted at millisecond precision
}

// NextTimer returns the earliest due time of s's timers (false: none).
func (s Snapshot) NextTimer() (time.Time, bool) {
	var next time.Time
	for i, t := range s.Timers {
		if i == 0 || t.At.Before(next) {
			next = t.At
		}
	}
	return next, len(s.Timers) > 0
}

// timerJSON is one element of HeaderTimers.
type timerJSON struct {
	Name string `json:"name"`
	At   int64  `json:"at"` // Unix milliseconds
}

func encodeTimers(ts []Timer) []byte {
	out := make([]timerJSON, len(ts))
	for i, t := range ts {
		out[i] = timerJSON{Name: t.Name, At: t.At.UnixMilli()}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	b, _ := json.Marshal(out) // strings and integers: cannot fail
	return b
}

func decodeTimers(b []byte) ([]Timer, error) {
	var in []timerJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	ts := make([]Timer, len(in))
	for i, t := range in {
		ts[i] = Timer{Name: t.Name, At: time.UnixMilli(t.At)}
	}
	return ts, nil
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
	// The key and the offset header share one array, and the format header
	// one for every record (kgo only reads them): a snapshot per key at a
	// million keys made each allocation count.
	r := &kgo.Record{}
	encodeInto(r, make([]kgo.RecordHeader, 2, headersOf(s)), make([]byte, 0, len(s.Key)+20), topic, partition, s, false)
	return r
}

// encodeInto fills r with s's record, its key and offset header in buf
// (cap ≥ len(s.Key)+20) and its headers in hdrs (len 2); tombstoneDeleted:
// a deleted state with timers is a tombstone (KafkaConfig.SnapshotFormat 2).
func encodeInto(r *kgo.Record, hdrs []kgo.RecordHeader, buf []byte, topic string, partition int32, s Snapshot, tombstoneDeleted bool) {
	buf = append(buf, s.Key...)
	key := buf[:len(s.Key):len(s.Key)]
	offset := strconv.AppendInt(buf[len(s.Key):], s.Offset, 10)
	hdrs[0] = kgo.RecordHeader{Key: HeaderOffset, Value: offset}
	hdrs[1] = kgo.RecordHeader{Key: HeaderFormat, Value: formatVersionBytes}
	*r = kgo.Record{Topic: topic, Partition: partition, Key: key, Value: s.Value, Headers: hdrs}
	if len(s.Timers) > 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderTimers, Value: encodeTimers(s.Timers)})
		if s.Value == nil && !tombstoneDeleted { // deleted, with timers: no tombstone, which compaction would drop with them
			r.Value = []byte{}
			r.Headers[1].Value = formatDeletedBytes
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderDeleted, Value: deletedBytes})
		}
	}
}

// encodeBatch returns the records of a transaction's snapshots followed by
// its outputs, with room for extra more. The records, keys and headers of
// the snapshots come from one array each: they live and die together (kgo
// drops them when the produce is answered), and an allocation for each was
// a tenth of all allocations at a million keys. The outputs are the
// emitted records themselves (Batch.Outputs: the store owns them), their
// Context cleared: kgo keeps a record's context once set (Client.Produce),
// and a retried transaction produces them again under a new one. Copying
// them instead was 170 MB of every 1 230 MB the transactional worker with
// one output per event allocated per 1M events (cmd/bench E2E, txn-out).
func encodeBatch(topic string, partition int32, ws []Snapshot, outputs []*kgo.Record, extra int, tombstoneDeleted bool) []*kgo.Record {
	recs := make([]*kgo.Record, len(ws), len(ws)+len(outputs)+extra)
	slab := make([]kgo.Record, len(ws))
	size, nh := 0, 0
	for _, w := range ws {
		size += len(w.Key) + 20
		nh += headersOf(w)
	}
	hdrs := make([]kgo.RecordHeader, nh)
	buf := make([]byte, 0, size)
	h := 0
	for i, w := range ws {
		// Capped: a record's key and headers never spill into the next's.
		b := buf[len(buf) : len(buf) : len(buf)+len(w.Key)+20]
		k := headersOf(w)
		encodeInto(&slab[i], hdrs[h:h+2:h+k], b, topic, partition, w, tombstoneDeleted)
		h += k
		buf = buf[:len(buf)+len(w.Key)+20]
		recs[i] = &slab[i]
	}
	for _, o := range outputs {
		o.Context = nil
		recs = append(recs, o)
	}
	return recs
}

// headersOf is how many headers s's record has: the offset and the format,
// its timers if it has any, and HeaderDeleted for a deleted key's with
// timers.
func headersOf(s Snapshot) int {
	switch {
	case len(s.Timers) > 0 && s.Value == nil:
		return 4 // HeaderDeleted
	case len(s.Timers) > 0:
		return 3
	}
	return 2
}

// formatVersionBytes is the format header's value, shared by every record
// (read-only).
var formatVersionBytes = []byte(formatVersion)

// formatDeletedBytes and deletedBytes are the format and deleted headers'
// values of a deleted key's record with timers (read-only).
var formatDeletedBytes, deletedBytes = []byte(formatDeleted), []byte("1")

// markerMeta is what a partition's every offset marker records besides the
// offset: the input's partition count its keys were partitioned by
// (HeaderInputPartitions; 0: unknown, no header), the group whose commits
// write it (HeaderGroup; "": none), and the snapshot partition's accepted
// log start (HeaderSnapshotsLogStart; 0: none).
type markerMeta struct {
	inputPartitions int32
	group           string
	logStart        int64
}

// markerRecord is written in every transaction of the transactional mode so
// that kgo always sends EndTxn (see ../shared/notes/franz-go.md: an
// offset-only transaction is otherwise never ended), and by every commit of
// the plain mode. Compaction keeps the latest.
func markerRecord(topic string, partition int32, committed int64, m markerMeta) *kgo.Record {
	inputPartitions := m.inputPartitions
	r := &kgo.Record{
		Topic:     topic,
		Partition: partition,
		Key:       []byte(MarkerKey),
		Value:     strconv.AppendInt(nil, committed, 10),
		Headers: []kgo.RecordHeader{
			{Key: HeaderKind, Value: []byte(kindMarker)},
			{Key: HeaderFormat, Value: formatVersionBytes},
		},
	}
	if inputPartitions > 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderInputPartitions, Value: strconv.AppendInt(nil, int64(inputPartitions), 10)})
	}
	if m.group != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderGroup, Value: []byte(m.group)})
	}
	if m.logStart > 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderSnapshotsLogStart, Value: strconv.AppendInt(nil, m.logStart, 10)})
	}
	return r
}

// DecodeRecord parses a snapshot record. ok is false for marker records,
// which carry no key state. An error names the record's position.
func DecodeRecord(r *kgo.Record) (s Snapshot, ok bool, err error) {
	pos := Position{r.Topic, r.Partition, r.Offset}
	var offset, timers, format []byte
	haveOffset, haveTimers, deleted := false, false, false
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderKind:
			if string(h.Value) == kindMarker {
				return Snapshot{}, false, nil
			}
		case HeaderOffset:
			offset, haveOffset = h.Value, true
		case HeaderTimers:
			timers, haveTimers = h.Value, true
		case HeaderDeleted:
			deleted = true
		case HeaderFormat:
			format = h.Value
			if v := string(h.Value); v != formatVersion && v != formatV1 && v != formatDeleted {
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
	s = Snapshot{Key: string(r.Key), Value: r.Value, Offset: off, Source: pos}
	if format3 := formatDeleted == string(format); deleted || format3 {
		// Format 3 is a deleted key's record with timers: the header,
		// the format and an empty value go together.
		if !deleted || !format3 || len(r.Value) != 0 || !haveTimers {
			return Snapshot{}, false, fmt.Errorf("snapshot %s key %q: a deleted key's record needs format %s, header %s, its timers and an empty value (format %q, header present %v, %d value bytes)",
				pos, r.Key, formatDeleted, HeaderDeleted, format, deleted, len(r.Value))
		}
		s.Value = nil
	}
	if haveTimers {
		if s.Timers, err = decodeTimers(timers); err != nil {
			return Snapshot{}, false, fmt.Errorf("snapshot %s key %q: bad header %s: %w", pos, r.Key, HeaderTimers, err)
		}
	}
	return s, true, nil
}
