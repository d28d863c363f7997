package snapshotstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// markerTailWindows are the spans below a snapshot partition's last stable
// offset read, one after the other, for its latest offset marker: the
// marker is the last record of every transactional commit (and written
// just before the plain mode's offset commit), so the first span finds it
// unless aborted transactions or another writer's records followed it; the
// last reads the whole partition.
var markerTailWindows = []int64{64, 1 << 16, -1}

// markerTailReadFor bounds the whole read.
const markerTailReadFor = 10 * time.Second

// recordedInputParts reads the latest offset marker of snapshot partition
// q from the partition's tail (read_committed) and returns the input
// partition count it records: 0 when the partition has no marker or its
// marker records none.
func (k *Kafka) recordedInputParts(ctx context.Context, q int32) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, markerTailReadFor)
	defer cancel()
	r, err := newKafkaLogReader(k.brokers, k.topic, q, true, k.cfg.clientOpts)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	start, err := r.Start(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s[%d]: log start: %w", k.topic, q, err)
	}
	_, lso, err := r.Ends(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s[%d]: log end: %w", k.topic, q, err)
	}
	for _, w := range markerTailWindows {
		from := start
		if w > 0 {
			from = max(start, lso-w)
		}
		r.pos = from
		parts, found := int32(0), false
		for r.pos < lso {
			recs, _, err := r.Poll(ctx)
			if err != nil {
				return 0, err
			}
			for _, rec := range recs {
				if rec.Offset >= lso || string(rec.Key) != MarkerKey {
					continue
				}
				parts, found = markerInputParts(rec), true
			}
		}
		if found || from == start {
			return parts, nil
		}
	}
	return 0, nil
}

// markerInputParts is the input partition count an offset marker records
// (HeaderInputPartitions; 0: none).
func markerInputParts(marker *kgo.Record) int32 {
	parts := int32(0)
	for _, h := range marker.Headers {
		if h.Key == HeaderInputPartitions {
			if n, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil && n > 0 {
				parts = int32(n)
			}
		}
	}
	return parts
}
