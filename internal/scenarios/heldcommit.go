package scenarios

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// HeldCommitNamed: a key whose fold does not return (here until the test
// releases it; in production an HTTP call without timeout, a deadlock)
// holds its partition's committed offset at its record. Through the
// worker, its Status names the key and how long the commit has been held
// (WithCommitHeldWarning logs the same with the fold's stack); the other
// keys' records past it are folded but not committed; once the fold
// returns, the offset reaches the input's end and the hold is gone.
func HeldCommitNamed(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	for _, k := range []string{"a", "stuck", "b"} {
		if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(k), Value: []byte(k)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release) // before the worker's stop, whose revoke waits for the flush
		}
	})
	flow := keyflow.New(func(kc *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
		if kc.Key() == "stuck" {
			<-release
		}
		n := 1
		if s != nil {
			n += *s
		}
		return &n, nil
	})
	w := StartWorker(t, flow, brokers, group, input, snaps, mode, actorflow.WithFailFast(),
		actorflow.WithCommitHeldWarning(200*time.Millisecond))
	testkit.Eventually(t, time.Minute, "the held commit named in the status", func() (bool, string) {
		st := w.W.Status(t.Context())
		if len(st.Partitions) != 1 {
			return false, fmt.Sprintf("%d partitions", len(st.Partitions))
		}
		p := st.Partitions[0]
		return p.CommitHeldBy == "stuck" && p.CommitHeldMs >= 200 && p.Committable == 1 && p.Committed == 1, fmt.Sprintf("%+v", p)
	})
	close(release)
	released = true
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	testkit.Eventually(t, time.Minute, "the hold gone from the status", func() (bool, string) {
		st := w.W.Status(t.Context())
		if len(st.Partitions) != 1 {
			return false, fmt.Sprintf("%d partitions", len(st.Partitions))
		}
		p := st.Partitions[0]
		return p.CommitHeldMs == 0 && p.CommitHeldBy == "", fmt.Sprintf("%+v", p)
	})
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// PausedPartitionLagFollowsTheInput: a partition whose fetches are paused
// (its in-flight budget full behind a stuck key) is not fetched, and its
// lag froze at the last fetch's high watermark while the input grew — an
// operator's lag alert understated the backlog exactly when the partition
// stalled (helper-110: 106 instead of 506, ten seconds later still). The
// worker lists the end offsets of partitions not fetched lately: the
// status's high watermark reaches the log end and the lag says the backlog.
func PausedPartitionLagFollowsTheInput(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // on a failure; after the worker's stop, whose revoke then waits out its bound
	flow := keyflow.New(func(kc *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
		<-release // every record is the stuck key's: each stays in flight
		return s, nil
	})
	w := StartWorker(t, flow, brokers, group, input, snaps, mode, actorflow.WithMaxInFlight(20))
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	produce := func(n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Key: []byte("stuck"), Value: []byte("v")}
		}
		if err := pcl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(100)
	testkit.Eventually(t, time.Minute, "the partition paused", func() (bool, string) {
		st := w.W.Status(t.Context())
		return len(st.Paused) == 1, fmt.Sprint(st.Paused)
	})
	produce(300)
	ends, err := kadm.NewClient(pcl).ListEndOffsets(t.Context(), input)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(input, 0)
	testkit.Eventually(t, time.Minute, "the paused partition's high watermark at the log end", func() (bool, string) {
		st := w.W.Status(t.Context())
		if len(st.Partitions) != 1 {
			return false, fmt.Sprint(st.Partitions)
		}
		p := st.Partitions[0]
		return p.HighWatermark == end.Offset && p.Lag == end.Offset-p.Committed,
			fmt.Sprintf("high watermark %d, lag %d, committed %d; the log end %d", p.HighWatermark, p.Lag, p.Committed, end.Offset)
	})
	free()
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}
