package actorflow

import (
	"context"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/prometheus/client_golang/prometheus"
)

// statusScrapeTimeout bounds a scrape's Status read: a partition busy in a
// long commit answers late, and a scrape must not hang on it.
const statusScrapeTimeout = 2 * time.Second

var (
	descKeys = prometheus.NewDesc("actorflow_keys",
		"Keys the partition keeps, loaded, held or cold (a deleted key leaves), per owned partition: its key space in memory.", partitionLabels, nil)
	descKeysLoaded = prometheus.NewDesc("actorflow_keys_loaded",
		"Keys whose actor is loaded, per owned partition.", partitionLabels, nil)
	descKeysEvicted = prometheus.NewDesc("actorflow_keys_evicted_total",
		"Keys asked to unload because the partition's live-key budget was full (keyflow.WithMaxLiveKeys), in this process (each restart of the partition counts on, and a partition that left this worker keeps its final count).", partitionLabels, nil)
	descSkipped = prometheus.NewDesc("actorflow_skipped_total",
		"Records and calls skipped under a Skip policy (folds, undecodable records, timers, load hooks, records without a usable key; and timers and load hooks failing under DeadLetter, which have no record to dead-letter), in this process (as actorflow_keys_evicted_total): each left no effect, logged at warn.", partitionLabels, nil)
	descKeysHeld = prometheus.NewDesc("actorflow_keys_held",
		"Keys whose records wait for the live-key budget to load them, per owned partition: a budget too small for the hot keys shows here.", partitionLabels, nil)
	descTimersGated = prometheus.NewDesc("actorflow_timers_gated",
		"1 while the partition reads the backlog it started with, its due timers waiting for the records up to their due time (the timer gate); 0 once it caught up, for the rest of its life.", partitionLabels, nil)
	descInFlight = prometheus.NewDesc("actorflow_in_flight_records",
		"Input records delivered to the partition and not yet processed: its backpressure budget in use (WithMaxInFlight).", partitionLabels, nil)
	descInFlightBytes = prometheus.NewDesc("actorflow_in_flight_bytes",
		"The same records' bytes (key, value, headers): the byte budget in use (WithMaxInFlightBytes).", partitionLabels, nil)
	descLag = prometheus.NewDesc("actorflow_lag",
		"Input records not yet committed: high watermark minus committed offset, per owned partition.", partitionLabels, nil)
	descCommitted = prometheus.NewDesc("actorflow_committed_offset",
		"The partition's committed input offset.", partitionLabels, nil)
	descCommitHeld = prometheus.NewDesc("actorflow_commit_held_seconds",
		"How long the partition's committable offset has stood still while records past it wait to be persisted, as of its last commit tick (0: moving, or nothing waits): a fold that never returns, or an output or write that never ends, shows here (WithCommitHeldWarning logs the key).", partitionLabels, nil)
	descBrokersReachable = prometheus.NewDesc("actorflow_brokers_reachable",
		"1 when the worker's last probe of its brokers (every 5 s, and at once when the group session is lost) succeeded, else 0 (Health.BrokersReachable).", nil, nil)
	descBrokersUnreachable = prometheus.NewDesc("actorflow_brokers_unreachable_seconds",
		"How long the brokers have not answered the worker's probes, from the first failed probe of the outage (or Run's start until the first answer); 0 while they answer.", nil, nil)
	descPartitions = prometheus.NewDesc("actorflow_partitions",
		"Owned partitions by phase (recovering, running, revoking, stopping, failed; evicted: stopped by this member's eviction, waiting for the rejoin, not a failure; late: not answering within the scrape's bound, its other series absent).", []string{"phase"}, nil)
)

// statusCounters are the counters read from a partition's Status.
var statusCounters = []struct {
	name  string
	desc  *prometheus.Desc
	count func(partitionflow.Status) int64
}{
	{"evicted", descKeysEvicted, func(p partitionflow.Status) int64 { return p.Evictions }},
	{"skipped", descSkipped, func(p partitionflow.Status) int64 { return p.Skipped }},
}

// final records a partition copy's final counts (partitionflow.Config's
// OnFinal), which hold what it counted after the last scrape.
func (m *monotonic) final(p partitionflow.Status) {
	tp := coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	for _, sc := range statusCounters {
		m.end(sc.name, tp, p.Start, sc.count(p))
	}
}

// statusCollector reads Worker.Status at scrape time, so that the gauges
// cost nothing between scrapes and no hot path is instrumented.
type statusCollector struct {
	w *Worker
	// counters keeps the counters read from Status going up across a
	// partition's copies (each counts from 0).
	counters *monotonic
}

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descKeys
	ch <- descKeysLoaded
	ch <- descKeysEvicted
	ch <- descSkipped
	ch <- descKeysHeld
	ch <- descTimersGated
	ch <- descInFlight
	ch <- descInFlightBytes
	ch <- descLag
	ch <- descCommitted
	ch <- descCommitHeld
	ch <- descPartitions
	ch <- descBrokersReachable
	ch <- descBrokersUnreachable
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statusScrapeTimeout)
	defer cancel()
	st := c.w.Status(ctx)
	for _, p := range st.Partitions {
		part := partitionLabel(p.Partition)
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(p.Keys), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descKeysLoaded, prometheus.GaugeValue, float64(p.KeysLoaded), p.Topic, part)
		tp := coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		for _, sc := range statusCounters {
			c.counters.value(sc.name, tp, p.Start, sc.count(p))
		}
		ch <- prometheus.MustNewConstMetric(descKeysHeld, prometheus.GaugeValue, float64(p.KeysHeld), p.Topic, part)
		gated := 0.0
		if p.TimersGated {
			gated = 1
		}
		ch <- prometheus.MustNewConstMetric(descTimersGated, prometheus.GaugeValue, gated, p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(p.InFlight), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descInFlightBytes, prometheus.GaugeValue, float64(p.InFlightBytes), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(p.Committed), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(descCommitHeld, prometheus.GaugeValue, float64(p.CommitHeldMs)/1000, p.Topic, part)
		// Absent while the high watermark is unknown (Status's -1), rather
		// than a false 0.
		if p.Lag >= 0 {
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(p.Lag), p.Topic, part)
		}
	}
	// Every partition counted here, owned still or not (a revoked one's
	// final count stays, as a CounterVec keeps its labels).
	for _, sc := range statusCounters {
		c.counters.each(sc.name, func(tp coordinator.TopicPartition, n int64) {
			ch <- prometheus.MustNewConstMetric(sc.desc, prometheus.CounterValue, float64(n), tp.Topic, partitionLabel(tp.Partition))
		})
	}
	// A failed partition, its actors gone, keeps its committed offset and
	// lag (as of its last commit and fetch): an alert on the lag would miss
	// the one partition stuck at a failing record.
	running := make(map[coordinator.TopicPartition]bool, len(st.Partitions))
	for _, p := range st.Partitions {
		running[coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = true
	}
	for _, f := range st.Failed {
		if running[coordinator.TopicPartition{Topic: f.Topic, Partition: f.Partition}] || f.Committed < 0 || f.Evicted {
			// A stopping one is above; an evicted one's partition is
			// another member's by now, whose series count.
			continue
		}
		part := partitionLabel(f.Partition)
		ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(f.Committed), f.Topic, part)
		if f.Lag >= 0 {
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(f.Lag), f.Topic, part)
		}
	}
	for phase, n := range phaseCounts(st) {
		ch <- prometheus.MustNewConstMetric(descPartitions, prometheus.GaugeValue, float64(n), phase)
	}
	// An outage as a series (an operator's trial: it was in /readyz's JSON
	// only, among the other reasons for a 503).
	var h Health
	c.w.probe.fill(&h)
	reachable, down := 0.0, 0.0
	if h.BrokersReachable {
		reachable = 1
	} else if !h.UnreachableSince.IsZero() {
		down = time.Since(h.UnreachableSince).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descBrokersReachable, prometheus.GaugeValue, reachable)
	ch <- prometheus.MustNewConstMetric(descBrokersUnreachable, prometheus.GaugeValue, down)
}

// phaseCounts is actorflow_partitions' value per phase: the running
// partitions' phases, the failed ones as failed or evicted (an eviction is
// not a failure, FailedPartition.Evicted: an alert on phase="failed" fired
// on every session timeout), a stopping partition already listed failed
// counted once, as such, and late: owned, but its actor did not answer
// within the scrape's bound (its series are absent from that scrape).
func phaseCounts(st Status) map[string]int {
	phases := map[string]int{"recovering": 0, "running": 0, "revoking": 0, "stopping": 0, "failed": 0, "evicted": 0, "late": len(st.Late)}
	for _, f := range st.Failed {
		if f.Evicted {
			phases["evicted"]++
		} else {
			phases["failed"]++
		}
	}
	failed := st.failedSet()
	for _, p := range st.Partitions {
		if p.Phase != "stopping" || !failed[coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}] {
			phases[p.Phase]++
		}
	}
	return phases
}
