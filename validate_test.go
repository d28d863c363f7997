package actorflow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// noBrokers: NewWorker's checks need no cluster (nothing connects before
// Run).
const noBrokers = "127.0.0.1:1"

func identity(opts ...keyflow.Option) *keyflow.Flow[int] {
	return keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) { return s, nil }, opts...)
}

// baseOpts are a worker's required options, on input "in" and snapshots
// "snaps".
func baseOpts(extra ...actorflow.Option) []actorflow.Option {
	return append([]actorflow.Option{actorflow.WithBrokers(noBrokers), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps")}, extra...)
}

// wantRefused fails t unless NewWorker refuses opts with an error
// containing each of want.
func wantRefused(t *testing.T, what string, flow keyflow.Handler, opts []actorflow.Option, want ...string) {
	t.Helper()
	w, err := actorflow.NewWorker(flow, opts...)
	if err == nil || w != nil {
		t.Errorf("%s: NewWorker accepted it (worker %v, error %v); want an error", what, w != nil, err)
		return
	}
	for _, s := range want {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: NewWorker's error %q does not name %q", what, err, s)
		}
	}
}

func wantAccepted(t *testing.T, what string, flow keyflow.Handler, opts []actorflow.Option) {
	t.Helper()
	if _, err := actorflow.NewWorker(flow, opts...); err != nil {
		t.Errorf("%s: NewWorker: %v", what, err)
	}
}

// A plain-mode flow with an output topic but no producer is refused by
// NewWorker: Run found it only after its broker and topic checks (up to
// twice the start timeout), as an ErrTopicSetup.
func TestNewWorkerRefusesAPlainOutputWithoutAProducer(t *testing.T) {
	plain := actorflow.WithMode(snapshotstore.Plain)
	wantRefused(t, "plain, WithOutput(nil, out)", identity(keyflow.WithOutput(nil, "out")), baseOpts(plain),
		`"out"`, "without a producer")
	wantAccepted(t, "transactional, WithOutput(nil, out)", identity(keyflow.WithOutput(nil, "out")), baseOpts())
	producer, err := kgo.NewClient(kgo.SeedBrokers(noBrokers))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	wantAccepted(t, "plain, WithOutput(producer, out)", identity(keyflow.WithOutput(producer, "out")), baseOpts(plain))
	wantAccepted(t, "plain, no output", identity(), baseOpts(plain))
}

// A default output topic (or dead-letter topic) that is the input or the
// snapshot topic is refused by NewWorker, the snapshot topic of a store
// given with WithStore included when the store names it: Run found the
// first only after its broker checks, and never with WithStore.
func TestNewWorkerRefusesAnOutputToTheInputOrSnapshotTopic(t *testing.T) {
	wantRefused(t, "output to the input", identity(keyflow.WithOutput(nil, "in")), baseOpts(), `"in"`, "input topic")
	wantRefused(t, "output to the snapshots", identity(keyflow.WithOutput(nil, "snaps")), baseOpts(), `"snaps"`, "snapshot topic")
	dl := []keyflow.Option{keyflow.WithFoldErrorPolicy(keyflow.DeadLetter), keyflow.WithDeadLetterTopic("snaps")}
	wantRefused(t, "dead letters to the snapshots", identity(dl...), baseOpts(), `"snaps"`, "dead-letter")
	k, err := snapshotstore.NewKafka([]string{noBrokers}, "store-snaps", snapshotstore.KafkaConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	storeOpts := []actorflow.Option{actorflow.WithBrokers(noBrokers), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithStore(k)}
	wantRefused(t, "output to a WithStore store's snapshots", identity(keyflow.WithOutput(nil, "store-snaps")), storeOpts, `"store-snaps"`)
	wantAccepted(t, "output elsewhere", identity(keyflow.WithOutput(nil, "out")), storeOpts)
}

// The topics of WithOutputTopics are refused as the default output topic
// is: empty, the input or the snapshot topic, or in the plain mode without
// the application's producer that would emit them.
func TestNewWorkerRefusesBadOutputTopics(t *testing.T) {
	wantRefused(t, "an empty name", identity(), baseOpts(actorflow.WithOutputTopics("a", "")), "empty topic name")
	wantRefused(t, "the input", identity(), baseOpts(actorflow.WithOutputTopics("in")), `"in"`, "input or snapshot topic")
	wantRefused(t, "the snapshots", identity(), baseOpts(actorflow.WithOutputTopics("snaps")), `"snaps"`, "input or snapshot topic")
	wantRefused(t, "plain, no producer", identity(), baseOpts(actorflow.WithMode(snapshotstore.Plain), actorflow.WithOutputTopics("a")),
		`"a"`, "without a producer")
	wantAccepted(t, "transactional", identity(), baseOpts(actorflow.WithOutputTopics("a", "b")))
}

// An empty broker address is refused by NewWorker (kgo took it, and Run
// retried it for the start timeout).
func TestNewWorkerRefusesAnEmptyBrokerAddress(t *testing.T) {
	opts := func(b ...string) []actorflow.Option {
		return []actorflow.Option{actorflow.WithBrokers(b...), actorflow.WithGroup("g"),
			actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps")}
	}
	wantRefused(t, `WithBrokers("")`, identity(), opts(""), "WithBrokers", "empty")
	wantRefused(t, `WithBrokers(addr, " ")`, identity(), opts(noBrokers, " "), "WithBrokers", "empty")
	wantRefused(t, "WithBrokers()", identity(), opts(), "WithBrokers")
	wantAccepted(t, "two addresses", identity(), opts(noBrokers, "127.0.0.1:2"))
}

// WithPartitionRetryBackoff's first delay above its largest, the default
// of a zero or negative max counted, is refused: the delay was capped at
// the largest, while the restart's bookkeeping took the first. A default
// first delay is capped at the max given.
func TestNewWorkerRefusesARetryBackoffAboveItsMax(t *testing.T) {
	for _, tc := range []struct {
		first, max time.Duration
		ok         bool
	}{
		{2 * time.Second, time.Second, false},
		{2 * time.Minute, 0, false},        // above the default max, 1 min
		{0, 500 * time.Millisecond, true},  // the default first, 1 s, capped at the max given (refused before: a user's trial)
		{-1, 500 * time.Millisecond, true}, // likewise
		{time.Second, time.Second, true},   // equal: a constant delay
		{0, 0, true},                       // the defaults
		{-time.Second, -time.Second, true}, // the defaults
		{20 * time.Millisecond, 0, true},   // up to the default max
		{0, 2 * time.Minute, true},         // from the default first
		{100 * time.Millisecond, 500 * time.Millisecond, true},
	} {
		what := "WithPartitionRetryBackoff(" + tc.first.String() + ", " + tc.max.String() + ")"
		opts := baseOpts(actorflow.WithPartitionRetryBackoff(tc.first, tc.max))
		if tc.ok {
			wantAccepted(t, what, identity(), opts)
		} else {
			wantRefused(t, what, identity(), opts, "WithPartitionRetryBackoff", "above")
		}
	}
}

// Options of the worker's own Kafka store given beside WithStore, which
// does not read them, are refused, naming the option: they were silently
// ignored.
func TestNewWorkerRefusesStoreOptionsWithWithStore(t *testing.T) {
	storeOpts := func(extra ...actorflow.Option) []actorflow.Option {
		return append([]actorflow.Option{actorflow.WithBrokers(noBrokers), actorflow.WithGroup("g"),
			actorflow.WithInputTopic("in"), actorflow.WithStore(snapshotstore.NewMemory())}, extra...)
	}
	for name, o := range map[string]actorflow.Option{
		"WithCreateTopics":               actorflow.WithCreateTopics(3, -1),
		"WithAllowNonCompactedSnapshots": actorflow.WithAllowNonCompactedSnapshots(),
		"WithRecoveryStallTimeout":       actorflow.WithRecoveryStallTimeout(time.Minute),
		"WithOutputPartitioner":          actorflow.WithOutputPartitioner(kgo.ManualPartitioner()),
		"WithResetLostState":             actorflow.WithResetLostState(),
		"WithAcceptInputRepartition":     actorflow.WithAcceptInputRepartition(),
		"WithDropUndecodableSnapshots":   actorflow.WithDropUndecodableSnapshots(),
	} {
		wantRefused(t, name+" with WithStore", identity(), storeOpts(o), name, "WithStore")
		wantAccepted(t, name+" without WithStore", identity(), baseOpts(o))
	}
	wantAccepted(t, "WithStore alone", identity(), storeOpts())
}

// WithSnapshotTopic, WithMode and WithTransactionalIDPrefix beside
// WithStore are refused when the store says it has another value; the
// same value stated again is accepted, and so are they with a store that
// does not say (logged as unchecked). WithSnapshotTopic then names the
// store's topic for the worker's checks.
func TestNewWorkerChecksTheStoresOwnSettingsAgainstWithStore(t *testing.T) {
	k, err := snapshotstore.NewKafka([]string{noBrokers}, "snaps", snapshotstore.KafkaConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	withKafka := func(extra ...actorflow.Option) []actorflow.Option {
		return append([]actorflow.Option{actorflow.WithBrokers(noBrokers), actorflow.WithGroup("g"),
			actorflow.WithInputTopic("in"), actorflow.WithStore(k)}, extra...)
	}
	wantRefused(t, "another snapshot topic", identity(), withKafka(actorflow.WithSnapshotTopic("other")),
		"WithSnapshotTopic", `"other"`, `"snaps"`)
	wantAccepted(t, "the store's snapshot topic", identity(), withKafka(actorflow.WithSnapshotTopic("snaps")))
	wantRefused(t, "another mode", identity(), withKafka(actorflow.WithMode(snapshotstore.Plain)), "WithMode", "transactional")
	wantAccepted(t, "the store's mode", identity(), withKafka(actorflow.WithMode(snapshotstore.Transactional)))
	// KafkaConfig's default prefix is the snapshot topic; the worker's,
	// the group id.
	wantRefused(t, "another prefix", identity(), withKafka(actorflow.WithTransactionalIDPrefix("g")),
		"WithTransactionalIDPrefix", `"snaps-in-0"`)
	wantAccepted(t, "the store's prefix", identity(), withKafka(actorflow.WithTransactionalIDPrefix("snaps")))
	// A plain-mode store uses no transactional id: any prefix is harmless.
	plain, err := snapshotstore.NewKafka([]string{noBrokers}, "snaps", snapshotstore.KafkaConfig{Mode: snapshotstore.Plain})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	wantAccepted(t, "a plain store and another prefix", identity(), []actorflow.Option{actorflow.WithBrokers(noBrokers), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithStore(plain), actorflow.WithMode(snapshotstore.Plain), actorflow.WithTransactionalIDPrefix("g")})

	core, logs := observer.New(zapcore.WarnLevel)
	mem := func(extra ...actorflow.Option) []actorflow.Option {
		return append([]actorflow.Option{actorflow.WithBrokers(noBrokers), actorflow.WithGroup("g"),
			actorflow.WithInputTopic("in"), actorflow.WithStore(snapshotstore.NewMemory()), actorflow.WithLogger(zap.New(core))}, extra...)
	}
	wantAccepted(t, "a store that does not say", identity(), mem(actorflow.WithSnapshotTopic("snaps"),
		actorflow.WithMode(snapshotstore.Plain), actorflow.WithTransactionalIDPrefix("p")))
	if got := logs.FilterMessageSnippet("not checked").All(); len(got) != 1 ||
		!strings.Contains(fmt.Sprint(got[0].ContextMap()), "WithMode") || !strings.Contains(fmt.Sprint(got[0].ContextMap()), "WithTransactionalIDPrefix") {
		t.Errorf("unchecked options logged as %v, want one warning naming WithMode and WithTransactionalIDPrefix", logs.All())
	}
	wantRefused(t, "a memory store, WithSnapshotTopic(the input)", identity(), mem(actorflow.WithSnapshotTopic("in")), `"in"`)
	wantRefused(t, "a memory store, output to WithSnapshotTopic's", identity(keyflow.WithOutput(nil, "snaps")),
		mem(actorflow.WithSnapshotTopic("snaps")), `"snaps"`)
}

// WithSnapshotFormat takes the formats there are readers of: 2 (a rolling
// upgrade from them) and 3.
func TestNewWorkerTakesSnapshotFormats2And3(t *testing.T) {
	for _, f := range []int{2, 3} {
		wantAccepted(t, fmt.Sprintf("WithSnapshotFormat(%d)", f), identity(), baseOpts(actorflow.WithSnapshotFormat(f)))
	}
	for _, f := range []int{1, 4, -1} {
		wantRefused(t, fmt.Sprintf("WithSnapshotFormat(%d)", f), identity(), baseOpts(actorflow.WithSnapshotFormat(f)), "WithSnapshotFormat", "want 2 or 3")
	}
}
