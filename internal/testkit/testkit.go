// Package testkit holds helpers shared by the kfake and real-broker tests:
// the broker is a parameter (a list of seed addresses).
package testkit

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kfake starts an in-process kfake cluster, closed at the end of the test.
func Kfake(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	// kfake's cleaner compacts every hour by default and moves a compacted
	// partition's log start, which Apache Kafka's never does (KAFKA-7556),
	// and the recovery takes that for deleted snapshots (ErrLostState): off,
	// but where a test compacts on purpose (Cluster.Compact).
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "315360000000"})}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// SilentBroker is the address of a listener that accepts connections and
// never answers, closed at the end of the test: brokers that cannot be
// reached, for a worker kept starting (Run retries until its start
// timeout).
func SilentBroker(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

var seq atomic.Int64

// Name returns a name unique in the process, for topics and groups.
func Name(t testing.TB, prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1))
}

// Client returns a kgo client closed at the end of the test.
func Client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopics creates the input topic and the compacted snapshot topic.
func CreateTopics(t testing.TB, brokers []string, input, snapshot string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, input); err != nil {
		t.Fatalf("create %s: %v", input, err)
	}
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"cleanup.policy": &compact}, snapshot); err != nil {
		t.Fatalf("create %s: %v", snapshot, err)
	}
	AwaitTopics(t, adm, partitions, input, snapshot)
}

// AwaitTopics waits until the broker's metadata lists every topic with its
// partitions led. CreateTopics answers once the controller has committed
// the topic; a broker's metadata cache applies it a little later, and a
// worker started in between was told the snapshot topic "does not exist"
// (seen once in CI on Kafka 4.4.0, PoisonRecordFailFast).
func AwaitTopics(t testing.TB, adm *kadm.Client, partitions int32, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := "no answer"
	for {
		tds, err := adm.ListTopics(ctx, topics...)
		if err == nil {
			last = ""
			for _, name := range topics {
				td, ok := tds[name]
				switch {
				case !ok || td.Err != nil:
					last = fmt.Sprintf("topic %s not listed (%v)", name, td.Err)
				case int32(len(td.Partitions)) != partitions:
					last = fmt.Sprintf("topic %s lists %d of %d partitions", name, len(td.Partitions), partitions)
				default:
					for _, pd := range td.Partitions {
						if pd.Err != nil || pd.Leader < 0 {
							last = fmt.Sprintf("%s[%d] has no leader (%v)", name, pd.Partition, pd.Err)
						}
					}
				}
			}
			if last == "" {
				return
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topics %v not ready after 30 s: %s", topics, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ProduceLedger produces n ledger events from gen to topic and folds them
// into exp.
func ProduceLedger(t testing.TB, brokers []string, topic string, gen *ledger.Generator, n int, exp ledger.Expected, opts ...kgo.Opt) {
	t.Helper()
	cl := Client(t, brokers, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, LedgerRecords(topic, gen, n, exp)...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// LedgerRecords returns n ledger events from gen as records of topic and
// folds them into exp.
func LedgerRecords(topic string, gen *ledger.Generator, n int, exp ledger.Expected) []*kgo.Record {
	recs := make([]*kgo.Record, 0, n)
	for range n {
		ev := gen.Next()
		exp.Add(ev)
		recs = append(recs, ledger.Record(topic, ev))
	}
	return recs
}

// Eventually polls cond until it holds or the timeout passes: for awaiting
// a state of the broker, which pushes no event.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last: %s)", timeout, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitCommittedAtEnd waits until group's committed offset of every
// partition of topic equals the partition's end offset.
func WaitCommittedAtEnd(t testing.TB, brokers []string, group, topic string, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	Eventually(t, timeout, "committed offsets at the log end", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		com, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		ok := true
		state := ""
		ends.Each(func(o kadm.ListedOffset) {
			c, found := com.Lookup(o.Topic, o.Partition)
			state += fmt.Sprintf(" p%d:%d/%d", o.Partition, c.At, o.Offset)
			if !found || c.At != o.Offset {
				ok = false
			}
		})
		return ok, state
	})
}

// StartMember starts a consumer-group member of group on topic, polling in
// the background (so it stays a healthy member) until t ends; it does not
// wait for the join.
func StartMember(t testing.TB, brokers []string, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := Client(t, brokers, append([]kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
	}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cl
}

// JoinMember is StartMember, waiting until the member has joined
// (generation >= 1).
func JoinMember(t testing.TB, brokers []string, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := StartMember(t, brokers, group, topic, opts...)
	Eventually(t, 30*time.Second, "member joined", func() (bool, string) {
		m, g := cl.GroupMetadata()
		return g >= 1 && m != "", m
	})
	return cl
}
