package keyflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/journal"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Durable timers: a key's pending timers are persisted with its snapshot
// and re-armed when it is loaded again.

// timerFlow sets timer "t" at due(record) on records whose value is "arm",
// and emits "key:t" when it fires (transactional outputs: no producer).
func timerFlow(j *journal.Journal, due func() time.Time, opts ...keyflow.Option) *keyflow.Flow[counter] {
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		j.Add(fmt.Sprintf("fold %s@%d", kc.Key(), r.Offset))
		if string(r.Value) == "arm" {
			if err := kc.SetTimer("t", due()); err != nil {
				return nil, err
			}
		}
		return countFold(kc, s, r)
	}
	onTimer := func(kc *keyflow.Context, s *counter, name string) (*counter, error) {
		j.Add("timer " + kc.Key() + ":" + name)
		return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: []byte(kc.Key() + ":" + name)})
	}
	return keyflow.New(fold, append([]keyflow.Option{keyflow.WithTimers(onTimer), keyflow.WithOutput(nil, "out")}, opts...)...)
}

// stop revokes a partition with a flush and waits for it.
func (p *part) stop() {
	p.t.Helper()
	p.sys.Root.Send(p.pid, &partitionflow.Revoke{Flush: true})
	if err := p.awaitStopped(10 * time.Second); err != nil {
		p.t.Fatalf("partition stopped with %v", err)
	}
}

// A timer pending when the partition stops is in the key's snapshot; the
// next owner re-arms it from the recovered snapshot — without any record of
// the key — and it fires once, at its due time, emitting once.
func TestTimerSurvivesRestartAndFiresOnce(t *testing.T) {
	m := newTxnMem()
	j := journal.New()
	due := time.Now().Add(300 * time.Millisecond)
	flow := timerFlow(j, func() time.Time { return due })
	p := runPartitionOn(t, m.Memory, flow, 10*time.Millisecond, 0)
	p.send(rec(0, "a", "arm"))
	p.awaitCommitted(1)
	p.stop()
	s := m.Latest(inTopic, 0)["a"]
	if len(s.Timers) != 1 || s.Timers[0].Name != "t" || s.Timers[0].At.Before(due) || s.Timers[0].At.Sub(due) >= time.Millisecond {
		t.Fatalf("persisted timers %+v, want t at %v", s.Timers, due)
	}
	p2 := runPartitionOn(t, m.Memory, flow, 10*time.Millisecond, m.Committed(inTopic, 0))
	p2.send() // the input read to its end, nothing new: the timer gate opens
	p2.awaitOutputs(1)
	if time.Now().Before(due) {
		t.Fatalf("the re-armed timer fired before its due time %v", due)
	}
	checkExactlyOnce(t, m.outputValues(), "a:t")
	if s := m.Latest(inTopic, 0)["a"]; len(s.Timers) != 0 {
		t.Fatalf("after firing, the snapshot still holds timers %+v", s.Timers)
	}
}

// A timer that fell due while the partition was away fires on load among
// the records that loaded the key by their timestamps: after those
// produced before its due time (which may reset it), before those
// produced after it. It fired after all of them, so the records of a whole
// outage folded into a window its timer should have closed (helper-118's
// trial: a dedup flow lost outputs across a kill -9, two sessions 40 s
// apart merged).
func TestOverdueTimerFiresOnLoadAmongTheLoadingRecordsByTimestamp(t *testing.T) {
	m := newTxnMem()
	j := journal.New()
	due := time.Now().Add(time.Hour)
	flow := timerFlow(j, func() time.Time { return due })
	p := runPartitionOn(t, m.Memory, flow, 10*time.Millisecond, 0)
	p.send(rec(0, "a", "arm"))
	p.awaitCommitted(1)
	p.stop()
	// Away past its due time: rewrite the persisted timer into the past
	// (no sleep), as if the restart had taken an hour.
	s := m.Latest(inTopic, 0)["a"]
	dueAt := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	s.Timers[0].At = dueAt
	if err := commitSnapshot(m.Memory, s); err != nil {
		t.Fatal(err)
	}
	// The records arrive during the recovery, as the consumer's first
	// fetch usually does.
	release := make(chan struct{})
	p2 := runPartitionWrapped(t, m.Memory, flow, 10*time.Millisecond, 1, func(s snapshotstore.Partition) snapshotstore.Partition {
		return gatedRecovery{Partition: s, release: release}
	})
	// 1 and 2 produced before the due time, 3 at it, 4 after it.
	stamped := func(r *kgo.Record, at time.Time) *kgo.Record { r.Timestamp = at; return r }
	p2.send(stamped(rec(1, "a", ""), dueAt.Add(-time.Second)), rec(2, "a", ""),
		stamped(rec(3, "a", ""), dueAt), stamped(rec(4, "a", ""), dueAt.Add(time.Millisecond)))
	p2.awaitPhase("recovering") // the records are buffered: the actor handled them before the status request
	close(release)
	j.Await(t, "fold a@4")
	p2.awaitOutputs(1)
	calls := j.List()
	if got := fmt.Sprint(calls[len(calls)-5:]); got != "[fold a@1 fold a@2 fold a@3 timer a:t fold a@4]" {
		t.Fatalf("calls after the load %s: want the records produced up to the due time folded, then the overdue timer, then the later record", got)
	}
	checkExactlyOnce(t, m.outputValues(), "a:t")
}

// commitSnapshot writes s as a committed snapshot (a hand-made store
// state).
func commitSnapshot(m *snapshotstore.Memory, s snapshotstore.Snapshot) error {
	gate := m.BeforeCommit
	m.BeforeCommit = nil
	defer func() { m.BeforeCommit = gate }()
	p, _ := m.Open(context.Background(), snapshotstore.PartitionInfo{Topic: inTopic})
	return p.Commit(context.Background(), snapshotstore.Batch{Writes: []snapshotstore.Snapshot{s}, Offset: m.Committed(inTopic, 0)})
}

// An idle key whose next timer is beyond the unload horizon unloads with
// its timers; the partition loads it again when the timer is due, and it
// fires once.
func TestKeyWithFarTimerUnloadsAndIsReloadedWhenDue(t *testing.T) {
	t.Cleanup(keyactor.SetMinTimerUnloadHorizon(50 * time.Millisecond))
	m := newTxnMem()
	j := journal.New()
	var due time.Time
	flow := timerFlow(j, func() time.Time { due = time.Now().Add(400 * time.Millisecond); return due }, keyflow.WithMaxIdle(20*time.Millisecond))
	p := runPartitionOn(t, m.Memory, flow, 10*time.Millisecond, 0)
	p.send(rec(0, "a", "arm"))
	p.awaitCommitted(1)
	p.awaitUnloaded(1)
	if st := p.status(); st.TimersCold != 1 {
		t.Fatalf("status %+v: want the unloaded key's timer scheduled", st)
	}
	j.Await(t, "timer a:t")
	if time.Now().Before(due) {
		t.Fatal("fired before its due time")
	}
	p.awaitOutputs(1)
	checkExactlyOnce(t, m.outputValues(), "a:t")
}

// WithOnLoad runs on every load with the persisted state and timers
// visible, before any record is folded.
func TestOnLoadSeesStateAndTimers(t *testing.T) {
	m := newTxnMem()
	j := journal.New()
	due := time.Now().Add(time.Hour)
	onLoad := keyflow.WithOnLoad(func(kc *keyflow.Context, s *counter) (*counter, error) {
		at, ok := kc.Timer("t")
		n := -1
		if s != nil {
			n = s.N
		}
		j.Add(fmt.Sprintf("load %s n=%d timer=%v", kc.Key(), n, ok && !at.Before(due) && at.Sub(due) < time.Millisecond))
		return s, nil
	})
	flow := timerFlow(j, func() time.Time { return due }, onLoad)
	p := runPartitionOn(t, m.Memory, flow, 10*time.Millisecond, 0)
	p.send(rec(0, "a", "arm"))
	p.awaitCommitted(1)
	p.stop()
	p2 := runPartitionOn(t, m.Memory, flow, 10*time.Millisecond, 1)
	p2.send(rec(1, "a", ""))
	j.Await(t, "fold a@1")
	if got := fmt.Sprint(j.List()); got != "[load a n=-1 timer=false fold a@0 load a n=1 timer=true fold a@1]" {
		t.Fatalf("calls %s", got)
	}
}
