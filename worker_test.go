package actorflow_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestBrokersUnreachableIsABoundedClearError(t *testing.T) {
	w, err := actorflow.NewWorker(ledger.Flow(),
		actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"),
		actorflow.WithStartTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, actorflow.ErrBrokersUnreachable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Run: %v, want ErrBrokersUnreachable naming the brokers", err)
	}
}

// A Worker runs once: a second Run, after the first returned
// ErrBrokersUnreachable say, returns ErrRunTwice. It closed the worker's
// channels a second time (a panic). And a Run stopped while it waits for
// the brokers returns the context's error, not ErrBrokersUnreachable, the
// unreachable brokers' cause being matchable too. (Found by a review.)
func TestRunOnceAndStoppedWhileStarting(t *testing.T) {
	opts := []actorflow.Option{actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"),
		actorflow.WithStartTimeout(300 * time.Millisecond), actorflow.WithLogger(nil), actorflow.WithSlog(nil)}
	w, err := actorflow.NewWorker(ledger.Flow(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(context.Background())
	var dial *net.OpError
	if !errors.Is(err, actorflow.ErrBrokersUnreachable) || !errors.As(err, &dial) {
		t.Fatalf("Run: %v, want ErrBrokersUnreachable wrapping the last attempt's error", err)
	}
	if err := w.Run(context.Background()); !errors.Is(err, actorflow.ErrRunTwice) {
		t.Fatalf("second Run: %v, want ErrRunTwice", err)
	}
	w, err = actorflow.NewWorker(ledger.Flow(), append(opts, actorflow.WithStartTimeout(time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, actorflow.ErrBrokersUnreachable) {
		t.Fatalf("Run with its context cancelled: %v, want context.Canceled, not ErrBrokersUnreachable", err)
	}
}

func TestTopicSetupErrors(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	run := func(input, snaps string, opts ...actorflow.Option) error {
		w, err := actorflow.NewWorker(ledger.Flow(), append([]actorflow.Option{
			actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
			actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return w.Run(ctx)
	}
	if err := run("missing-in", "missing-snaps"); !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), "missing-in") {
		t.Errorf("missing topic: %v", err)
	}
	// A start timeout within the 2 s a missing topic is looked for again
	// (it may have been created a moment ago) reported the deadline, not
	// the topic.
	if err := run("missing-in", "missing-snaps", actorflow.WithStartTimeout(2*time.Second)); !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), `"missing-in" does not exist`) {
		t.Errorf("missing topic with a 2 s start timeout: %v", err)
	}
	adm := kadm.NewClient(testkit.Client(t, brokers))
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "in4"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "snaps2"); err != nil {
		t.Fatal(err)
	}
	if err := run("in4", "snaps2"); !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), "2 partitions, fewer than the 4") {
		t.Errorf("fewer snapshot partitions: %v", err)
	}
	// With creation enabled, missing topics are created (the snapshot topic
	// compacted) and the worker runs.
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	ctx2, cancel := context.WithCancel(context.Background())
	w, _ := actorflow.NewWorker(ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps), actorflow.WithCreateTopics(3, -1))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx2) }()
	testkit.Eventually(t, 30*time.Second, "topics created", func() (bool, string) {
		cfgs, err := adm.DescribeTopicConfigs(ctx, snaps)
		if err != nil || len(cfgs) == 0 || cfgs[0].Err != nil {
			return false, ""
		}
		for _, c := range cfgs[0].Configs {
			if c.Key == "cleanup.policy" && c.Value != nil && *c.Value == "compact" {
				return true, ""
			}
		}
		return false, "not compacted"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Every retry to reach the brokers at start is logged with its cause, and
// Health says why the worker is not live-and-ready meanwhile.
func TestUnreachableBrokersAreLoggedAndUnhealthy(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	w, err := actorflow.NewWorker(ledger.Flow(),
		actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"),
		actorflow.WithStartTimeout(5*time.Second), actorflow.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	testkit.Eventually(t, 10*time.Second, "two logged retries", func() (bool, string) {
		return logs.FilterMessage("brokers unreachable; retrying").Len() >= 2, ""
	})
	h := w.Health(context.Background())
	if h.BrokersReachable || h.LastBrokerError == "" || h.Ready() {
		t.Fatalf("Health while unreachable = %+v (ready %v), want unreachable with the cause and not ready", h, h.Ready())
	}
	// Live while unreachable, as Live's doc says: a liveness probe must not
	// kill a worker only waiting for its brokers (Health said not running
	// until the start ended; found by a review).
	if !h.Running || !h.Live() {
		t.Fatalf("Health while starting = %+v (live %v), want running and live", h, h.Live())
	}
	for _, e := range logs.FilterMessage("brokers unreachable; retrying").All() {
		if _, ok := e.ContextMap()["error"]; !ok {
			t.Fatalf("retry logged without its cause: %v", e.ContextMap())
		}
	}
	if err := <-done; !errors.Is(err, actorflow.ErrBrokersUnreachable) {
		t.Fatalf("Run: %v", err)
	}
}

// The flow's default output topic is checked at start, on the cluster the
// outputs go to: missing, it is an ErrTopicSetup naming it (not a failed
// transaction at the first Emit); with WithCreateTopics it is created with
// as many partitions as the input topic. (A plain-mode flow with an output
// topic but no producer is refused by NewWorker:
// TestNewWorkerRefusesAPlainOutputWithoutAProducer.)
func TestOutputTopicCheckedAtStart(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 3)
	run := func(mode snapshotstore.Mode, out string, producer *kgo.Client, opts ...actorflow.Option) (func(), error) {
		var folds atomic.Int64
		w, err := actorflow.NewWorker(ledger.FlowWithOutput(producer, out, &folds), append([]actorflow.Option{
			actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")), actorflow.WithMode(mode),
			actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		// Ready: the checks passed (a missing topic is looked up again for
		// 2 s first). WaitReady fails when Run returns first.
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		if werr := w.WaitReady(wctx); werr != nil {
			cancel()
			err := <-done
			// The wait's error says why: Run's.
			if !errors.Is(werr, actorflow.ErrRunReturned) || err == nil || !strings.Contains(werr.Error(), err.Error()) {
				t.Errorf("WaitReady: %v; want ErrRunReturned wrapping Run's error %v", werr, err)
			}
			return func() {}, err
		}
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}, nil
	}
	for _, mode := range []snapshotstore.Mode{snapshotstore.Transactional, snapshotstore.Plain} {
		producer := testkit.Client(t, brokers)
		if mode == snapshotstore.Transactional {
			producer = nil
		}
		if _, err := run(mode, "missing-out", producer); !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), `"missing-out"`) {
			t.Errorf("%s: missing output topic: %v, want ErrTopicSetup naming it", mode, err)
		}
	}
	out := testkit.Name(t, "out")
	stop, err := run(snapshotstore.Transactional, out, nil, actorflow.WithCreateTopics(3, -1))
	if err != nil {
		t.Fatalf("with WithCreateTopics: %v", err)
	}
	stop()
	parts, err := snapshotstore.TopicPartitions(context.Background(), testkit.Client(t, brokers), out)
	if err != nil || parts != 3 {
		t.Fatalf("created output topic has %d partitions (%v), want the input's 3", parts, err)
	}
	// The other topics the flow emits to (WithOutputTopics) likewise: a
	// user's trial emitted to a second topic it had not created, and its
	// partitions failed at run time for minutes.
	for _, mode := range []snapshotstore.Mode{snapshotstore.Transactional, snapshotstore.Plain} {
		producer := testkit.Client(t, brokers)
		if mode == snapshotstore.Transactional {
			producer = nil
		}
		if _, err := run(mode, out, producer, actorflow.WithOutputTopics("missing-extra")); !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), `"missing-extra"`) {
			t.Errorf("%s: missing topic of WithOutputTopics: %v, want ErrTopicSetup naming it", mode, err)
		}
	}
	extra := testkit.Name(t, "extra")
	stop, err = run(snapshotstore.Transactional, out, nil, actorflow.WithOutputTopics(extra), actorflow.WithCreateTopics(3, -1))
	if err != nil {
		t.Fatalf("WithOutputTopics with WithCreateTopics: %v", err)
	}
	stop()
	if parts, err := snapshotstore.TopicPartitions(context.Background(), testkit.Client(t, brokers), extra); err != nil || parts != 3 {
		t.Fatalf("created topic of WithOutputTopics has %d partitions (%v), want the input's 3", parts, err)
	}
}

// NewWorker without a flow is an error at construction, not a panic in Run.
func TestNewWorkerWithoutAFlow(t *testing.T) {
	opts := []actorflow.Option{actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps")}
	var typedNil *keyflow.Flow[int]
	for name, flow := range map[string]keyflow.Handler{"nil": nil, "typed nil": typedNil} {
		if w, err := actorflow.NewWorker(flow, opts...); err == nil || w != nil {
			t.Errorf("%s flow: NewWorker = %v, %v; want an error", name, w, err)
		}
	}
	if _, err := actorflow.NewWorker(keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) { return s, nil }), opts...); err != nil {
		t.Fatalf("NewWorker with a flow: %v", err)
	}
}

// A mode that is neither Transactional nor Plain is refused at
// construction; Mode's zero value is the transactional mode.
func TestNewWorkerRefusesAnUnknownMode(t *testing.T) {
	flow := keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) { return s, nil })
	opts := []actorflow.Option{actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps")}
	if w, err := actorflow.NewWorker(flow, append(opts, actorflow.WithMode(snapshotstore.Mode(2)))...); err == nil || w != nil {
		t.Errorf("WithMode(Mode(2)): NewWorker = %v, %v; want an error", w, err)
	}
	var zero snapshotstore.Mode
	if zero != snapshotstore.Transactional {
		t.Errorf("Mode's zero value is %v, want transactional", zero)
	}
	if _, err := actorflow.NewWorker(flow, append(opts, actorflow.WithMode(zero))...); err != nil {
		t.Errorf("WithMode(zero Mode): %v", err)
	}
}

// A snapshot topic that is the input topic is refused at construction, by
// name or as the topic of a store given with WithStore: the flow would fold
// its own snapshots (found by a review).
func TestNewWorkerRefusesTheInputAsSnapshotTopic(t *testing.T) {
	flow := keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) { return s, nil })
	opts := []actorflow.Option{actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"), actorflow.WithInputTopic("in")}
	if w, err := actorflow.NewWorker(flow, append(opts, actorflow.WithSnapshotTopic("in"))...); err == nil || w != nil || !strings.Contains(err.Error(), `"in"`) {
		t.Errorf("WithSnapshotTopic(input): NewWorker = %v, %v; want an error naming the topic", w, err)
	}
	k, err := snapshotstore.NewKafka([]string{"127.0.0.1:1"}, "in", snapshotstore.KafkaConfig{Mode: snapshotstore.Plain})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if w, err := actorflow.NewWorker(flow, append(opts, actorflow.WithStore(k))...); err == nil || w != nil {
		t.Errorf("WithStore(a store of the input topic): NewWorker = %v, %v; want an error", w, err)
	}
}

// Worker's methods are the user's: the supervisor and the group consumer
// are reached by the project's tests through internal/inspect.
func TestWorkerMethodsAreTheUsersOnly(t *testing.T) {
	var got []string
	wt := reflect.TypeFor[*actorflow.Worker]()
	for i := range wt.NumMethod() {
		got = append(got, wt.Method(i).Name)
	}
	if want := []string{"Get", "Health", "Run", "Status", "WaitCaughtUp", "WaitReady"}; !slices.Equal(got, want) {
		t.Fatalf("*actorflow.Worker methods %v, want %v", got, want)
	}
}

// A session timeout the broker refuses (kfake's group.min.session.timeout.ms
// is 6 s) ends Run with ErrMemberRejected naming the broker's error; kgo
// alone retried the join forever and the worker never got a partition.
func TestRejectedSessionTimeoutEndsRun(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	w, err := actorflow.NewWorker(ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithSessionTimeout(2*time.Second), actorflow.WithClientOpts(kgo.HeartbeatInterval(500*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, coordinator.ErrMemberRejected) || !errors.Is(err, kerr.InvalidSessionTimeout) || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v), want ErrMemberRejected wrapping INVALID_SESSION_TIMEOUT before the deadline", err, ctx.Err())
	}
}

// An output a fold emits to the worker's snapshot topic is refused at Emit
// (keyflow.ErrEmitToSnapshotTopic): produced, it would pass for its key's
// snapshot — a record without actorflow's headers, which the partition then
// refuses to start over. The fold's error fails the partition, and the
// worker under WithFailFast, naming the key; nothing reaches the topic but
// snapshots. Both modes.
func TestEmitToTheSnapshotTopicIsRefused(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	for _, mode := range []snapshotstore.Mode{snapshotstore.Transactional, snapshotstore.Plain} {
		t.Run(mode.String(), func(t *testing.T) {
			input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
			testkit.CreateTopics(t, brokers, input, snaps, 1)
			var producer *kgo.Client
			if mode == snapshotstore.Plain {
				producer = testkit.Client(t, brokers)
			}
			flow := keyflow.New(func(kc *keyflow.Context, s *int, r *kgo.Record) (*int, error) {
				if err := kc.Emit(&kgo.Record{Topic: snaps, Key: r.Key, Value: []byte("not a snapshot")}); err != nil {
					return nil, err
				}
				return s, nil
			}, keyflow.WithOutput(producer, ""))
			w, err := actorflow.NewWorker(flow, actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
				actorflow.WithMode(mode), actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps), actorflow.WithFailFast())
			if err != nil {
				t.Fatal(err)
			}
			if err := testkit.Client(t, brokers).ProduceSync(context.Background(), &kgo.Record{Topic: input, Key: []byte("k1"), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = w.Run(ctx)
			if !errors.Is(err, keyflow.ErrEmitToSnapshotTopic) || !strings.Contains(err.Error(), `"k1"`) {
				t.Fatalf("Run: %v; want ErrEmitToSnapshotTopic naming the key", err)
			}
			recs := testkit.ReadTopic(t, brokers, snaps, false)
			for _, r := range recs {
				if string(r.Value) == "not a snapshot" {
					t.Fatalf("the output reached the snapshot topic: %v", r)
				}
			}
		})
	}
}

// A Run stopped while it checks the topics returns the context's error,
// not an ErrTopicSetup wrapping the cancelled requests' (an application
// alerting on ErrTopicSetup was told its topics were wrong at every stop
// during a start).
func TestStoppedWhileCheckingTopicsIsNotATopicSetupError(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.ControlKey(int16(kmsg.DescribeConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		cancel() // the stop arrives while the check waits for its answer
		return nil, nil, false
	})
	w, err := actorflow.NewWorker(ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps))
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, snapshotstore.ErrTopicSetup) {
		t.Fatalf("Run stopped during the topic check: %v; want context.Canceled, not ErrTopicSetup", err)
	}
}

// An input topic whose ACLs stop allowing this member (the broker answers
// its metadata TOPIC_AUTHORIZATION_FAILED) ends Run with that error: kgo
// injects it into every poll and fetches nothing, and the worker sat
// running with a warning per metadata refresh (found by a review).
func TestInputTopicAuthorizationRevokedEndsRun(t *testing.T) {
	kc, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	var denied atomic.Bool
	kc.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		if !denied.Load() || !slices.ContainsFunc(req.Topics, func(rt kmsg.MetadataRequestTopic) bool {
			return rt.Topic != nil && *rt.Topic == input
		}) {
			return nil, nil, false
		}
		return metadataAnswer(req, brokers, input, kerr.TopicAuthorizationFailed.Code), nil, true
	})
	w, err := actorflow.NewWorker(ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithClientOpts(kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testkit.Eventually(t, 30*time.Second, "the worker running its partitions", func() (bool, string) {
		n := len(w.Status(ctx).Partitions)
		return n == 2, fmt.Sprintf("%d partitions", n)
	})
	denied.Store(true)
	if err := <-done; !errors.Is(err, kerr.TopicAuthorizationFailed) || ctx.Err() != nil {
		t.Fatalf("Run = %v (ctx %v), want an error matching TOPIC_AUTHORIZATION_FAILED before the deadline", err, ctx.Err())
	}
}

// metadataAnswer answers req for a cluster of brokers, listing topic with
// the error code (no partitions).
func metadataAnswer(req *kmsg.MetadataRequest, brokers []string, topic string, code int16) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for i, a := range brokers {
		host, port, _ := net.SplitHostPort(a)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host = int32(i), host
		p, _ := strconv.Atoi(port)
		b.Port = int32(p)
		resp.Brokers = append(resp.Brokers, b)
	}
	st := kmsg.NewMetadataResponseTopic()
	st.Topic, st.ErrorCode = kmsg.StringPtr(topic), code
	resp.Topics = append(resp.Topics, st)
	return resp
}

// A worker shutting down (Run's ctx ended) is not ready while it drains:
// its partitions are being revoked and it answers no query. It stayed ready
// through the whole drain (found by a review).
func TestAWorkerShuttingDownIsNotReady(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 1)
	folding, release := make(chan struct{}, 1), make(chan struct{})
	flow := keyflow.New(func(_ *keyflow.Context, s *int, r *kgo.Record) (*int, error) {
		if string(r.Value) == "block" {
			folding <- struct{}{}
			<-release // the revoke's flush waits for this fold
		}
		n := 1
		return &n, nil
	})
	w, err := actorflow.NewWorker(flow, actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := w.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	if err := cl.ProduceSync(wctx, &kgo.Record{Key: []byte("k"), Value: []byte("block")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	<-folding
	cancel()
	testkit.Eventually(t, 10*time.Second, "the shutdown under way", func() (bool, string) {
		h := w.Health(wctx)
		return h.ShuttingDown, fmt.Sprintf("%+v", h)
	})
	if h := w.Health(wctx); h.Ready() {
		t.Fatalf("ready while shutting down: %+v", h)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// A member whose group session kgo gave up on (a heartbeat failed for good:
// the consumer logs its partitions lost) is not Joined, and not ready,
// until it joins again — kgo keeps the lost member id and generation while
// it rejoins, and Joined read them: true through a 30 s outage (found by a
// review). Here the coordinator answers heartbeats ILLEGAL_GENERATION and
// refuses joins; once it lets the member in again the worker is ready.
func TestALostGroupSessionIsNotJoined(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	var refuse atomic.Bool
	refusing := func(key kmsg.Key, refused func(kmsg.Response)) {
		c.ControlKey(int16(key), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if !refuse.Load() {
				return nil, nil, false
			}
			resp := kreq.ResponseKind()
			refused(resp)
			return resp, nil, true
		})
	}
	refusing(kmsg.Heartbeat, func(r kmsg.Response) { r.(*kmsg.HeartbeatResponse).ErrorCode = kerr.IllegalGeneration.Code })
	refusing(kmsg.JoinGroup, func(r kmsg.Response) { r.(*kmsg.JoinGroupResponse).ErrorCode = kerr.UnknownServerError.Code })
	flow := keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) { return s, nil })
	w, _ := kfakeWorker(t, flow, brokers, input, snaps)
	wctx := ctxFor(t, 60*time.Second)
	if err := w.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	testkit.Eventually(t, 30*time.Second, "the lost session read as not joined", func() (bool, string) {
		h := w.Health(wctx)
		return !h.Joined && !h.Ready(), fmt.Sprintf("%+v", h)
	})
	refuse.Store(false)
	if err := w.WaitReady(wctx); err != nil {
		t.Fatalf("after the coordinator let the member in again: %v", err)
	}
}

// A member the coordinator forgot rejoins under a new member id (its
// JoinGroup answered UNKNOWN_MEMBER_ID, the next one MEMBER_ID_REQUIRED):
// kgo stores the new id with the old generation while the JoinGroup is
// pending — up to the rebalance timeout with a slow member in the group —
// and that read as joined, and ready owning nothing (found by a review).
// It is joined once the join ends.
func TestAMemberRejoiningUnderANewIDIsNotJoinedUntilItsJoinEnds(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	var lose atomic.Bool
	var oldMember atomic.Value
	oldMember.Store("")
	held, release := make(chan struct{}), make(chan struct{})
	var holding sync.Once
	c.ControlKey(int16(kmsg.Heartbeat), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.HeartbeatRequest)
		if !lose.Load() {
			oldMember.Store(req.MemberID)
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.JoinGroup), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.JoinGroupRequest)
		switch {
		case !lose.Load() || req.MemberID == "": // kfake answers MEMBER_ID_REQUIRED with a new id
			return nil, nil, false
		case req.MemberID == oldMember.Load().(string):
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp, nil, true
		}
		holding.Do(func() { close(held) })
		c.SleepControl(func() { <-release }) // the new member's join, pending
		return nil, nil, false
	})
	flow := keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) { return s, nil })
	// The forgotten member's session ends the join it is pending in.
	w, _ := kfakeWorker(t, flow, brokers, input, snaps, actorflow.WithSessionTimeout(6*time.Second))
	var released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) }) // before the worker's stop: cleanups run last first
	wctx := ctxFor(t, 60*time.Second)
	if err := w.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "a heartbeat seen", func() (bool, string) { return oldMember.Load().(string) != "", "" })
	lose.Store(true)
	select {
	case <-held:
	case <-wctx.Done():
		t.Fatal("no rejoin under a new member id")
	}
	if h := w.Health(wctx); h.Joined || h.Ready() {
		t.Fatalf("the new member's JoinGroup pending: %+v, ready %v; want not joined, not ready", h, h.Ready())
	}
	released.Do(func() { close(release) })
	if err := w.WaitReady(wctx); err != nil {
		t.Fatalf("after the join ended: %v", err)
	}
}

// A worker whose static instance id a newer process took (the same
// WithInstanceID: the coordinator gives the id to the member that joined
// last, KIP-345) ends Run with ErrMemberRejected wrapping
// FENCED_INSTANCE_ID; it used to retry its join for ever, live, owning
// nothing, an error line every few seconds (a newcomer's trial). The newer
// process keeps running.
func TestAWorkerWhoseInstanceIDANewerProcessTookStops(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	start := func() (*actorflow.Worker, <-chan error) {
		return runWorker(t, ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
			actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps), actorflow.WithInstanceID("pod-0"),
			actorflow.WithSessionTimeout(6*time.Second), actorflow.WithClientOpts(kgo.HeartbeatInterval(200*time.Millisecond)))
	}
	wctx := ctxFor(t, 60*time.Second)
	older, olderDone := start()
	if err := older.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	newer, _ := start()
	select {
	case err := <-olderDone:
		if !errors.Is(err, actorflow.ErrMemberRejected) || !errors.Is(err, kerr.FencedInstanceID) {
			t.Fatalf("the older worker's Run = %v, want ErrMemberRejected wrapping FENCED_INSTANCE_ID", err)
		}
	case <-wctx.Done():
		t.Fatalf("the older worker still runs: %+v", older.Health(wctx))
	}
	if err := newer.WaitReady(wctx); err != nil {
		t.Fatalf("the newer worker: %v", err)
	}
}

// Status.Start numbers a partition's starts per worker: two workers of one
// process over one input (two groups) each start its partitions at 1 (the
// process-wide numbering interleaved them: found by a review).
func TestStartsAreNumberedPerWorker(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 1)
	ctx := ctxFor(t, 60*time.Second)
	for i := range 2 {
		w, _ := kfakeWorker(t, ledger.Flow(), brokers, input, snaps+strconv.Itoa(i), actorflow.WithCreateTopics(1, 1))
		testkit.Eventually(t, 30*time.Second, "the worker's partition running", func() (bool, string) {
			st := w.Status(ctx)
			return len(st.Partitions) == 1 && st.Partitions[0].Phase == "running", fmt.Sprint(st.Partitions)
		})
		if got := w.Status(ctx).Partitions[0].Start; got != 1 {
			t.Fatalf("worker %d: its partition's first start numbered %d, want 1", i, got)
		}
	}
}
