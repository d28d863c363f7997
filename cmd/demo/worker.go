package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/httpapi"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// runWorker runs one worker of the ledger flow with an HTTP status endpoint,
// until SIGTERM (exit 0 after a clean flush) or a partition failure (exit 1).
func runWorker(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return worker(ctx, args)
}

func worker(ctx context.Context, args []string) (code int) {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	brokers := fs.String("brokers", env("ACTORFLOW_BROKERS", "localhost:9092"), "seed brokers (ACTORFLOW_BROKERS)")
	group := fs.String("group", env("ACTORFLOW_GROUP", "ledger"), "consumer group (ACTORFLOW_GROUP)")
	input := fs.String("input", env("ACTORFLOW_INPUT", "ledger"), "input topic (ACTORFLOW_INPUT)")
	snaps := fs.String("snapshots", env("ACTORFLOW_SNAPSHOTS", "ledger-snapshots"), "snapshot topic (ACTORFLOW_SNAPSHOTS)")
	output := fs.String("output", env("ACTORFLOW_OUTPUT", ""), "output topic, empty for none (ACTORFLOW_OUTPUT)")
	mode := fs.String("mode", env("ACTORFLOW_MODE", "transactional"), "plain | transactional (ACTORFLOW_MODE)")
	addr := fs.String("http", env("ACTORFLOW_HTTP", ":8080"), "HTTP status address (ACTORFLOW_HTTP)")
	advertise := fs.String("advertise", env("ACTORFLOW_ADVERTISE", ""),
		"host:port the other workers redirect /state queries to (actorflow.WithQueryEndpoint); default the --http address if its host is set and not 0.0.0.0/::, else none: /state then answers 421 naming the owner (ACTORFLOW_ADVERTISE)")
	session := fs.Duration("session-timeout", envDuration("ACTORFLOW_SESSION_TIMEOUT", 10*time.Second), "group session timeout (ACTORFLOW_SESSION_TIMEOUT)")
	prefix := fs.String("txn-prefix", env("ACTORFLOW_TXN_PREFIX", ""), "transactional.id prefix, default the group (ACTORFLOW_TXN_PREFIX)")
	parts := fs.Int("partitions", envInt("ACTORFLOW_PARTITIONS", 6), "partitions of topics created when missing (ACTORFLOW_PARTITIONS)")
	persist := fs.Duration("persist-every", envDuration("ACTORFLOW_PERSIST_EVERY", time.Second), "snapshot flush interval (ACTORFLOW_PERSIST_EVERY)")
	foldPolicy := fs.String("fold-error-policy", env("ACTORFLOW_FOLD_ERROR_POLICY", "fail"), "a fold error: fail | skip | dead-letter (ACTORFLOW_FOLD_ERROR_POLICY)")
	undecodable := fs.String("undecodable-policy", env("ACTORFLOW_UNDECODABLE_POLICY", ""), "an undecodable (non-JSON, out-of-range) event: fail | skip | dead-letter; default the fold error policy (ACTORFLOW_UNDECODABLE_POLICY)")
	nilKey := fs.String("nil-key-policy", env("ACTORFLOW_NIL_KEY_POLICY", ""), "a record without key: fail | skip | dead-letter; default the fold error policy (ACTORFLOW_NIL_KEY_POLICY)")
	badState := fs.String("undecodable-state-policy", env("ACTORFLOW_UNDECODABLE_STATE_POLICY", "fail"), "a key's snapshot whose state does not decode: fail | skip | dead-letter (ACTORFLOW_UNDECODABLE_STATE_POLICY)")
	maxLive := fs.Int("max-live-keys", envInt("ACTORFLOW_MAX_LIVE_KEYS", 0), "key actors loaded per partition, keyflow.WithMaxLiveKeys; 0: its default (ACTORFLOW_MAX_LIVE_KEYS)")
	dlq := fs.String("dead-letter-topic", env("ACTORFLOW_DEAD_LETTER_TOPIC", ""), "dead-letter topic, default <input>.dlq; created when missing (ACTORFLOW_DEAD_LETTER_TOPIC)")
	logLevel := fs.String("log-level", env("ACTORFLOW_LOG_LEVEL", "info"), "log level: debug | info | warn | error; debug includes every request of the Kafka clients, kgo's own debug log (ACTORFLOW_LOG_LEVEL)")
	_ = fs.Parse(args)

	lvl, err := zapcore.ParseLevel(*logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: --log-level:", err)
		return 2
	}
	zcfg := zap.NewProductionConfig()
	zcfg.Level = zap.NewAtomicLevelAt(lvl)
	zcfg.Sampling = nil // a debug trace with lines dropped is no trace
	log, err := zcfg.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: logger:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	// Each process's first and last lines: a log that spans a container's
	// restarts tells its processes apart, and the chaos run counts those
	// that ended without the last (killed, or OOM-killed).
	log.Info("worker starting", zap.Int("pid", os.Getpid()))
	defer func() { log.Info("worker exiting", zap.Int("code", code)) }()
	m, err := parseMode(*mode)
	if err != nil {
		log.Error("bad flag", zap.Error(err))
		return 2
	}
	var policies []keyflow.Option
	for _, p := range []struct {
		flag string
		set  func(keyflow.Policy) keyflow.Option
	}{
		{*foldPolicy, keyflow.WithFoldErrorPolicy},
		{*undecodable, keyflow.WithUndecodablePolicy},
		{*nilKey, keyflow.WithNilKeyPolicy},
		{*badState, keyflow.WithUndecodableStatePolicy},
	} {
		if p.flag == "" {
			continue // the flow's default: the fold error policy
		}
		pol, err := keyflow.ParsePolicy(p.flag)
		if err != nil {
			log.Error("bad flag", zap.Error(err))
			return 2
		}
		policies = append(policies, p.set(pol))
	}
	if *dlq != "" {
		policies = append(policies, keyflow.WithDeadLetterTopic(*dlq))
	}
	if *maxLive > 0 {
		policies = append(policies, keyflow.WithMaxLiveKeys(*maxLive))
	}
	if *prefix == "" {
		*prefix = *group
	}
	// Listening before the worker starts: the address advertised by
	// default is the one bound (an --http port 0 is known only now), and a
	// worker whose /state cannot be served fails at once instead of
	// advertising an endpoint nobody answers.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Error("http", zap.Error(err))
		return 2
	}
	defer func() { _ = ln.Close() }()
	endpoint := advertised(*advertise, ln.Addr().String())
	if endpoint == "" {
		log.Warn("no query endpoint advertised: /state of a key owned elsewhere answers 421 naming the owner instead of redirecting; set --advertise",
			zap.String("http", ln.Addr().String()))
	}
	bl := splitBrokers(*brokers)

	// Outputs: in the transactional mode they are produced inside the
	// partitions' transactions (exactly-once), so no producer of our own;
	// the plain mode emits through this producer (at-least-once). Either
	// way WithCreateTopics creates the output topic.
	var producer *kgo.Client
	if *output != "" && m == snapshotstore.Plain {
		if producer, err = kgo.NewClient(kgo.SeedBrokers(bl...), kgo.DefaultProduceTopic(*output)); err != nil {
			log.Error("output producer", zap.Error(err))
			return 2
		}
		defer producer.Close()
	}
	var folds atomic.Int64
	// /metrics: the worker's metrics (WithMetrics) beside the Go runtime's
	// and the process's.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w, err := actorflow.NewWorker(ledger.FlowWithOutput(producer, *output, &folds, policies...),
		actorflow.WithBrokers(bl...), actorflow.WithGroup(*group),
		actorflow.WithInputTopic(*input), actorflow.WithSnapshotTopic(*snaps),
		actorflow.WithMode(m), actorflow.WithTransactionalIDPrefix(*prefix),
		actorflow.WithCreateTopics(int32(*parts), -1),
		actorflow.WithSessionTimeout(*session),
		actorflow.WithPersistEvery(*persist), actorflow.WithCommitOffsetsInterval(*persist),
		actorflow.WithStartTimeout(3*time.Minute),
		actorflow.WithMetrics(reg),
		actorflow.WithQueryEndpoint(endpoint),
		actorflow.WithLogger(log))
	if err != nil {
		log.Error("worker", zap.Error(err))
		return 2
	}

	// Every timeout set: without IdleTimeout a keep-alive connection
	// stayed open for ever (a client holding many used up the process's
	// file descriptors, its Kafka clients' too), without WriteTimeout a
	// client that stopped reading pinned its handler (found by a review).
	// WriteTimeout is above /state's own 5 s bound.
	srv := &http.Server{Handler: statusHandler(w, &folds, reg), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 15 * time.Second, IdleTimeout: 60 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http", zap.Error(err))
		}
	}()
	defer func() {
		// Shutdown, not Close: a query or a probe in flight as Run returns
		// gets its answer (ErrUnavailable once the worker stopped) rather
		// than a reset connection, bounded so that a stuck client cannot
		// hold the exit.
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
	}()

	err = w.Run(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.As(err, new(*actorflow.PartitionError)) {
		// SIGTERM while Run still reached the brokers or checked the
		// topics: nothing started, nothing to flush — a clean stop.
		log.Info("worker stopped while starting", zap.Error(err))
		return 0
	}
	if err != nil {
		log.Error("worker failed", zap.Error(err))
		return 1
	}
	log.Info("worker stopped cleanly")
	return 0
}

// workerStatus is /status: the worker's partitions and fold count.
type workerStatus struct {
	actorflow.Status
	ProcessedTotal int64 `json:"processed_total"`
}

func statusHandler(w *actorflow.Worker, folds *atomic.Int64, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", httpapi.Live(w))
	mux.Handle("/readyz", httpapi.Ready(w))
	mux.Handle("/state", httpapi.State[ledger.State](w))
	mux.HandleFunc("/status", func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		st := w.Status(ctx)
		rw.Header().Set("Content-Type", "application/json")
		if !st.Running || st.Generation < 1 { // as httpapi.Status: 503 until joined
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(rw).Encode(workerStatus{Status: st, ProcessedTotal: folds.Load()})
	})
	return mux
}

// advertised is the worker's query endpoint: --advertise, else the bound
// --http address when other workers can dial it as it is (a host that is
// set and not the unspecified address), else none.
func advertised(flag, listen string) string {
	if flag != "" {
		return flag // NewWorker refuses it if it is not a host:port
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return ""
	}
	return listen
}

// parseMode reads --mode: the names of snapshotstore.Mode.String.
func parseMode(s string) (snapshotstore.Mode, error) {
	m, err := snapshotstore.ParseMode(s)
	if err != nil {
		return m, fmt.Errorf("--mode: %w", err)
	}
	return m, nil
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	return err
}
