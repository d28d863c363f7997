package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// member is one instance of a system under test (an actorflow worker, a pipe member) run under a
// restart policy, as Kubernetes would run it: an incarnation that returns while the test still
// runs is an exit (counted, with its error) and is started again after a short delay.
type member struct {
	name string
	run  func(ctx context.Context, incarnation int) error
	log  *zap.Logger

	mu    sync.Mutex
	exits []exit
	final error // the last incarnation's error at the test's clean stop
}

type exit struct {
	At  time.Time
	Err error
}

const restartDelay = 2 * time.Second

func (m *member) loop(ctx context.Context) {
	for inc := 1; ; inc++ {
		err := m.run(ctx, inc)
		if ctx.Err() != nil {
			m.mu.Lock()
			m.final = err
			m.mu.Unlock()
			return
		}
		m.mu.Lock()
		m.exits = append(m.exits, exit{At: time.Now(), Err: err})
		m.mu.Unlock()
		m.log.Error("MEMBER EXITED; restarting it", zap.String("member", m.name), zap.Int("incarnation", inc),
			zap.Duration("restart_in", restartDelay), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
	}
}

func (m *member) exitList() []exit {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]exit(nil), m.exits...)
}

// ---------------------------------------------------------------------------------------------
// Logs: every member logs to its own file; warnings and errors are also kept in memory with their
// fields, for the report (the partition failures with their errors are the evidence).

type logEntry struct {
	At     time.Time
	Who    string
	Level  zapcore.Level
	Msg    string
	Fields map[string]any
}

type logSink struct {
	mu      sync.Mutex
	entries []logEntry
}

func (s *logSink) list() []logEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logEntry(nil), s.entries...)
}

// captureCore is a zapcore.Core that appends entries to a logSink.
type captureCore struct {
	zapcore.LevelEnabler
	sink   *logSink
	who    string
	fields []zapcore.Field
}

func (c *captureCore) With(fs []zapcore.Field) zapcore.Core {
	return &captureCore{c.LevelEnabler, c.sink, c.who, append(append([]zapcore.Field(nil), c.fields...), fs...)}
}

func (c *captureCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *captureCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	who := c.who
	if e.LoggerName != "" {
		who += "/" + e.LoggerName
	}
	c.sink.mu.Lock()
	c.sink.entries = append(c.sink.entries, logEntry{At: e.Time, Who: who, Level: e.Level, Msg: e.Message, Fields: enc.Fields})
	c.sink.mu.Unlock()
	return nil
}

func (c *captureCore) Sync() error { return nil }

// memberLogger logs at fileLevel to path and keeps warnings and errors in sink.
func memberLogger(path, who string, fileLevel zapcore.Level, sink *logSink) (*zap.Logger, func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	ec := zap.NewDevelopmentEncoderConfig()
	ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	file := zapcore.NewCore(zapcore.NewConsoleEncoder(ec), zapcore.Lock(f), fileLevel)
	capture := &captureCore{LevelEnabler: zapcore.WarnLevel, sink: sink, who: who}
	l := zap.New(zapcore.NewTee(file, capture)).Named(who)
	return l, func() { _ = l.Sync(); f.Close() }, nil
}

// ---------------------------------------------------------------------------------------------
// The systems.

// failure is one partition failure seen in a worker's Status (Status.Failed).
type failure struct {
	At        time.Time
	Who       string
	Topic     string
	Partition int32
	Attempts  int
	Err       string
	Evicted   bool // not a failure: the member was evicted and waits for its rejoin
}

type failures struct {
	mu   sync.Mutex
	seen map[string]bool
	list []failure
}

func (f *failures) add(x failure, since time.Time) {
	key := fmt.Sprintf("%s %s[%d] %d %s", x.Who, x.Topic, x.Partition, since.UnixNano(), x.Err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	if !f.seen[key] {
		f.seen[key] = true
		f.list = append(f.list, x)
	}
}

func (f *failures) all() []failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]failure(nil), f.list...)
}

type workerConfig struct {
	brokers                     []string
	group, input, snaps, output string
	outputTimeout               time.Duration // 0: the library's default
	liveKeys                    int           // keyflow.WithMaxLiveKeys; 0: the library's default
	clientOpts                  []kgo.Opt
	extra                       []actorflow.Option
}

// ledgerFlow is ledger.FlowWithOutput, with the output timeout set when d > 0 and the live-key
// budget when liveKeys > 0.
func ledgerFlow(producer *kgo.Client, topic string, folds *atomic.Int64, d time.Duration, liveKeys int) *keyflow.Flow[ledger.State] {
	var opts []keyflow.Option
	if liveKeys > 0 {
		opts = append(opts, keyflow.WithMaxLiveKeys(liveKeys))
	}
	if d <= 0 {
		return ledger.FlowWithOutput(producer, topic, folds, opts...)
	}
	return keyflow.New(func(kc *keyflow.Context, s *ledger.State, rec *kgo.Record) (*ledger.State, error) {
		s, err := ledger.Fold(kc, s, rec)
		if err != nil {
			return nil, err
		}
		folds.Add(1)
		b, _ := json.Marshal(ledger.Output{Account: kc.Key(), Seq: s.LastSeq, Balance: s.Balance})
		return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: b})
	}, append(opts, keyflow.WithOutput(producer, topic), keyflow.WithOutputTimeout(d))...)
}

// actorflowIncarnation runs one actorflow worker process-equivalent: its own output producer,
// the ledger flow emitting an output per applied event, the transactional mode, the demo's
// settings (10 s session, snapshots and offsets every second). Its Status is polled every 250 ms
// for failed partitions.
func actorflowIncarnation(cfg workerConfig, name string, log *zap.Logger, folds *atomic.Int64, fl *failures) func(context.Context, int) error {
	return func(ctx context.Context, inc int) error {
		producer, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.brokers...), kgo.DefaultProduceTopic(cfg.output)},
			cfg.clientOpts...)...)
		if err != nil {
			return err
		}
		defer producer.Close()
		ilog := log.With(zap.Int("incarnation", inc))
		w, err := actorflow.NewWorker(ledgerFlow(producer, cfg.output, folds, cfg.outputTimeout, cfg.liveKeys), append([]actorflow.Option{
			actorflow.WithBrokers(cfg.brokers...), actorflow.WithGroup(cfg.group),
			actorflow.WithInputTopic(cfg.input), actorflow.WithSnapshotTopic(cfg.snaps),
			actorflow.WithTransactionalIDPrefix(cfg.group), // the default, spelled out: the kill targets it
			actorflow.WithSessionTimeout(10 * time.Second),
			actorflow.WithPersistEvery(time.Second), actorflow.WithCommitOffsetsInterval(time.Second),
			actorflow.WithStartTimeout(3 * time.Minute),
			actorflow.WithClientOpts(cfg.clientOpts...),
			actorflow.WithLogger(ilog),
		}, cfg.extra...)...)
		if err != nil {
			return err
		}
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		var evicted atomic.Int64 // the live-key budget at work, as of the last poll
		defer func() { ilog.Info("worker incarnation ended", zap.Int64("keys_evicted", evicted.Load())) }()
		go func() {
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
				sctx, cancel := context.WithTimeout(pctx, time.Second)
				st := w.Status(sctx)
				cancel()
				var ev int64
				for _, p := range st.Partitions {
					ev += p.Evictions
				}
				evicted.Store(max(evicted.Load(), ev))
				for _, f := range st.Failed {
					fl.add(failure{At: time.Now(), Who: fmt.Sprintf("%s#%d", name, inc), Topic: f.Topic,
						Partition: f.Partition, Attempts: f.Attempts, Err: f.Error, Evicted: f.Evicted}, f.Since)
				}
			}
		}()
		return w.Run(ctx)
	}
}

// pipeIncarnation is the reference: a hand-written franz-go GroupTransactSession pipe, one
// transaction per poll, one output per input record (its value copied, so the output names the
// event), read_committed input, the same session timeout as the workers.
func pipeIncarnation(brokers []string, group, input, output, txnID string, clientOpts []kgo.Opt, log *zap.Logger, aborts *atomic.Int64) func(context.Context, int) error {
	return func(ctx context.Context, inc int) error {
		s, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
			kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(input),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.DefaultProduceTopic(output), kgo.SessionTimeout(10 * time.Second),
			kgo.FetchMaxWait(500 * time.Millisecond),
		}, clientOpts...)...)
		if err != nil {
			return err
		}
		defer s.Close()
		for {
			fs := s.PollFetches(ctx)
			if ctx.Err() != nil {
				return nil
			}
			fs.EachError(func(t string, p int32, err error) {
				log.Warn("fetch error", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
			})
			if fs.NumRecords() == 0 {
				continue
			}
			if err := s.Begin(); err != nil {
				return fmt.Errorf("begin transaction: %w", err)
			}
			e := kgo.AbortingFirstErrPromise(s.Client())
			fs.EachRecord(func(r *kgo.Record) {
				s.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, e.Promise())
			})
			// Err waits for every promise.
			perr := e.Err()
			committed, err := s.End(ctx, kgo.TransactionEndTry(perr == nil))
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("end transaction (%d records): %w", fs.NumRecords(), err)
			}
			if !committed {
				aborts.Add(1)
				log.Warn("transaction aborted (the session re-polls its records)", zap.Int("records", fs.NumRecords()), zap.NamedError("produce_error", perr))
			}
		}
	}
}
