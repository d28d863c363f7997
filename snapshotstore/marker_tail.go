package snapshotstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow/internal/retry"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The spans of a snapshot partition read for its latest offset marker,
// newest first: the first markerTailFirst offsets below the last stable
// offset, then each span twice the one before, ending where that one began,
// until a marker is found or markerTailMax offsets were read. Every commit
// ends with its marker (the transaction's last record; the plain mode's is
// written just before its offset commit), so the first span finds it
// unless aborted transactions or another writer's records followed it; a
// partition with no marker within markerTailMax judges nothing.
const (
	markerTailFirst = 64
	markerTailMax   = 1 << 20
)

// recordedInputCount is the input partition count the latest marker of the
// lowest-numbered snapshot partition below p that has records records, for
// a partition p with no history of its own (recordedCount). Partition 0
// first, where records nearly always are; the next only where partition 0
// has none: a group whose partition 0 got no input never wrote a marker
// there, and an added partition then started unchecked. Only that one
// partition is read (its tail, up to markerTailMax offsets): reading on
// past one with records but no counted marker (history from before
// markers counted) cost up to p such reads per recovery (a review). One
// request lists the partitions' last stable offsets. None with records, or
// no count where there are: parts 0 (a group's first start).
func (k *Kafka) recordedInputCount(ctx context.Context, r *kafkaLogReader, ro ReadOptions, p int32) (recordedCount, error) {
	rc := recordedCount{snaps: fmt.Sprintf("%s[0]", r.topic), partition: p}
	below := make([]int32, p)
	for i := range below {
		below[i] = int32(i)
	}
	began := time.Now()
	var lsos map[int32]int64
	err := retry.Do(ctx, requestRetry(ro, k.cfg.log, began, r.topic+"'s last stable offsets"), func() (err error) {
		lsos, err = listOffsets(ctx, r.cl, r.topic, below, 1, -1)
		return err
	})
	if err != nil {
		return rc, fmt.Errorf("%s: last stable offsets: %w", r.topic, err)
	}
	for _, q := range below {
		if lsos[q] <= 0 {
			continue // never written (a log start above 0 is read below)
		}
		parts, err := k.recordedInputParts(ctx, r.sibling(q), ro)
		return recordedCount{snaps: fmt.Sprintf("%s[%d]", r.topic, q), partition: p, parts: parts}, err
	}
	return rc, nil
}

// recordedInputParts reads the latest offset marker of the snapshot
// partition r reads from the partition's tail (r read_committed) and
// returns the input partition count it records: 0 when no marker is within
// reach or the marker records none. A transient error is retried as the
// recovery read's requests are (ro: its options, ro.Partition naming the
// partition recovering).
func (k *Kafka) recordedInputParts(ctx context.Context, r *kafkaLogReader, ro ReadOptions) (int32, error) {
	name := fmt.Sprintf("%s[%d]", r.topic, r.partition)
	began := time.Now()
	try := func(what string, fn func() error) error {
		if err := retry.Do(ctx, requestRetry(ro, k.cfg.log, began, name+"'s "+what), fn); err != nil {
			return fmt.Errorf("%s: %s: %w", name, what, err)
		}
		return nil
	}
	var start, lso int64
	if err := try("log start", func() (err error) { start, err = r.Start(ctx); return err }); err != nil {
		return 0, err
	}
	if err := try("last stable offset", func() (err error) { lso, err = listOffset(ctx, r.cl, r.topic, r.partition, 1, -1); return err }); err != nil {
		return 0, err
	}
	to, span := lso, int64(markerTailFirst)
	for to > start && lso-to < markerTailMax {
		from := max(start, to-span)
		r.pos = from
		parts, found := int32(0), false
		for r.pos < to {
			var recs []*kgo.Record
			if err := try("tail", func() (err error) { recs, _, err = r.Poll(ctx); return err }); err != nil {
				return 0, err
			}
			for _, rec := range recs {
				if rec.Offset < to && string(rec.Key) == MarkerKey { // past to: a span read before
					parts, found = readMarkerMeta(rec).inputPartitions, true
				}
			}
		}
		if found {
			return parts, nil
		}
		to, span = from, 2*span
	}
	return 0, nil
}

// readMarkerMeta is what an offset marker records besides its offset
// (markerMeta; zero values for headers it lacks or cannot parse).
func readMarkerMeta(marker *kgo.Record) markerMeta {
	var m markerMeta
	for _, h := range marker.Headers {
		switch h.Key {
		case HeaderInputPartitions:
			if n, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil && n > 0 {
				m.inputPartitions = int32(n)
			}
		case HeaderGroup:
			m.group = string(h.Value)
		case HeaderSnapshotsLogStart:
			if n, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && n > 0 {
				m.logStart = n
			}
		}
	}
	return m
}
