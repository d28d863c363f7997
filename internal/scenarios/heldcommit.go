package scenarios

import (
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
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
