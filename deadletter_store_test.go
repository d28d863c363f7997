package actorflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A store given with WithStore whose partitions do not commit outputs (the
// in-memory one, by default) needs the worker's dead-letter producer
// whatever the mode says: the worker made one only in the plain mode, and
// under the default (transactional) mode the first dead letter failed its
// partition ("no producer for the dead-letter topic"). Found by a review.
func TestDeadLettersOfAStoreThatDoesNotCommitOutputs(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, 1)
	testkit.CreateTopics(t, brokers, input+".dlq", testkit.Name(t, "unused"), 1)
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("no key")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w, err := actorflow.NewWorker(ledger.Flow(keyflow.WithNilKeyPolicy(keyflow.DeadLetter)),
		actorflow.WithBrokers(brokers...), actorflow.WithGroup(group), actorflow.WithInputTopic(input),
		actorflow.WithSnapshotTopic(snaps), actorflow.WithStore(snapshotstore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	dlq := input + ".dlq"
	testkit.Eventually(t, 30*time.Second, "the key-less record in "+dlq, func() (bool, string) {
		if st := w.Status(ctx); len(st.Failed) > 0 {
			t.Fatalf("partition failed: %+v", st.Failed)
		}
		n := len(testkit.ReadTopic(t, brokers, dlq, true))
		return n == 1, fmt.Sprintf("%d dead letters", n)
	})
}
