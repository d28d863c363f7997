package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Durable timers (issue 10), the way a new user tried them: a per-user
// inactivity detector — "session closed" after a gap without events —
// across worker restarts.

// session is a user's state in the inactivity detector.
type session struct {
	N      int  `json:"n"`      // sessions opened so far
	Events int  `json:"events"` // events of the open session
	Open   bool `json:"open"`
}

// sessionClosed is the detector's output.
type sessionClosed struct {
	User    string `json:"user"`
	Session int    `json:"session"`
	Events  int    `json:"events"`
}

// InactivityFlow counts each user's events into sessions and emits a
// sessionClosed to out when gap passes without an event (a timer per user,
// re-set by every event).
func InactivityFlow(out string, gap time.Duration, folds *atomic.Int64) *keyflow.Flow[session] {
	return sessionFlow(out, folds, func(*kgo.Record) time.Time { return time.Now().Add(gap) })
}

// sessionFlow is InactivityFlow with each event's close timer due at
// closeAt(event): gap after the event's timestamp makes sessions of event
// time, which a replay after an outage folds alike.
func sessionFlow(out string, folds *atomic.Int64, closeAt func(*kgo.Record) time.Time) *keyflow.Flow[session] {
	fold := func(kc *keyflow.Context, s *session, r *kgo.Record) (*session, error) {
		if s == nil {
			s = &session{}
		}
		if !s.Open {
			s.N, s.Events, s.Open = s.N+1, 0, true
		}
		s.Events++
		folds.Add(1)
		return s, kc.SetTimer("idle", closeAt(r))
	}
	onTimer := func(kc *keyflow.Context, s *session, _ string) (*session, error) {
		if s == nil || !s.Open {
			return s, nil
		}
		b, _ := json.Marshal(sessionClosed{User: kc.Key(), Session: s.N, Events: s.Events})
		s.Open = false
		return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: b})
	}
	return keyflow.New(fold, keyflow.WithTimers(onTimer), keyflow.WithOutput(nil, out))
}

// outputCollector reads a topic read_committed from its start, in the
// background, with a client of its own.
type outputCollector struct {
	mu   sync.Mutex
	recs []*kgo.Record
	more chan struct{}
}

func collectOutputs(t *testing.T, brokers []string, topic string) *outputCollector {
	t.Helper()
	c := &outputCollector{more: make(chan struct{}, 1)}
	cl := testkit.Client(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var got []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
			if len(got) == 0 {
				continue
			}
			c.mu.Lock()
			c.recs = append(c.recs, got...)
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *outputCollector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// await waits until at least n outputs were read.
func (c *outputCollector) await(t *testing.T, n int, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.After(timeout)
	for c.count() < n {
		select {
		case <-c.more:
		case <-deadline:
			t.Fatalf("%s: %d outputs read_committed after %s, want %d", what, c.count(), timeout, n)
		}
	}
}

func produceEvents(t *testing.T, brokers []string, topic string, users, perUser int) {
	t.Helper()
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for range perUser {
		for u := range users {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "user-%d", u), Value: []byte("click")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func awaitFolds(t *testing.T, folds *atomic.Int64, n int64) {
	t.Helper()
	testkit.Eventually(t, time.Minute, fmt.Sprintf("%d events folded", n), func() (bool, string) {
		return folds.Load() >= n, fmt.Sprint(folds.Load())
	})
}

// InactivityAcrossRestart: users click in two sessions; each session is
// open (its close timer pending) when the worker restarts. Restart 1 stops
// the worker and starts the next one after the timers fell due (they fire
// on load, from the persisted snapshots, without any new event); restart 2
// starts the next worker at once (the timers are re-armed and fire at their
// due time). Every session is closed exactly once, with its own events:
// none lost (a timer dropped at the restart), none merged with the next
// (the next session's events folded into a session never closed).
func InactivityAcrossRestart(t *testing.T, brokers []string) {
	const users, perSession = 20, 3
	// Longer than the user's 2 s so that a stop (a revoke flush, a group
	// leave: seconds on a real broker) falls inside the sessions.
	const gap = 6 * time.Second
	input, snaps, group := Topics(t, brokers, 2)
	out := CreateOutputTopic(t, brokers, 2)
	closes := collectOutputs(t, brokers, out)
	var folds atomic.Int64
	start := func() *Worker {
		return StartWorker(t, InactivityFlow(out, gap, &folds), brokers, group, input, snaps, snapshotstore.Transactional)
	}

	// stop stops w and returns how many sessions it closed before its
	// stop ended; the others' timers were pending at the restart.
	stop := func(w *Worker, which string) {
		t.Helper()
		// Counted by reading the output topic to its end, not from the
		// background reader, which may lag behind the stop: it would
		// overstate the sessions left open (found by a review).
		t0, before := time.Now(), len(testkit.ReadTopic(t, brokers, out, true))
		if err := w.Stop(t); err != nil {
			t.Fatalf("%s: %v", which, err)
		}
		crossed := users - (len(testkit.ReadTopic(t, brokers, out, true)) - before)
		t.Logf("%s stopped in %s; %d of %d sessions open across the restart", which, time.Since(t0).Round(time.Millisecond), crossed, users)
		if crossed == 0 {
			t.Fatalf("%s: every session closed before the restart (the stop took longer than the %s gap): nothing to test", which, gap)
		}
	}

	produceEvents(t, brokers, input, users, perSession)
	w := start()
	awaitFolds(t, &folds, users*perSession)
	due := time.Now().Add(gap)
	stop(w, "worker 1")
	time.Sleep(time.Until(due)) // the worker stays away until every close timer is due
	w = start()
	closes.await(t, users, time.Minute, "sessions 1 closed on load after restart 1")
	if n := folds.Load(); n != users*perSession {
		// The closes came from the persisted timers, not from a replay of
		// the input (which would refold the session and set its timer anew).
		t.Fatalf("%d events folded by the closes of sessions 1, want %d: the input was replayed", n, users*perSession)
	}

	produced2 := time.Now() // every session-2 event is folded after this: its close timer is due at gap past it, or later
	produceEvents(t, brokers, input, users, perSession)
	awaitFolds(t, &folds, 2*users*perSession)
	stop(w, "worker 2")
	w = start() // at once: the timers are re-armed, not yet due
	closes.await(t, 2*users, time.Minute, "sessions 2 closed after restart 2")
	if err := w.Stop(t); err != nil {
		t.Fatalf("worker 3: %v", err)
	}

	got := map[string]map[int]int{} // user → session → closes
	for _, r := range testkit.ReadTopic(t, brokers, out, true) {
		var c sessionClosed
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatal(err)
		}
		if c.Events != perSession {
			t.Errorf("%s session %d closed with %d events, want %d (merged or split)", c.User, c.Session, c.Events, perSession)
		}
		// Restored at worker 3's start and not yet due: fired at its due
		// time, not at once. (CreateTime is the emitting worker's clock,
		// this process's; in ms, hence the slack.)
		if due := produced2.Add(gap - 5*time.Millisecond); c.Session == 2 && r.Timestamp.Before(due) {
			t.Errorf("%s session 2 closed at %s, %s before its timer was due", c.User, r.Timestamp.Format(time.StampMilli), due.Sub(r.Timestamp).Round(time.Millisecond))
		}
		if got[c.User] == nil {
			got[c.User] = map[int]int{}
		}
		got[c.User][c.Session]++
	}
	for u := range users {
		user := fmt.Sprintf("user-%d", u)
		if fmt.Sprint(got[user]) != "map[1:1 2:1]" {
			t.Errorf("%s: sessions closed %v, want sessions 1 and 2 exactly once each", user, got[user])
		}
	}
}

// SessionsAcrossABacklog: users' sessions, closed gap after their last
// click by its timestamp (event time), stay open across a restart whose
// backlog holds their later clicks, produced while no worker ran, and then
// one click each produced after the session's end. The restarted worker
// reads the backlog in many small fetches, and every close timer persisted
// by worker 1 is overdue at its start: it must wait for the user's clicks
// produced before its due time, whichever fetch brings them (each moves
// the session's end on), and the session must close before the click
// produced after its end. Every session 1 closes once, with its four
// clicks, and the last click opens session 2. Before the backlog gate
// (partitionflow/timergate.go) the overdue timers fired right after the
// recovery, before the first fetch: each session 1 closed with one click.
func SessionsAcrossABacklog(t *testing.T, brokers []string) {
	const users, later = 40, 3
	// Longer than worker 1's start and stop (seconds on a real broker):
	// its sessions must all be open when it stops.
	const gap = 15 * time.Second
	input, snaps, group := Topics(t, brokers, 1)
	out := CreateOutputTopic(t, brokers, 1)
	closes := collectOutputs(t, brokers, out)
	var folds atomic.Int64
	flow := func() *keyflow.Flow[session] {
		return sessionFlow(out, &folds, func(r *kgo.Record) time.Time { return r.Timestamp.Add(gap) })
	}
	produce := func(at time.Time) {
		t.Helper()
		// One record per produce request: a batch each, so that the
		// worker's small fetches bring a few at a time.
		cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input), kgo.ProducerLinger(0))
		for u := range users {
			r := &kgo.Record{Key: fmt.Appendf(nil, "user-%d", u), Value: []byte("click"), Timestamp: at}
			if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t0 := time.Now().Truncate(time.Millisecond)
	produce(t0)
	w := StartWorker(t, flow(), brokers, group, input, snaps, snapshotstore.Transactional)
	awaitFolds(t, &folds, users)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	if n := closes.count(); n != 0 {
		t.Fatalf("%d sessions closed before the restart (worker 1's start and stop took longer than the %s gap): nothing to test", n, gap)
	}
	step := gap / (later + 1)
	for i := 1; i <= later; i++ { // while no worker runs, each within gap of the one before
		produce(t0.Add(time.Duration(i) * step))
	}
	end := t0.Add(later*step + gap) // every session's end
	time.Sleep(time.Until(end.Add(time.Second)))
	produce(end.Add(time.Second)) // after every session's end: opens session 2
	w = StartWorker(t, flow(), brokers, group, input, snaps, snapshotstore.Transactional,
		actorflow.WithClientOpts(kgo.FetchMaxPartitionBytes(512), kgo.FetchMaxBytes(512), kgo.FetchMaxWait(100*time.Millisecond)))
	awaitFolds(t, &folds, users*(later+2))
	closes.await(t, users, time.Minute, "sessions 1 closed after the restart")
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	for _, r := range testkit.ReadTopic(t, brokers, out, true) {
		var c sessionClosed
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatal(err)
		}
		if c.Session != 1 || c.Events != later+1 {
			t.Errorf("%s session %d closed with %d clicks, want session 1 with %d (its clicks before its end)", c.User, c.Session, c.Events, later+1)
		}
	}
}

// ticker is a user's state in TicksAcrossABacklog's flow.
type ticker struct {
	Next   time.Time `json:"next"` // the next tick's due time
	Ticks  int       `json:"ticks"`
	Clicks int       `json:"clicks"`
}

// tick is that flow's output: a user's tick n, and the clicks folded
// before it.
type tick struct {
	User   string `json:"user"`
	N      int    `json:"n"`
	Clicks int    `json:"clicks"`
}

// TicksAcrossABacklog: a periodic timer per user, in event time (the first
// tick period after the user's first click, each tick setting the next
// from its own due time), counts the user's clicks at every tick. Worker 1
// folds each user's first click and stops before the second tick is due;
// while no worker runs, three more clicks are produced, stamped between
// ticks 2 to 4, and all four ticks fall due. The restarted worker reads the
// clicks in one fetch, a user's three in one delivery, with the persisted
// tick overdue: each tick must count the clicks stamped before it (1, 2, 3,
// 4). The ticks a tick's handler sets are due already: armed, they fired
// after the whole delivery, and ticks 2 and 3 counted all four clicks.
func TicksAcrossABacklog(t *testing.T, brokers []string) {
	const users = 40
	// Longer than worker 1's stop: its second tick must not fire before
	// the clicks stamped before it are produced.
	const period = 5 * time.Second
	input, snaps, group := Topics(t, brokers, 1)
	out := CreateOutputTopic(t, brokers, 1)
	ticks := collectOutputs(t, brokers, out)
	var folds atomic.Int64
	flow := keyflow.New(func(kc *keyflow.Context, s *ticker, r *kgo.Record) (*ticker, error) {
		defer folds.Add(1)
		if s == nil {
			s = &ticker{Next: r.Timestamp.Add(period)}
			if err := kc.SetTimer("tick", s.Next); err != nil {
				return s, err
			}
		}
		s.Clicks++
		return s, nil
	}, keyflow.WithTimers(func(kc *keyflow.Context, s *ticker, _ string) (*ticker, error) {
		s.Ticks++
		v, err := json.Marshal(tick{User: kc.Key(), N: s.Ticks, Clicks: s.Clicks})
		if err != nil {
			return s, err
		}
		if err := kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: v}); err != nil {
			return s, err
		}
		s.Next = s.Next.Add(period)
		return s, kc.SetTimer("tick", s.Next)
	}), keyflow.WithOutput(nil, out))
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	produce := func(at time.Time) {
		t.Helper()
		var rs []*kgo.Record
		for u := range users {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "user-%d", u), Value: []byte("click"), Timestamp: at})
		}
		if err := pcl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	w := StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Transactional)
	t0 := time.Now().Truncate(time.Millisecond)
	produce(t0)
	awaitFolds(t, &folds, users)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	if since := time.Since(t0); since >= 2*period {
		t.Fatalf("worker 1 stopped %s after the first clicks, after the second ticks were due (%s): nothing to test", since.Round(time.Millisecond), 2*period)
	}
	for _, at := range []time.Duration{3 * period / 2, 5 * period / 2, 7 * period / 2} {
		produce(t0.Add(at))
	}
	time.Sleep(time.Until(t0.Add(4*period + time.Second))) // ticks 1 to 4 due
	w = StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Transactional)
	ticks.await(t, 4*users, time.Minute, "ticks 1 to 4")
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[int]int{} // user → tick → outputs
	for _, r := range testkit.ReadTopic(t, brokers, out, true) {
		var k tick
		if err := json.Unmarshal(r.Value, &k); err != nil {
			t.Fatal(err)
		}
		if want := min(k.N, 4); k.Clicks != want {
			t.Errorf("%s's tick %d counted %d clicks, want %d (those stamped before it)", k.User, k.N, k.Clicks, want)
		}
		if got[k.User] == nil {
			got[k.User] = map[int]int{}
		}
		if got[k.User][k.N]++; got[k.User][k.N] > 1 {
			t.Errorf("%s's tick %d came %d times", k.User, k.N, got[k.User][k.N])
		}
	}
	for u := range users {
		user := fmt.Sprintf("user-%d", u)
		for n := 1; n <= 4; n++ {
			if got[user][n] != 1 {
				t.Errorf("%s: tick %d came %d times, want once", user, n, got[user][n])
			}
		}
	}
}

// DeletedKeyTimerKept: a key deleted (its fold returned nil) with a timer
// pending was written as a tombstone carrying the timer, which compaction
// removes after the topic's delete.retention.ms (a day by default), the
// timer with it. Its snapshot is now an empty value marked deleted
// (snapshotstore.HeaderDeleted), which compaction keeps: here, read raw
// from the snapshot topic after worker 1 stopped. Worker 2, started after
// the timers fell due, fires each once on load, with no state, and the
// key's next snapshot is a tombstone. Under actorflow.WithSnapshotFormat(2)
// (format 2 a version before format 3 reads: a rolling upgrade), the
// snapshot is a tombstone of format 2 carrying the timer, as before, and
// the timers fire alike (compaction has not removed it).
func DeletedKeyTimerKept(t *testing.T, brokers []string, format int) {
	// Longer than worker 1's stop (a revoke flush, a group leave: seconds
	// on a real broker).
	const deletedKeyTimer = 8 * time.Second
	const users = 5
	input, snaps, group := Topics(t, brokers, 1)
	out := CreateOutputTopic(t, brokers, 1)
	var folds atomic.Int64
	flow := keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
		defer folds.Add(1)
		if string(rec.Value) == "logout" {
			return nil, kc.SetTimer("goodbye", kc.Now().Add(deletedKeyTimer))
		}
		n := 1
		return &n, nil
	}, keyflow.WithTimers(func(kc *keyflow.Context, s *int, _ string) (*int, error) {
		return nil, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: fmt.Appendf(nil, "goodbye, state %v", s)})
	}), keyflow.WithOutput(nil, out))
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	for u := range users {
		for _, v := range []string{"login", "logout"} {
			if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: fmt.Appendf(nil, "user-%d", u), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	opt := actorflow.WithSnapshotFormat(format)
	w := StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Transactional, opt)
	awaitFolds(t, &folds, 2*users)
	due := time.Now().Add(deletedKeyTimer)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	latest := func() map[string]*kgo.Record {
		m := map[string]*kgo.Record{}
		for _, r := range testkit.ReadTopic(t, brokers, snaps, true) {
			if !snapshotstore.ReservedBytes(r.Key) {
				m[string(r.Key)] = r
			}
		}
		return m
	}
	if fired := len(testkit.ReadTopic(t, brokers, out, true)); fired > 0 {
		t.Fatalf("%d goodbyes before worker 1 stopped (its stop took longer than the timers' %s): nothing to test", fired, deletedKeyTimer)
	}
	for k, r := range latest() {
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		_, deleted := hs[snapshotstore.HeaderDeleted]
		switch {
		case format == 2 && (r.Value != nil || deleted || hs[snapshotstore.HeaderFormat] != "2" || hs[snapshotstore.HeaderTimers] == ""):
			t.Fatalf("%s's snapshot under format 2: value %v, headers %v; want a tombstone of format 2 carrying the timer", k, r.Value, hs)
		case format != 2 && (r.Value == nil || !deleted):
			t.Fatalf("%s's snapshot: value %v, headers %v; want an empty value marked deleted, which compaction keeps", k, r.Value, hs)
		}
	}
	time.Sleep(time.Until(due)) // every goodbye due
	w = StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Transactional, opt)
	testkit.Eventually(t, time.Minute, "every goodbye, once, and the keys' tombstones", func() (bool, string) {
		outs := testkit.ReadTopic(t, brokers, out, true)
		tombstones := 0
		for _, r := range latest() {
			if r.Value == nil {
				tombstones++
			}
		}
		return len(outs) == users && tombstones == users, fmt.Sprintf("%d goodbyes, %d tombstones", len(outs), tombstones)
	})
	for _, r := range testkit.ReadTopic(t, brokers, out, true) {
		if string(r.Value) != "goodbye, state <nil>" {
			t.Fatalf("%s's goodbye: %q, want it fired with no state", r.Key, r.Value)
		}
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}
