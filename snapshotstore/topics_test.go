package snapshotstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A snapshot topic that is not compacted loses the state of idle keys when
// retention deletes their snapshots: EnsureTopics refuses it, naming the
// topic and the setting.
func TestEnsureTopicsChecksTheSnapshotCleanupPolicy(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	cl := testkit.Client(t, brokers)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	input := testkit.Name(t, "in")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, input); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cfg       map[string]*string
		policy    string // "" when accepted
		retention string // the deleting retention named, under compact,delete
	}{
		{"explicit delete", map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, "delete", ""},
		{"broker default (delete)", nil, "delete", ""},
		{"compact", map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "", ""},
		// Retention deletes the segments of idle keys' snapshots under
		// compact,delete too; the latest marker survives in the newest
		// segment, so the lost-state check cannot see it (found by a review).
		{"compact,delete with a retention", map[string]*string{"cleanup.policy": kadm.StringPtr("compact,delete"), "retention.ms": kadm.StringPtr("86400000")},
			"compact,delete", "retention.ms=86400000"},
		{"compact,delete without retention", map[string]*string{"cleanup.policy": kadm.StringPtr("compact,delete"),
			"retention.ms": kadm.StringPtr("-1"), "retention.bytes": kadm.StringPtr("-1")}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snaps := testkit.Name(t, "snaps")
			if _, err := adm.CreateTopic(ctx, 1, 1, tc.cfg, snaps); err != nil {
				t.Fatal(err)
			}
			err := snapshotstore.EnsureTopics(ctx, cl, input, snaps, snapshotstore.TopicSpec{})
			if tc.policy == "" {
				if err != nil {
					t.Fatalf("EnsureTopics: %v", err)
				}
				return
			}
			var pe *snapshotstore.CleanupPolicyError
			if !errors.Is(err, snapshotstore.ErrTopicSetup) || !errors.As(err, &pe) {
				t.Fatalf("EnsureTopics = %v, want a *CleanupPolicyError matching ErrTopicSetup", err)
			}
			if pe.Topic != snaps || pe.Policy != tc.policy || pe.Retention != tc.retention || pe.Err != nil {
				t.Errorf("CleanupPolicyError = %+v, want topic %q policy %q retention %q", pe, snaps, tc.policy, tc.retention)
			}
			if msg := err.Error(); tc.retention != "" && !strings.Contains(msg, tc.retention) {
				t.Errorf("error %q does not name the retention", msg)
			}
			if msg := err.Error(); !strings.Contains(msg, snaps) || !strings.Contains(msg, "cleanup.policy="+tc.policy) || !strings.Contains(msg, "compact") {
				t.Errorf("error %q does not name the topic, the setting and what it must contain", msg)
			}
		})
	}
	t.Run("created by EnsureTopics", func(t *testing.T) {
		in, snaps := testkit.Name(t, "in"), testkit.Name(t, "snaps")
		if err := snapshotstore.EnsureTopics(ctx, cl, in, snaps, snapshotstore.TopicSpec{Create: true, Partitions: 2, ReplicationFactor: -1}); err != nil {
			t.Fatalf("EnsureTopics with creation: %v", err)
		}
		// A fresh client: kgo may answer the first one's metadata from its cache.
		if err := snapshotstore.EnsureTopics(ctx, testkit.Client(t, brokers), in, snaps, snapshotstore.TopicSpec{}); err != nil {
			t.Fatalf("EnsureTopics on the topics it created: %v", err)
		}
	})
}

// A topic EnsureTopics (or EnsureOutputTopic) just created is seen at once
// through the same client: kgo cached the answer that it was missing for
// MetadataMinAge (5 s), and the worker's partition count for its output and
// dead-letter topics waited that long at every start that created topics.
func TestTopicJustCreatedIsSeenThroughTheSameClient(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	cl := testkit.Client(t, brokers)
	ctx := context.Background()
	input, snaps, out := testkit.Name(t, "in"), testkit.Name(t, "snaps"), testkit.Name(t, "out")
	spec := snapshotstore.TopicSpec{Create: true, Partitions: 3, ReplicationFactor: 1}
	if err := snapshotstore.EnsureTopics(ctx, cl, input, snaps, spec); err != nil {
		t.Fatal(err)
	}
	if n, err := snapshotstore.TopicPartitions(ctx, cl, input); err != nil || n != 3 {
		t.Fatalf("TopicPartitions(%s) right after its creation = %d, %v; want 3", input, n, err)
	}
	if n, err := snapshotstore.TopicPartitions(ctx, cl, out); err != nil || n != 0 {
		t.Fatalf("TopicPartitions(%s) before its creation = %d, %v; want 0", out, n, err)
	}
	if err := snapshotstore.EnsureOutputTopic(ctx, cl, out, 3, spec); err != nil {
		t.Fatal(err)
	}
	if n, err := snapshotstore.TopicPartitions(ctx, cl, out); err != nil || n != 3 {
		t.Fatalf("TopicPartitions(%s) right after its creation = %d, %v; want 3", out, n, err)
	}
}

// TopicPartitions through a consuming client (Worker.Get counts the input's
// partitions through the group consumer's) leaves the topic in its
// subscription when the topic is missing from the answer: it purged the
// topic from the client, which takes it out of consumption for good — a
// metadata blip during a query stopped the worker consuming (found by a
// review).
func TestTopicPartitionsKeepsAConsumedTopicSubscribed(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	in := testkit.Name(t, "in")
	cl := testkit.Client(t, brokers, kgo.ConsumeTopics(in), kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n, err := snapshotstore.TopicPartitions(ctx, cl, in); err != nil || n != 0 {
		t.Fatalf("TopicPartitions(%s) before its creation = %d, %v; want 0", in, n, err)
	}
	adm := kadm.NewClient(testkit.Client(t, brokers))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, in); err != nil {
		t.Fatal(err)
	}
	if err := testkit.Client(t, brokers).ProduceSync(ctx, &kgo.Record{Topic: in, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the consumer got nothing from %s: TopicPartitions took the topic out of its subscription", in)
		}
		if fs.NumRecords() > 0 {
			return
		}
	}
}

// A topic created elsewhere a moment before the worker starts can be
// missing from the broker's first answer (its metadata cache applies the
// controller's record a little later). Without topic creation, EnsureTopics
// and EnsureOutputTopic look again for a while instead of failing: here the
// topic is created right after the first metadata request that asked for
// it, so that request answers "missing". kgo caches that answer for
// MetadataMinAge (5 s), longer than the grace: the look again must ask the
// cluster, not the cache.
func TestTopicCreatedJustAfterTheFirstLookIsFound(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	ctx := context.Background()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	input, snaps, out := testkit.Name(t, "in"), testkit.Name(t, "snaps"), testkit.Name(t, "out")
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, input); err != nil {
		t.Fatal(err)
	}
	// createAfterFirstLook creates topic once the first metadata request
	// naming it is being answered (kfake answers it first: requests run
	// one at a time).
	createAfterFirstLook := func(topic string, cfg map[string]*string) <-chan error {
		asked := make(chan struct{})
		var once sync.Once
		c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			for _, rt := range req.(*kmsg.MetadataRequest).Topics {
				if rt.Topic != nil && *rt.Topic == topic {
					once.Do(func() { close(asked) })
				}
			}
			return nil, nil, false
		})
		created := make(chan error, 1)
		go func() {
			<-asked
			_, err := adm.CreateTopic(ctx, 2, 1, cfg, topic)
			created <- err
		}()
		return created
	}

	created := createAfterFirstLook(snaps, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	if err := snapshotstore.EnsureTopics(ctx, testkit.Client(t, brokers), input, snaps, snapshotstore.TopicSpec{}); err != nil {
		t.Fatalf("EnsureTopics with the snapshot topic created after its first look: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}

	created = createAfterFirstLook(out, nil)
	if err := snapshotstore.EnsureOutputTopic(ctx, testkit.Client(t, brokers), out, 2, snapshotstore.TopicSpec{}); err != nil {
		t.Fatalf("EnsureOutputTopic with the topic created after its first look: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
}

// A snapshot topic another client creates first (EnsureTopics' create is
// answered TOPIC_ALREADY_EXISTS) is checked like any existing one: its
// cleanup.policy and its partitions are that client's. It was assumed
// compacted (found by a review).
func TestASnapshotTopicAnotherClientCreatedFirstIsChecked(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	cl := testkit.Client(t, brokers)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snaps")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, input); err != nil {
		t.Fatal(err)
	}
	// The other client's create lands first, with the broker's default
	// policy (delete).
	raced := createdFirstByAnother(t, c, brokers, snaps, 1)
	err := snapshotstore.EnsureTopics(ctx, cl, input, snaps, snapshotstore.TopicSpec{Create: true, Partitions: 1, ReplicationFactor: -1})
	if rerr := <-raced; rerr != nil {
		t.Fatalf("the other client's create: %v", rerr)
	}
	var pe *snapshotstore.CleanupPolicyError
	if !errors.As(err, &pe) || pe.Policy != "delete" {
		t.Fatalf("EnsureTopics = %v, want the other client's topic refused for its cleanup.policy=delete", err)
	}
}

// An input topic another client creates first (EnsureTopics' create is
// answered TOPIC_ALREADY_EXISTS) has that client's partitions: the snapshot
// topic is created with as many. It was created with spec.Partitions, and
// the input partitions past them had no snapshot partition (found by a
// review).
func TestAnInputTopicAnotherClientCreatedFirstSizesTheSnapshotTopic(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	cl := testkit.Client(t, brokers)
	ctx := context.Background()
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snaps")
	raced := createdFirstByAnother(t, c, brokers, input, 4) // with 4 partitions
	err := snapshotstore.EnsureTopics(ctx, cl, input, snaps, snapshotstore.TopicSpec{Create: true, Partitions: 1, ReplicationFactor: -1})
	if rerr := <-raced; rerr != nil {
		t.Fatalf("the other client's create: %v", rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n, err := snapshotstore.TopicPartitions(ctx, cl, snaps); err != nil || n != 4 {
		t.Fatalf("snapshot topic has %d partitions (%v), want the input's 4", n, err)
	}
}

// createdFirstByAnother makes the next CreateTopics of topic lose a race:
// another client's create of it, with partitions, lands first, and the
// request is answered TOPIC_ALREADY_EXISTS. The channel gives the other
// create's error.
func createdFirstByAnother(t *testing.T, c *kfake.Cluster, brokers []string, topic string, partitions int32) <-chan error {
	t.Helper()
	raced := make(chan error, 1)
	c.ControlKey(int16(kmsg.CreateTopics), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.CreateTopicsRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic != topic {
			return nil, nil, false
		}
		go func() {
			_, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(context.Background(), partitions, 1, nil, topic)
			raced <- err
		}()
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = topic, kerr.TopicAlreadyExists.Code
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	return raced
}

// WithCreateTopics creates only missing topics: an existing input topic of
// another partition count keeps it, and the worker says so at warn (a
// newcomer's trial read the silence as its count taken). The snapshot topic
// is created with the existing count.
func TestEnsureTopicsSaysAnExistingInputKeepsItsCount(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	cl := testkit.Client(t, brokers)
	ctx := context.Background()
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snaps")
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, input); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	spec := snapshotstore.TopicSpec{Create: true, Partitions: 4, ReplicationFactor: -1, Logger: zap.New(core)}
	if err := snapshotstore.EnsureTopics(ctx, cl, input, snaps, spec); err != nil {
		t.Fatal(err)
	}
	warned := logs.FilterMessageSnippet("another partition count").All()
	if len(warned) != 1 {
		t.Fatalf("warnings %v; want one naming the existing count", logs.All())
	}
	if f := warned[0].ContextMap(); f["topic"] != input || f["partitions"] != int32(2) || f["asked"] != int32(4) {
		t.Fatalf("warning's fields %v; want topic %s, partitions 2, asked 4", f, input)
	}
	if n, err := snapshotstore.TopicPartitions(ctx, cl, snaps); err != nil || n != 2 {
		t.Fatalf("snapshot topic's partitions = %d, %v; want the input's 2", n, err)
	}
	// The count asked, or none asked: nothing to say.
	logs.TakeAll()
	spec.Partitions = 2
	if err := snapshotstore.EnsureTopics(ctx, cl, input, snaps, spec); err != nil || logs.Len() != 0 {
		t.Fatalf("EnsureTopics with the existing count = %v, logged %v; want nil and nothing", err, logs.All())
	}
}

// A topic the metadata answers with an error other than "unknown" or a
// retriable one (here INVALID_TOPIC_EXCEPTION: a name the broker refuses)
// is that error, not "0 partitions": the callers looked again until their
// budget ran out and said the topic was not in the metadata, the broker's
// answer said nowhere (a lint sweep).
func TestTopicPartitionsKeepsAMetadataError(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	topic := testkit.Name(t, "in")
	c.ControlKey(kmsg.Metadata.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != topic {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = req.Version
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(topic)
		rt.ErrorCode = kerr.InvalidTopicException.Code
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	n, err := snapshotstore.TopicPartitions(context.Background(), testkit.Client(t, brokers), topic)
	if !errors.Is(err, kerr.InvalidTopicException) || !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), topic) {
		t.Fatalf("TopicPartitions of a topic the cluster refuses to describe = (%d, %v), want INVALID_TOPIC_EXCEPTION naming it", n, err)
	}
}
