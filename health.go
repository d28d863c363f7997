package actorflow

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Health is what liveness and readiness probes need to know, with the reason
// behind each answer.
type Health struct {
	// Running: Run has started and not returned.
	Running bool `json:"running"`
	// BrokersReachable: the last probe of the cluster (every 5 s, and the
	// start-up retries) succeeded. LastBrokerError is the cause when not.
	BrokersReachable bool      `json:"brokers_reachable"`
	LastBrokerError  string    `json:"last_broker_error,omitempty"`
	UnreachableSince time.Time `json:"unreachable_since,omitempty"`
	// Joined: the consumer is a member of its group (generation ≥ 1).
	Joined bool `json:"joined"`
	// Recovering lists partitions still reading their snapshots; Failed the
	// failed partitions waiting to start again.
	Recovering []string          `json:"recovering,omitempty"`
	Failed     []FailedPartition `json:"failed,omitempty"`
}

// Live reports whether the process should be left running: Run is in
// progress and the cluster answered within the last minute. A worker that
// cannot reach its brokers for longer holds its partitions uselessly; a
// restart does not help either, so orchestrators should read Health's
// fields rather than restart blindly.
func (h Health) Live() bool {
	return h.Running && (h.BrokersReachable || time.Since(h.UnreachableSince) < time.Minute)
}

// Ready reports whether the worker is processing everything it owns: it
// runs, reaches its brokers, is a member of its group, and no owned
// partition is recovering or failed.
func (h Health) Ready() bool {
	return h.Running && h.BrokersReachable && h.Joined && len(h.Recovering) == 0 && len(h.Failed) == 0
}

// probe tracks whether the cluster answers.
type probe struct {
	mu        sync.Mutex
	ok        bool
	lastErr   error
	downSince time.Time
}

func (p *probe) record(err error) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.ok
	p.ok, p.lastErr = err == nil, err
	if err != nil && (was || p.downSince.IsZero()) {
		p.downSince = time.Now()
	}
	if err == nil {
		p.downSince = time.Time{}
	}
	return was != p.ok
}

func (p *probe) fill(h *Health) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h.BrokersReachable = p.ok
	if p.lastErr != nil {
		h.LastBrokerError = p.lastErr.Error()
	}
	h.UnreachableSince = p.downSince
}

// watchBrokers pings the cluster through cl every interval until ctx ends,
// logging each change of reachability with its cause.
func (p *probe) watchBrokers(ctx context.Context, cl *kgo.Client, interval time.Duration, log *zap.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, interval)
		err := cl.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if p.record(err) {
			if err != nil {
				log.Error("brokers unreachable", zap.Error(err))
			} else {
				log.Info("brokers reachable again")
			}
		} else if err != nil {
			log.Warn("brokers still unreachable", zap.Error(err))
		}
	}
}

// Health returns the worker's health (the zero Health before Run).
func (w *Worker) Health(ctx context.Context) Health {
	var h Health
	w.probe.fill(&h)
	select {
	case <-w.ready:
	default:
		return h
	}
	select {
	case <-w.done:
		return h
	default:
	}
	h.Running = true
	if m, err := w.cons.GroupMetadata(); err == nil && m.Generation >= 1 {
		h.Joined = true
	}
	st := w.Status(ctx)
	for _, p := range st.Partitions {
		if p.Phase == "recovering" {
			h.Recovering = append(h.Recovering, p.Topic+"["+strconv.Itoa(int(p.Partition))+"]")
		}
	}
	h.Failed = st.Failed
	return h
}
