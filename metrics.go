package actorflow

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// WithMetrics registers the worker's Prometheus metrics on reg (e.g.
// prometheus.NewRegistry(), served with promhttp). Default: none — no
// metric is created and no store, consumer or client is wrapped, so a
// worker without it pays nothing. NewWorker's collectors are registered by
// Run; a registration that fails (a name already registered on reg, e.g. by
// a second worker on the same registry at once) fails Run, wrapped. Run
// removes them when it returns, except one: the store producers' collector
// is an unchecked one (its series follow the clients), which a registry
// cannot remove; it stays, collecting nothing, one per Run. Labels topic and
// partition name the input partition.
//
//   - actorflow_commit_seconds{topic,partition} (histogram, seconds): the
//     duration of one store Commit (a group commit: a transaction in the
//     transactional mode, the snapshot writes and offset commit in the plain
//     mode), failed ones included — an output's time-to-visible in the
//     transactional mode is its wait for the next commit plus this.
//   - actorflow_commit_records{topic,partition} (histogram, records): the
//     snapshots plus outputs of one Commit.
//   - actorflow_commit_errors_total{topic,partition} (counter, commits):
//     Commits that failed (aborted, fenced, not owned).
//   - actorflow_records_processed_total{topic,partition} (counter, records):
//     input records handled by their key: folded, skipped or dead-lettered,
//     and also those a restarted partition replays below its snapshots and
//     the record whose fold failed the partition (again at every retry). A
//     rate of work done, not of progress: progress is the committed offset
//     (actorflow_lag).
//   - actorflow_dead_letters_total{topic,partition} (counter, records): dead
//     letters committed (transactional mode) or acknowledged (plain mode),
//     labelled with their source partition.
//   - actorflow_partition_failures_total{topic,partition} (counter,
//     failures): partition failures (each stops the partition until it
//     starts again, see WithFailFast), a failed partition's restart that
//     fails (its store's Open, its offset fetch) included.
//   - actorflow_keys{topic,partition} (gauge, keys the partition keeps:
//     loaded, held or cold; a deleted key leaves),
//     actorflow_keys_loaded{topic,partition} (gauge, keys),
//     actorflow_keys_evicted_total{topic,partition} (counter, keys unloaded
//     by the live-key budget, keyflow.WithMaxLiveKeys),
//     actorflow_keys_held{topic,partition} (gauge, keys waiting for the
//     budget to load them), actorflow_timers_gated{topic,partition} (gauge,
//     1 while the partition's due timers wait for the backlog it started
//     with, the timer gate), actorflow_in_flight_records{topic,partition}
//     and actorflow_in_flight_bytes{topic,partition} (gauges, records
//     delivered and not yet processed and their bytes: the backpressure
//     budget in use, WithMaxInFlight, WithMaxInFlightBytes),
//     actorflow_lag{topic,partition}
//     (gauge, records: high watermark − committed offset),
//     actorflow_committed_offset{topic,partition} (gauge, offset),
//     actorflow_commit_held_seconds{topic,partition} (gauge, seconds the
//     committable offset has stood still while records past it wait:
//     WithCommitHeldWarning),
//     actorflow_skipped_total{topic,partition} (counter, records and calls
//     skipped under a Skip policy since the partition started here), and
//     actorflow_partitions{phase} (gauge, partitions by phase:
//     recovering, running, revoking, stopping, failed, evicted — not a
//     failure, waiting for the rejoin — and late): read from
//     Status at scrape time, bounded by 2 s — a partition whose actor has
//     not answered by then counts as late, its other series absent.
//   - actorflow_kafka_consumer_*: franz-go's kprom metrics of the group
//     consumer's client (connections, bytes and records fetched, request
//     latencies per broker).
//   - actorflow_kafka_producer_*: the same of the Kafka store's producers
//     (bytes and records produced, request latencies, buffered records),
//     one set per client: in the transactional mode per partition's
//     producer, labelled transactional_id, present while this worker
//     owns the partition; in the plain mode the shared snapshot producer's,
//     without that label. Absent under WithStore.
//
// actorflow_lag is absent for a partition until its high watermark is
// known: the end offset listed at its assignment, or a fetch's.
func WithMetrics(reg prometheus.Registerer) Option { return func(c *config) { c.metrics = reg } }

var partitionLabels = []string{"topic", "partition"}

// metrics are a worker's own metric vectors (nil without WithMetrics).
type metrics struct {
	commitSeconds *prometheus.HistogramVec
	commitRecords *prometheus.HistogramVec
	commitErrors  *prometheus.CounterVec
	processed     *prometheus.CounterVec
	deadLetters   *prometheus.CounterVec
	failures      *prometheus.CounterVec
	// producers are the store's producer clients' kprom metrics.
	producers *producerMetrics
	// dlqTopic is the flow's dead-letter topic ("" when no policy writes one).
	dlqTopic string
	// input and snapshots name the worker's topics: an undecodable state's
	// dead letter names its snapshot record's topic (and partition, the
	// input partition's number) as its source.
	input, snapshots string
	// counters are the counters read from the partitions' Status (the
	// status collector's), ended with each copy's final Status (OnFinal).
	counters *monotonic
}

func newMetrics(dlqTopic, input, snapshots string) *metrics {
	return &metrics{
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "actorflow_commit_seconds",
			Help: "Duration of one store commit (a partition's group commit: transaction or snapshot writes plus offset commit), in seconds.",
			// 1 ms to ~16 s: a commit on a healthy cluster takes a few ms,
			// one stuck on a coordinator move seconds.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, partitionLabels),
		commitRecords: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "actorflow_commit_records",
			Help:    "Snapshots plus outputs written by one store commit, in records.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}, partitionLabels),
		commitErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actorflow_commit_errors_total",
			Help: "Store commits that failed (aborted, fenced or refused).",
		}, partitionLabels),
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actorflow_records_processed_total",
			Help: "Input records handled by their key (folded, skipped, dead-lettered; also replayed ones and one failing its partition, at every retry). Progress is actorflow_lag.",
		}, partitionLabels),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actorflow_dead_letters_total",
			Help: "Dead letters committed (transactional) or acknowledged (plain), by source partition.",
		}, partitionLabels),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actorflow_partition_failures_total",
			Help: "Partition failures (each stops the partition until it starts again), failed restarts of a failed partition included.",
		}, partitionLabels),
		producers: &producerMetrics{live: map[string]*kprom.Metrics{}},
		dlqTopic:  dlqTopic,
		input:     input, snapshots: snapshots,
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.commitSeconds, m.commitRecords, m.commitErrors, m.processed, m.deadLetters, m.failures, m.producers}
}

func partitionLabel(p int32) string { return strconv.FormatInt(int64(p), 10) }

// deadLetter counts one dead letter under its source partition, read from
// its KIP-1034 headers (keyflow.DeadLetterRecord).
func (m *metrics) deadLetter(r *kgo.Record) {
	topic, part := "", ""
	for _, h := range r.Headers {
		switch h.Key {
		case keyflow.HeaderErrorTopic:
			topic = string(h.Value)
		case keyflow.HeaderErrorPartition:
			part = string(h.Value)
		}
	}
	if topic == m.snapshots && topic != "" {
		// An undecodable state's (keyflow.KindUndecodableState): counted
		// under the input partition whose key it is, as every other dead
		// letter, not under a topic no dashboard of the input filters on
		// (helper-110).
		topic = m.input
	}
	m.deadLetters.WithLabelValues(topic, part).Inc()
}

// deadLetterHook counts the plain mode's dead letters once acknowledged.
type deadLetterHook struct{ m *metrics }

// OnProduceRecordUnbuffered implements kgo.HookProduceRecordUnbuffered.
func (h deadLetterHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err == nil {
		h.m.deadLetter(r)
	}
}

// registerMetrics registers the worker's collectors on WithMetrics'
// registerer for one Run; unregister removes them when Run returns, so that
// a registry outlives its worker. Without WithMetrics it returns nil.
func (w *Worker) registerMetrics() (m *metrics, unregister func(), err error) {
	reg := w.cfg.metrics
	if reg == nil {
		return nil, func() {}, nil
	}
	m = newMetrics(w.flow.DeadLetterTopic(w.cfg.input), w.cfg.input, w.cfg.snapshot)
	m.counters = &monotonic{}
	cs := append(m.collectors(), statusCollector{w: w, counters: m.counters})
	var done []prometheus.Collector
	unregister = func() {
		for _, c := range done {
			reg.Unregister(c)
		}
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			unregister()
			return nil, nil, fmt.Errorf("actorflow: WithMetrics: register: %w", err)
		}
		done = append(done, c)
	}
	return m, unregister, nil
}

// consumerClientOpts are the group consumer's client options: under
// WithMetrics, franz-go's kprom hook is added (one kprom.Metrics per client:
// it registers its collectors when the client starts and removes them when
// it closes); a clientID (WithQueryEndpoint's) overrides WithClientOpts'.
// release, called when Run returns, removes the client's collectors then:
// after an abandoned leave (WithLeaveTimeout) the client closes later, and a
// new worker on the same registry meanwhile panicked registering its own
// (kprom registers with MustRegister); the late close's removal, which would
// take the new worker's collectors of the same names, does nothing.
func (w *Worker) consumerClientOpts(clientID string) (opts []kgo.Opt, release func()) {
	opts = slices.Clone(w.cfg.clientOpts)
	if clientID != "" {
		opts = append(opts, kgo.ClientID(clientID))
	}
	if w.cfg.metrics == nil {
		return opts, func() {}
	}
	reg := &runRegisterer{Registerer: w.cfg.metrics}
	// Records beside kprom's default bytes, and request latencies: what the
	// README promises (an operator's trial found neither exported).
	km := kprom.NewMetrics("actorflow", kprom.Subsystem("kafka_consumer"), kprom.Registerer(reg),
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.UncompressedBytes, kprom.Records),
		kprom.Histograms(kprom.RequestDurationE2E))
	return append(opts, kgo.WithHooks(km)), func() {
		km.OnClientClosed(nil)
		reg.ended.Store(true)
	}
}

// runRegisterer is a Registerer for one Run: inert once it ended.
type runRegisterer struct {
	prometheus.Registerer
	ended atomic.Bool
}

func (r *runRegisterer) Register(c prometheus.Collector) error {
	if r.ended.Load() {
		return nil
	}
	return r.Registerer.Register(c)
}

func (r *runRegisterer) MustRegister(cs ...prometheus.Collector) {
	if r.ended.Load() {
		return
	}
	r.Registerer.MustRegister(cs...)
}

func (r *runRegisterer) Unregister(c prometheus.Collector) bool {
	if r.ended.Load() {
		return false
	}
	return r.Registerer.Unregister(c)
}

// producerMetrics is one collector over the kprom metrics of the store's
// producer clients (snapshotstore.KafkaConfig.ProducerHooks), which come and
// go with the assignment and are re-created on a re-initialisation.
//
// Each client gets its own kprom.Metrics, not registered anywhere
// (kprom.Registry(nil)): kprom v1.5 keeps one client's collectors per
// Metrics — a Metrics shared by two clients re-registers its names at the
// second's start (a duplicate-registration panic on a shared registry) and
// unregisters every client's at the first close. Registered on the
// worker's registry, the per-client Metrics of one transactional.id would
// collide instead when a partition's producer is replaced: the new client
// starts before the old one closes (snapshotstore, reinit). Here the newest
// client of an id replaces the older in live, and a client's close removes
// only itself.
type producerMetrics struct {
	mu sync.Mutex
	// live holds the newest open client's Metrics by transactional.id ("":
	// the plain mode's shared producer).
	live map[string]*kprom.Metrics
}

// Describe describes nothing: an unchecked collector, whose set of series
// follows the clients (the registry checks their consistency at gather).
func (p *producerMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect collects every live client's kprom metrics.
func (p *producerMetrics) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, km := range p.live {
		km.Collect(ch)
	}
}

// hooks are the kgo hooks of one producer client with transactional.id id:
// its own kprom.Metrics (labelled transactional_id unless id is ""), and the
// hook that publishes them in live while the client is open.
func (p *producerMetrics) hooks(id string) []kgo.Hook {
	// Records beside the default bytes; no latency histograms: one set per
	// owned partition's producer, their buckets times the brokers each.
	opts := []kprom.Opt{kprom.Subsystem("kafka_producer"), kprom.Registry(nil),
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.UncompressedBytes, kprom.Records)}
	if id != "" {
		opts = append(opts, kprom.WithStaticLabel(prometheus.Labels{"transactional_id": id}))
	}
	km := kprom.NewMetrics("actorflow", opts...)
	// km first: kgo runs the hooks in order, and km creates its collectors
	// in its OnNewClient.
	return []kgo.Hook{km, producerLifecycle{p: p, id: id, km: km}}
}

// producerLifecycle publishes a client's kprom metrics from its start to
// its close.
type producerLifecycle struct {
	p  *producerMetrics
	id string
	km *kprom.Metrics
}

// OnNewClient implements kgo.HookNewClient.
func (l producerLifecycle) OnNewClient(*kgo.Client) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.p.live[l.id] = l.km
}

// OnClientClosed implements kgo.HookClientClosed.
func (l producerLifecycle) OnClientClosed(*kgo.Client) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.p.live[l.id] == l.km {
		delete(l.p.live, l.id)
	}
}
