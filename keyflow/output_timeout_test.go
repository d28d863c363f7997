package keyflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const outputTimeout = 300 * time.Millisecond

func emitFold(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
	if err := kc.Emit(&kgo.Record{Key: r.Key, Value: r.Value}); err != nil {
		return nil, err
	}
	return countFold(kc, s, r)
}

func emitFlow(producer *kgo.Client, topic string) *keyflow.Flow[counter] {
	return keyflow.New(emitFold, keyflow.WithOutput(producer, topic), keyflow.WithOutputTimeout(outputTimeout))
}

// missingTopicProducer produces to a cluster without auto-creation and
// waits for a missing topic forever (by default kgo gives up on an unknown
// topic after 4 metadata loads; an unreachable broker it retries forever).
func missingTopicProducer(t *testing.T) *kgo.Client {
	_, brokers := testkit.Kfake(t)
	return testkit.Client(t, brokers, kgo.UnknownTopicRetries(-1))
}

// checkTimeoutError asserts the error of an unacknowledged output: matched
// by errors.Is, naming input topic, partition and offset, key, output topic
// and the timeout.
func checkTimeoutError(t *testing.T, err error, outTopic string) {
	t.Helper()
	t.Logf("partition error: %v", err)
	if !errors.Is(err, keyflow.ErrOutputTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v: want ErrOutputTimeout and context.DeadlineExceeded", err)
	}
	for _, want := range []string{inTopic + "[0]", "offset 0", `key "a"`, outTopic, outputTimeout.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// A periodic flush waiting for an output that is never acknowledged (its
// topic does not exist) fails the key and its partition once the output
// timeout passes; nothing is committed past the record.
func TestOutputTimeoutFailsFlushOnMissingTopic(t *testing.T) {
	p := runPartition(t, emitFlow(missingTopicProducer(t), "missing"), 10*time.Millisecond)
	p.send(rec(0, "a", ""))
	err := p.awaitStopped(10 * time.Second)
	checkTimeoutError(t, err, "missing")
	if c := p.mem.Committed(inTopic, 0); c > 0 {
		t.Fatalf("committed %d past the record whose output was not acknowledged", c)
	}
	if _, ok := p.mem.Latest(inTopic, 0)["a"]; ok {
		t.Fatal("a snapshot covering the unacknowledged output was written")
	}
}

// A revoke's flush ends with the timeout error instead of holding the
// revoke until the teardown bound.
func TestOutputTimeoutBoundsRevokeFlush(t *testing.T) {
	p := runPartition(t, emitFlow(missingTopicProducer(t), "missing"), time.Hour)
	p.send(rec(0, "a", ""))
	p.awaitPhase("running")
	p.sys.Root.Send(p.pid, &partitionflow.Revoke{Flush: true})
	err := p.awaitStopped(10 * time.Second)
	checkTimeoutError(t, err, "missing")
	if c := p.mem.Committed(inTopic, 0); c > 0 {
		t.Fatalf("committed %d past the record whose output was not acknowledged", c)
	}
}

// A produce request already sent whose response never comes cannot be
// failed by kgo through its context (an idempotent producer must not forget
// a batch the broker may have written): the key's own deadline still bounds
// it.
func TestOutputTimeoutBoundsWithheldAck(t *testing.T) {
	cluster, brokers := testkit.Kfake(t)
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(context.Background(), 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	cluster.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		<-release // withhold every produce response until the test ends
		return nil, nil, false
	})
	producer := testkit.Client(t, brokers)
	t.Cleanup(func() { close(release) }) // runs before the client and cluster close
	p := runPartition(t, emitFlow(producer, "out"), 10*time.Millisecond)
	p.send(rec(0, "a", ""))
	err := p.awaitStopped(10 * time.Second)
	checkTimeoutError(t, err, "out")
	if c := p.mem.Committed(inTopic, 0); c > 0 {
		t.Fatalf("committed %d past the record whose output was not acknowledged", c)
	}
}
