package keyflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var errBad = errors.New("bad record")

// countFold increments the state in place, then fails on a record valued
// "bad": under the Skip policy the increment must not survive.
func countFold(_ *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
	if s == nil {
		s = &counter{}
	}
	s.N++
	s.Offsets = append(s.Offsets, r.Offset)
	if string(r.Value) == "bad" {
		return s, errBad
	}
	return s, nil
}

func skip() keyflow.Option { return keyflow.WithFoldErrorPolicy(keyflow.Skip) }

// A skipped fold's in-place mutation is not persisted by the next flush.
func TestSkippedFoldLeavesNoStateEffectOnFlush(t *testing.T) {
	p := runPartition(t, keyflow.New(countFold, skip()), 10*time.Millisecond)
	p.send(rec(0, "a", ""), rec(1, "a", "bad"), rec(2, "a", ""))
	p.awaitCommitted(3)
	if c := p.latest("a"); c.N != 2 || fmt.Sprint(c.Offsets) != "[0 2]" {
		t.Fatalf("persisted %+v, want N=2 over [0 2]: the skipped record 1 left an effect", c)
	}
}

// A skipped fold on a clean key (nothing for the flush to write) is not
// persisted by the unload either: the reloaded key starts without it.
func TestSkippedFoldLeavesNoStateEffectOnUnload(t *testing.T) {
	p := runPartition(t, keyflow.New(countFold, skip(), keyflow.WithMaxIdle(20*time.Millisecond)), 10*time.Millisecond)
	p.send(rec(0, "a", ""))
	p.awaitCommitted(1)
	p.send(rec(1, "a", "bad"))
	p.awaitCommitted(2)
	p.awaitUnloaded(1)
	p.send(rec(2, "a", ""))
	p.awaitCommitted(3)
	if c := p.latest("a"); c.N != 2 || fmt.Sprint(c.Offsets) != "[0 2]" {
		t.Fatalf("persisted %+v, want N=2 over [0 2]: the skipped record 1 survived the unload", c)
	}
}

// A skipped timer's in-place mutation is not persisted either.
func TestSkippedTimerLeavesNoStateEffect(t *testing.T) {
	fired := make(chan struct{}, 1)
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		if string(r.Value) == "arm" {
			if err := kc.SetTimer("t", time.Now()); err != nil {
				return nil, err
			}
		}
		return countFold(kc, s, r)
	}
	onTimer := func(_ *keyflow.Context, s *counter, _ string) (*counter, error) {
		s.N += 100
		fired <- struct{}{}
		return s, errBad
	}
	p := runPartition(t, keyflow.New(fold, keyflow.WithTimers(onTimer), skip()), 10*time.Millisecond)
	p.send(rec(0, "a", "arm"))
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("timer did not fire")
	}
	// The key actor handles one message at a time: the failed timer is done
	// before this record is folded.
	p.send(rec(1, "a", ""))
	p.awaitCommitted(2)
	if c := p.latest("a"); c.N != 2 {
		t.Fatalf("persisted %+v, want N=2: the failed timer left an effect", c)
	}
}

// A timer set by a skipped fold is not set: the key, with nothing pending,
// unloads.
func TestSkippedFoldSetsNoTimer(t *testing.T) {
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		if string(r.Value) == "bad" {
			// Due within the unload horizon: a set timer would keep the key.
			if err := kc.SetTimer("t", time.Now().Add(30*time.Second)); err != nil {
				return nil, err
			}
		}
		return countFold(kc, s, r)
	}
	onTimer := func(_ *keyflow.Context, s *counter, _ string) (*counter, error) { return s, nil }
	p := runPartition(t, keyflow.New(fold, keyflow.WithTimers(onTimer), skip(), keyflow.WithMaxIdle(20*time.Millisecond)), 10*time.Millisecond)
	p.send(rec(0, "a", ""), rec(1, "a", "bad"))
	p.awaitCommitted(2)
	p.awaitUnloaded(1) // a pending timer keeps a key loaded
}

// A timer cancelled by a skipped fold stays pending and fires.
func TestSkippedFoldCancelsNoTimer(t *testing.T) {
	fired := make(chan string, 1)
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		switch string(r.Value) {
		case "arm":
			if err := kc.SetTimer("t", time.Now()); err != nil {
				return nil, err
			}
		case "bad":
			kc.CancelTimer("t")
		}
		return countFold(kc, s, r)
	}
	onTimer := func(_ *keyflow.Context, s *counter, name string) (*counter, error) {
		fired <- name
		return s, nil
	}
	p := runPartition(t, keyflow.New(fold, keyflow.WithTimers(onTimer), skip()), 10*time.Millisecond)
	// One delivery: the cancel runs before the fired timer reaches the actor.
	p.send(rec(0, "a", "arm"), rec(1, "a", "bad"))
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the timer cancelled by a skipped fold did not fire")
	}
}

// Outputs emitted by a fold that then fails under Skip are not produced.
func TestSkippedFoldEmitsNothing(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(context.Background(), 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	producer := testkit.Client(t, brokers)
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		if err := kc.Emit(&kgo.Record{Key: r.Key, Value: []byte(fmt.Sprint(r.Offset))}); err != nil {
			return nil, err
		}
		return countFold(kc, s, r)
	}
	p := runPartition(t, keyflow.New(fold, skip(), keyflow.WithOutput(producer, "out")), 10*time.Millisecond)
	p.send(rec(0, "a", ""), rec(1, "a", "bad"), rec(2, "a", ""))
	p.awaitCommitted(3) // behind the acknowledgement of every produced output
	ends, err := kadm.NewClient(testkit.Client(t, brokers)).ListEndOffsets(context.Background(), "out")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("out", 0)
	consumer := testkit.Client(t, brokers, kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for int64(len(got)) < end.Offset {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if fmt.Sprint(got) != "[0 2]" {
		t.Fatalf("outputs %v, want [0 2]: the skipped record 1's output was produced", got)
	}
}

// emptyCodec encodes every state as no bytes (a valid encoding, e.g. of a
// zero state): a present state must never be written as a tombstone.
type emptyCodec struct{}

func (emptyCodec) Encode(*counter) ([]byte, error) { return nil, nil }
func (emptyCodec) Decode([]byte) (*counter, error) { return &counter{}, nil }

// The encoding kept to undo a skipped record is reused by the next flush:
// an empty one is still a present state, not a tombstone.
func TestSkipUndoEncodingKeepsEmptyStatePresent(t *testing.T) {
	p := runPartition(t, keyflow.New(countFold, skip(), keyflow.WithCodec(emptyCodec{})), 10*time.Millisecond)
	p.send(rec(0, "a", ""), rec(1, "a", "bad"))
	p.awaitCommitted(2)
	if s := p.mem.Latest(inTopic, 0)["a"]; s.Tombstone() {
		t.Fatalf("snapshot %+v is a tombstone; the state is present", s)
	}
}
