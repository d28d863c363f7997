package snapshotstore

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kfakeresp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

// polledLog is a kafkaLogReader whose polls are recorded: the read position
// and the error of each, as ReadToTarget saw them.
type polledLog struct {
	*kafkaLogReader
	polls []polled
}

type polled struct {
	next int64
	err  error
}

func (p *polledLog) Poll(ctx context.Context) ([]*kgo.Record, int64, error) {
	recs, next, err := p.kafkaLogReader.Poll(ctx)
	p.polls = append(p.polls, polled{next, err})
	return recs, next, err
}

// An OFFSET_OUT_OF_RANGE fetch decides nothing while the ListOffsets that
// would explain it fails transiently (a leadership move): outOfRange returns
// that transient error, the position stays, and ReadToTarget retries, as it
// would the fetch; the retry then reads the real log start (or end) and the
// read completes. Made permanent, the out-of-range answer would fail a
// recovery over a passing leader move. Both lists: the log start, after
// DeleteRecords removed the head between the read's start and its first
// fetch; the log end, after a (made-up) out-of-range answer at the log start.
func TestOutOfRangeWithATransientListOffsetsErrorIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timestamp int64 // the ListOffsets answered LEADER_NOT_AVAILABLE once
		deleteTo  int64 // DeleteRecords before the first fetch; 0: the fetch is answered out of range
		want      []int64
		retryNext int64 // the position after the retried poll
	}{
		{name: "log start", timestamp: -2, deleteTo: 2, want: []int64{2}, retryNext: 2},
		{name: "log end", timestamp: -1, want: []int64{0, 1, 2}, retryNext: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "snaps"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			brokers := c.ListenAddrs()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("snaps"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for _, k := range []string{"k0", "k1", "k2"} { // one batch each: offsets 0, 1, 2
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte("v")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}

			// The first fetch meets OFFSET_OUT_OF_RANGE; the next ListOffsets
			// at tc.timestamp (outOfRange's) is answered LEADER_NOT_AVAILABLE.
			var fetched, transient atomic.Int32
			deleted := make(chan error, 1)
			failList := func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				req := kreq.(*kmsg.ListOffsetsRequest)
				if req.Topics[0].Partitions[0].Timestamp != tc.timestamp {
					return nil, nil, false
				}
				transient.Add(1)
				return kfakeresp.ListOffsetsError(req, kerr.LeaderNotAvailable.Code), nil, true // handled: the control is dropped
			}
			c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				if fetched.Add(1) > 1 {
					c.DropControl()
					return nil, nil, false
				}
				c.ControlKey(kmsg.ListOffsets.Int16(), failList)
				if tc.deleteTo > 0 {
					// The head goes while this fetch waits: kfake answers it
					// out of range.
					c.SleepControl(func() {
						del := kadm.Offsets{}
						del.Add(kadm.Offset{Topic: "snaps", Partition: 0, At: tc.deleteTo})
						res, err := kadm.NewClient(cl).DeleteRecords(ctx, del)
						if err == nil {
							err = res.Error()
						}
						deleted <- err
					})
					return nil, nil, false
				}
				deleted <- nil
				return kfakeresp.FetchError(kreq, kerr.OffsetOutOfRange.Code), nil, true
			})

			r, err := newKafkaLogReader(brokers, "snaps", 0, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			log := &polledLog{kafkaLogReader: r}
			var got []int64
			err = ReadToTarget(ctx, log, ReadOptions{Partition: "snaps[0]", StallTimeout: 10 * time.Second, Logger: zaptest.NewLogger(t)},
				func(rec *kgo.Record) error { got = append(got, rec.Offset); return nil })
			if err != nil {
				t.Fatalf("ReadToTarget = %v, want the read retried past the transient ListOffsets error", err)
			}
			select {
			case derr := <-deleted: // sent before the first fetch was answered
				if derr != nil {
					t.Fatalf("delete records: %v", derr)
				}
			default:
				t.Fatal("the first fetch never reached the cluster")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("read offsets %v, want %v", got, tc.want)
			}
			// The recovery's log-start check judges the start the read
			// ended up at: records deleted while it ran are deleted records.
			if r.start != tc.deleteTo {
				t.Errorf("the reader's log start %d, want %d", r.start, tc.deleteTo)
			}
			if n := transient.Load(); n != 1 {
				t.Fatalf("%d ListOffsets (timestamp %d) answered LEADER_NOT_AVAILABLE, want 1", n, tc.timestamp)
			}
			// The first poll is the out-of-range fetch: it fails transiently
			// with the list's error and leaves the position at the log start
			// the read began from; the retry reads on (to the log start
			// listed again, or through the records).
			if len(log.polls) < 2 {
				t.Fatalf("polls %+v, want the failed one and its retry", log.polls)
			}
			if p := log.polls[0]; p.next != 0 || !Transient(p.err) || !errors.Is(p.err, kerr.LeaderNotAvailable) {
				t.Errorf("first poll: position %d, error %v; want position 0 and a transient error wrapping LEADER_NOT_AVAILABLE", p.next, p.err)
			}
			if p := log.polls[1]; p.next != tc.retryNext || p.err != nil {
				t.Errorf("retried poll: position %d, error %v; want position %d", p.next, p.err, tc.retryNext)
			}
		})
	}
}
