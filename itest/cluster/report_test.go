package cluster

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"go.uber.org/zap/zapcore"
)

// timeline names every instant of the run by its phase: setup (cluster up to the warm-up),
// baseline, each kill's window, the drain.
type timeline struct {
	setup, baseline window
	kills           []window
	drainFrom       time.Time
}

// when names a time by the phase it falls in ("kill 2 +3.4 s").
func (tl timeline) when(t time.Time) string {
	for _, w := range append([]window{tl.setup, tl.baseline}, tl.kills...) {
		if w.contains(t) {
			return fmt.Sprintf("%s +%.1f s", w.Name, t.Sub(w.From).Seconds())
		}
	}
	if !tl.drainFrom.IsZero() && !t.Before(tl.drainFrom) {
		return fmt.Sprintf("drain +%.1f s", t.Sub(tl.drainFrom).Seconds())
	}
	return fmt.Sprintf("setup %+.1f s", t.Sub(tl.setup.From).Seconds())
}

// loads samples /proc/loadavg (the 1-minute load): the machine is shared, and its load explains
// much of what a latency measured on it shows.
type loads struct {
	mu sync.Mutex
	at []time.Time
	v  []float64
}

func (l *loads) sample(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile("/proc/loadavg"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				if v, err := strconv.ParseFloat(f[0], 64); err == nil {
					l.mu.Lock()
					l.at, l.v = append(l.at, time.Now()), append(l.v, v)
					l.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// in returns the mean and the maximum 1-minute load sampled in w ("-" without samples).
func (l *loads) in(w window) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum, hi float64
	n := 0
	for i, t := range l.at {
		if w.contains(t) {
			sum += l.v[i]
			hi = max(hi, l.v[i])
			n++
		}
	}
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f", sum/float64(n), hi)
}

// report renders the run as markdown: the kills, per kill and system the latency and stalls,
// the totals, every worker exit and partition failure with its error, and the error log lines.
func report(cfg settings, version string, in *input, systems map[string]*system, kills []*kill, tl timeline,
	fault window, load *loads, logs []logEntry, mismatches []ledger.Mismatch) string {
	windows, baseline := tl.kills, tl.baseline
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	names := make([]string, 0, len(systems))
	for n := range systems {
		names = append(names, n)
	}
	sort.Strings(names)

	p("# 3-node cluster, node kills (%s)", time.Now().Format(time.RFC3339))
	p("")
	p("Kafka %s, 3 combined KRaft nodes, RF 3, min.insync.replicas 2. Input %d events/s over %d accounts, %d partitions; "+
		"%d members per system; %d kills, each node down %v, then %v to settle.",
		version, cfg.rate, cfg.accounts, cfg.partitions, cfg.members, len(kills), cfg.down, cfg.settle)
	if cfg.outputTimeout > 0 {
		p("The workers' output timeout: %v (keyflow.WithOutputTimeout).", cfg.outputTimeout)
	}
	p("Latency: input CreateTime → output visible to an independent read_committed reader; \"from ack\": from the input " +
		"producer's ack instead, the system's own share (without the time the cluster took to accept the input). Stalls: the longest interval " +
		"without any output visible (any partition / the worst partition), and without any committed-offset advance " +
		"(polled every 100 ms by a client of the test's own; actorflow commits every 1 s; a failed poll records no advance, " +
		"so an outage of the poller reads as a stall: failed polls are counted beside it).")
	p("")
	p("## Kills")
	p("")
	p("| kill | node | down | restart → listed | what the node led when killed |")
	p("| --- | --- | --- | --- | --- |")
	for _, k := range kills {
		back := k.Back.Sub(k.Restart).Round(100 * time.Millisecond).String()
		if k.restartErr != nil {
			back = "FAILED: " + k.restartErr.Error()
		}
		p("| %d | %d | %v | %s | %s |", k.N, k.Node, k.Restart.Sub(k.At).Round(100*time.Millisecond), back, k.Why)
	}
	p("")
	p("## Per kill")
	p("")
	p("| window | system | outputs | p50 | p99 | max | from ack: p50 / p99 / max | output stall: any / worst partition | commit stall: any / worst partition | failed offset polls | exits | partition failures | load avg / max |")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	row := func(w window, s *system) {
		lat := quantiles(s.out.latencies(w), 0.5, 0.99, 1)
		n := len(s.out.latencies(w))
		fa := quantiles(s.out.latenciesFromAck(in, w), 0.5, 0.99, 1)
		oa, op, opp := s.out.stalls(w)
		ca, cp, cpp := s.commits.stalls(w)
		exits := 0
		for _, e := range s.exits() {
			if w.contains(e.At) {
				exits++
			}
		}
		fails := 0
		for _, f := range s.failures.all() {
			if w.contains(f.At) {
				fails++
			}
		}
		p("| %s | %s | %d | %s | %s | %s | %s / %s / %s | %s / %s (p%d, %s) | %s / %s (p%d) | %d | %d | %d | %s |", w.Name, s.name, n,
			ms(lat[0]), ms(lat[1]), ms(lat[2]), ms(fa[0]), ms(fa[1]), ms(fa[2]), ms(oa.Len), ms(op.Len), opp, tl.when(op.From),
			ms(ca.Len), ms(cp.Len), cpp, s.commits.errorsIn(w), exits, fails, load.in(w))
	}
	for _, w := range append(append([]window{baseline}, windows...), fault) {
		for _, n := range names {
			row(w, systems[n])
		}
	}
	p("")
	p("The input producer (shared by both systems; kgo defaults, acks=all): its own delays are part of every latency above.")
	p("")
	p("| window | longest produce latency (CreateTime → ack) | longest interval without an ack |")
	p("| --- | --- | --- |")
	for _, w := range append(append([]window{baseline}, windows...), fault) {
		lat, stall := in.ackStats(w)
		p("| %s | %s | %s |", w.Name, ms(lat), ms(stall.Len))
	}
	p("")
	p("## Totals")
	p("")
	p("| system | events in | folds | outputs missing | duplicate outputs | reordered outputs | undecodable / unknown | exits | partition failures | aborted txns (pipe) |")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, n := range names {
		s := systems[n]
		missing := s.out.missing(in)
		s.out.mu.Lock()
		p("| %s | %d | %d | %d | %d | %d | %d / %d | %d | %d | %d |", n, in.n, s.folds.Load(), missing, s.out.dups,
			s.out.reordered, s.out.undecoded, s.out.unknown, len(s.exits()), len(s.failures.all()), s.aborts.Load())
		s.out.mu.Unlock()
	}
	for _, n := range names {
		c := systems[n].commits
		c.mu.Lock()
		if c.lastErr != nil {
			p("")
			p("%s: %d committed-offset polls failed; the last: `%v`", n, len(c.errs), c.lastErr)
		}
		c.mu.Unlock()
	}
	in.mu.Lock()
	p("")
	p("Input produce errors: %d. Ledger mismatches (actorflow's snapshots vs the input's fold): %d.", len(in.errs), len(mismatches))
	in.mu.Unlock()
	for i, m := range mismatches {
		if i == 20 {
			p("- ... %d in all", len(mismatches))
			break
		}
		p("- %s", m)
	}

	p("")
	p("## Member exits (Run / the pipe loop returned while the test ran; restarted after %v)", restartDelay)
	p("")
	none := true
	for _, n := range names {
		for _, m := range systems[n].members {
			for _, e := range m.exitList() {
				none = false
				p("- %s, %s: `%v`", tl.when(e.At), m.name, e.Err)
			}
		}
	}
	if none {
		p("none")
	}

	p("")
	p("## Partition failures (the workers' Status.Failed, polled every 250 ms)")
	p("")
	none = true
	for _, n := range names {
		for _, f := range systems[n].failures.all() {
			none = false
			p("- %s, %s, %s[%d] (consecutive failures %d): `%s`", tl.when(f.At), f.Who, f.Topic, f.Partition, f.Attempts, f.Err)
		}
	}
	if none {
		p("none")
	}

	p("")
	p("## Errors logged by the members (level error), in order")
	p("")
	none = true
	for _, e := range logs {
		if e.Level < zapcore.ErrorLevel {
			continue
		}
		none = false
		p("- %s, %s: %s%s", tl.when(e.At), e.Who, e.Msg, fieldString(e.Fields))
	}
	if none {
		p("none")
	}
	p("")
	p("## Warnings by message (count, first seen)")
	p("")
	type agg struct {
		n     int
		first time.Time
		ex    string
	}
	warn := map[string]*agg{}
	var keys []string
	for _, e := range logs {
		if e.Level != zapcore.WarnLevel {
			continue
		}
		who := e.Who
		if i := strings.Index(who, "-"); i > 0 {
			who = who[:i] // the system
		}
		k := who + ": " + e.Msg
		a := warn[k]
		if a == nil {
			a = &agg{first: e.At, ex: fieldString(e.Fields)}
			warn[k] = a
			keys = append(keys, k)
		}
		a.n++
	}
	for _, k := range keys {
		a := warn[k]
		p("- %d × %s (first %s; e.g.%s)", a.n, k, tl.when(a.first), a.ex)
	}
	if len(keys) == 0 {
		p("none")
	}
	return b.String()
}

func fieldString(fs map[string]any) string {
	keys := make([]string, 0, len(fs))
	for k := range fs {
		if k == "errorVerbose" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=`%v`", k, fs[k])
	}
	return b.String()
}
