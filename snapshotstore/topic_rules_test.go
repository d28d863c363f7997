package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// rulesFake answers describe with the rules or error set, counting calls;
// a call blocks while gate is set and open.
type rulesFake struct {
	mu    sync.Mutex
	rules TopicRules
	err   error
	calls atomic.Int32
	// spawned counts the background reads started (topicRules.spawn).
	spawned atomic.Int32
	gate    chan struct{}
	asked   chan string
	panics  bool // describe panics
}

func (f *rulesFake) describe(_ context.Context, topic string, _ TopicRules) (TopicRules, error) {
	f.calls.Add(1)
	f.mu.Lock()
	panics := f.panics
	f.mu.Unlock()
	if panics {
		panic("describe panicked")
	}
	if f.asked != nil {
		f.asked <- topic
	}
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rules, f.err
}

// rulesForTest is the production cache over f, its background reads
// counted and its expiries captured, to fire by hand (expire), both
// passed on to the production hooks' behaviour otherwise.
type rulesForTest struct {
	*topicRules
	mu      sync.Mutex
	pending []func() // the expiries armed, not fired yet
}

func newRulesForTest(f *rulesFake, log *zap.Logger) *rulesForTest {
	r := &rulesForTest{topicRules: newTopicRules(f.describe, log)}
	spawn := r.spawn
	r.spawn = func(g func()) { f.spawned.Add(1); spawn(g) }
	r.after = func(_ time.Duration, g func()) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.pending = append(r.pending, g)
	}
	return r
}

// expire fires every expiry armed so far.
func (r *rulesForTest) expire() {
	r.mu.Lock()
	fs := r.pending
	r.pending = nil
	r.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func TestTopicRulesProductionHooks(t *testing.T) {
	r := newTopicRules(nil, zap.NewNop())
	done := make(chan struct{})
	r.after(time.Millisecond, func() { r.spawn(func() { close(done) }) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the production after/spawn never ran their function")
	}
}

func TestTopicRulesReadOnceAndShared(t *testing.T) {
	f := &rulesFake{rules: TopicRules{MaxMessageBytes: 4096, RequiresKey: true}, gate: make(chan struct{}), asked: make(chan string, 4)}
	r := newRulesForTest(f, zap.NewNop())
	got := make(chan TopicRules, 2)
	go func() { got <- r.get("out") }()
	<-f.asked // the first read is under way
	go func() { got <- r.get("out") }()
	close(f.gate)
	for range 2 {
		if g := <-got; g != f.rules {
			t.Fatalf("get = %+v, want %+v", g, f.rules)
		}
	}
	if g := r.get("out"); g != f.rules {
		t.Fatalf("cached get = %+v", g)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d reads of one topic, want 1 (concurrent first uses share it, later ones hit the cache)", n)
	}
	if g := r.get(""); g != (TopicRules{}) || f.calls.Load() != 1 {
		t.Fatalf("the empty topic: %+v after %d reads, want unknown and no read", g, f.calls.Load())
	}
}

func TestTopicRulesRefreshInTheBackground(t *testing.T) {
	f := &rulesFake{rules: TopicRules{MaxMessageBytes: 4096}}
	r := newRulesForTest(f, zap.NewNop())
	r.get("out")
	if g := r.get("out"); g.MaxMessageBytes != 4096 || f.spawned.Load() != 0 {
		t.Fatalf("get before the TTL = %+v after %d background reads, want the rules and none", g, f.spawned.Load())
	}
	f.mu.Lock()
	f.rules = TopicRules{MaxMessageBytes: 8192}
	f.mu.Unlock()
	f.gate, f.asked = make(chan struct{}), make(chan string, 1)
	r.expire() // the TTL's end
	// Stale: the old rules answer at once, a read starts behind them.
	if g := r.get("out"); g.MaxMessageBytes != 4096 {
		t.Fatalf("stale get = %+v, want the old rules while the read runs", g)
	}
	<-f.asked
	if g := r.get("out"); g.MaxMessageBytes != 4096 || f.spawned.Load() != 1 {
		t.Fatalf("get during the refresh = %+v after %d background reads, want the old rules and no second read", g, f.spawned.Load())
	}
	close(f.gate)
	deadline := time.Now().Add(10 * time.Second)
	for r.get("out").MaxMessageBytes != 8192 {
		if time.Now().After(deadline) {
			t.Fatal("the refreshed rules never answered")
		}
		time.Sleep(time.Millisecond)
	}
	if f.spawned.Load() != 1 {
		t.Fatalf("%d background reads, want 1 (the refreshed entry is fresh until its next TTL)", f.spawned.Load())
	}
}

func TestTopicRulesFailedReadIsUnknownAndRetried(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	f := &rulesFake{err: errors.New("not authorized")}
	r := newRulesForTest(f, zap.New(core))
	if g := r.get("out"); g != (TopicRules{}) {
		t.Fatalf("get after a failed read = %+v, want unknown", g)
	}
	if g := r.get("out"); g != (TopicRules{}) || f.calls.Load() != 1 {
		t.Fatalf("get before the retry = %+v after %d reads, want unknown and no read", g, f.calls.Load())
	}
	r.expire() // the retry's time: fails again, not warned again
	r.get("out")
	deadline := time.Now().Add(10 * time.Second)
	for f.calls.Load() != 2 || r.refreshingOf("out") {
		if time.Now().After(deadline) {
			t.Fatal("the second read never ended")
		}
		time.Sleep(time.Millisecond)
	}
	f.mu.Lock()
	f.rules, f.err = TopicRules{MaxMessageBytes: 2048}, nil
	f.mu.Unlock()
	r.expire()
	r.get("out") // starts the third read
	for r.get("out").MaxMessageBytes != 2048 {
		if time.Now().After(deadline) {
			t.Fatal("the retried read never answered")
		}
		time.Sleep(time.Millisecond)
	}
	warns := logs.FilterLevelExact(zap.WarnLevel).FilterField(zap.String("topic", "out"))
	debugs := logs.FilterLevelExact(zap.DebugLevel).FilterField(zap.String("topic", "out"))
	if warns.Len() != 1 || debugs.Len() != 1 {
		t.Fatalf("%d warnings and %d debug lines, want the failed streak warned once and its repeat at debug", warns.Len(), debugs.Len())
	}
}

// refreshingOf reports whether topic's entry has a read under way.
func (r *rulesForTest) refreshingOf(topic string) bool {
	v, ok := r.m.Load(topic)
	return ok && v.(*rulesEntry).refreshing.Load()
}

func TestBatchLimitBoundedByTheTopic(t *testing.T) {
	f := &rulesFake{rules: TopicRules{MaxMessageBytes: 4096}}
	limit := newRulesForTest(f, zap.NewNop()).batchLimit(func(string) int32 { return 1_000_012 })
	if n := limit("out"); n != 4096 {
		t.Fatalf("batch limit = %d, want the topic's 4096", n)
	}
	if n := limit(""); n != 1_000_012 {
		t.Fatalf("batch limit of the empty topic (kgo's validation) = %d, want the producer's", n)
	}
	f.rules.MaxMessageBytes = 100
	if n := newRulesForTest(f, zap.NewNop()).batchLimit(func(string) int32 { return 1_000_012 })("out"); n != minBatchLimit {
		t.Fatalf("batch limit under a 100-byte topic = %d, want kgo's minimum %d", n, minBatchLimit)
	}
	f.rules.MaxMessageBytes = 5_000_000
	if n := newRulesForTest(f, zap.NewNop()).batchLimit(func(string) int32 { return 1_000_012 })("out"); n != 1_000_012 {
		t.Fatalf("batch limit under a larger topic limit = %d, want the producer's", n)
	}
}

// A first read that panics leaves the rules unknown: the next use must not
// wait for it for ever.
func TestTopicRulesFirstReadPanicking(t *testing.T) {
	f := &rulesFake{panics: true}
	r := newRulesForTest(f, zap.NewNop())
	func() {
		defer func() { _ = recover() }()
		r.get("out")
	}()
	got := make(chan TopicRules, 1)
	go func() { got <- r.get("out") }()
	select {
	case g := <-got:
		if g != (TopicRules{}) {
			t.Fatalf("get after a panicked read = %+v, want unknown", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("get waits for a first read that panicked")
	}
	f.mu.Lock()
	f.panics, f.rules = false, TopicRules{MaxMessageBytes: 2048}
	f.mu.Unlock()
	r.expire() // the retry's time
	r.get("out")
	deadline := time.Now().Add(10 * time.Second)
	for r.get("out").MaxMessageBytes != 2048 {
		if time.Now().After(deadline) {
			t.Fatal("a first read that panicked is never asked again")
		}
		time.Sleep(time.Millisecond)
	}
}

// A missing topic's rules are read again by their first use after
// topicRulesRetry, and a use meanwhile waits for that read: answered the
// stale Missing, its record was refused for good although the topic had
// been created.
func TestAMissingTopicsReReadIsWaitedFor(t *testing.T) {
	f := &rulesFake{rules: TopicRules{Missing: true}}
	r := newRulesForTest(f, zap.NewNop())
	if !r.get("t").Missing {
		t.Fatal("not Missing at the first read")
	}
	f.mu.Lock()
	f.rules, f.gate, f.asked = TopicRules{MaxMessageBytes: 4096}, make(chan struct{}), make(chan string, 1)
	f.mu.Unlock()
	r.expire() // topicRulesRetry passed
	first := make(chan TopicRules)
	go func() { first <- r.get("t") }()
	<-f.asked // the first use reads again, held in its read
	second := make(chan TopicRules, 1)
	go func() { second <- r.get("t") }()
	select {
	case got := <-second:
		t.Fatalf("a use during the read got %+v at once: the stale answer", got)
	case <-time.After(50 * time.Millisecond): // an absence: the wait cannot be awaited
	}
	close(f.gate)
	for _, c := range []chan TopicRules{first, second} {
		if got := <-c; got.Missing || got.MaxMessageBytes != 4096 {
			t.Fatalf("after the read: %+v, want the topic's rules", got)
		}
	}
	if n := f.spawned.Load(); n != 0 {
		t.Fatalf("%d reads in the background, want the missing topic's in its use", n)
	}
}

// A produce the brokers refused for one of the rules (a record too large,
// a timestamp out of bounds, a key-less record to a compacted topic, the
// topic gone) has the topic's rules read again by their next use, in that
// use: the configs may have changed since they were read (up to
// topicRulesTTL ago), and a partition started again on the stale ones
// failed at every restart. Other errors, and topics never read, change
// nothing.
func TestTopicRulesReadAgainAfterARefusal(t *testing.T) {
	f := &rulesFake{rules: TopicRules{MaxMessageBytes: 1 << 20}}
	r := newRulesForTest(f, zap.NewNop())
	r.get("out")
	f.mu.Lock()
	f.rules = TopicRules{MaxMessageBytes: 1024} // lowered since
	f.mu.Unlock()
	for _, err := range []error{errors.New("connection reset"), kerr.NotLeaderForPartition} {
		r.refused(&kgo.Record{Topic: "out"}, err)
		if g := r.get("out"); g.MaxMessageBytes != 1<<20 || f.calls.Load() != 1 {
			t.Fatalf("after a failure that is no rule's (%v): %+v, %d reads; want the cached rules", err, g, f.calls.Load())
		}
	}
	r.refused(&kgo.Record{Topic: "never-read"}, kerr.MessageTooLarge)
	r.refused(&kgo.Record{Topic: "out"}, fmt.Errorf("record to out with key %q: %w", "k", kerr.MessageTooLarge))
	if g := r.get("out"); g.MaxMessageBytes != 1024 || f.calls.Load() != 2 || f.spawned.Load() != 0 {
		t.Fatalf("the next use after a refusal: %+v after %d reads (%d in the background); want the present rules, read by it", g, f.calls.Load(), f.spawned.Load())
	}
	if g := r.get("out"); g.MaxMessageBytes != 1024 || f.calls.Load() != 2 {
		t.Fatalf("the use after it: %+v after %d reads, want the cache", g, f.calls.Load())
	}
	var p *ProducerRules // a nil one knows nothing and takes refusals
	p.Refused(&kgo.Record{Topic: "out"}, kerr.MessageTooLarge)
	if g := p.Get("out"); g != (TopicRules{}) {
		t.Fatalf("nil ProducerRules: %+v", g)
	}
}
