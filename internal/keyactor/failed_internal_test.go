package keyactor

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

type intCodec struct{}

func (intCodec) Encode(s *int) ([]byte, error) { return json.Marshal(s) }
func (intCodec) Decode(b []byte) (*int, error) {
	var s int
	return &s, json.Unmarshal(b, &s)
}

// committingEnv is a key actor's environment on sys whose writes commit
// at once: the outcome is posted to the key's mailbox behind the messages
// already there.
func committingEnv(sys *actor.ActorSystem) *Env {
	return &Env{Topic: "in", System: sys, Logger: zap.NewNop(), Persist: func(w *WriteMsg) {
		done := w.Done
		w.Release()
		done(nil)
	}, Processed: func(int, int) {}}
}

// failedSettled runs key's actor of flow under a parent that sends it the
// messages send gives, waits for its KeyFailed, and returns the Settled of
// the last Progress the parent received (-2: none) and the key's error.
func failedSettled[S any](t *testing.T, flow *Flow[S], key string, send func(ctx actor.Context, child *actor.PID)) (int64, error) {
	t.Helper()
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	env := committingEnv(sys)
	failed := make(chan error, 1)
	type lastSettled struct{ reply chan int64 }
	var child *actor.PID
	last := int64(-2) // the last Progress's Settled; the parent's own
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			child = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return flow.NewKeyActor(key, nil, env) }))
			send(ctx, child)
		case *Query:
			ctx.Send(child, m)
		case *lastSettled:
			m.reply <- last
		case *Progress:
			last = m.Settled
		case *KeyFailed:
			failed <- m.Err
		}
	}))
	defer sys.Root.Stop(parent)
	var err error
	select {
	case err = <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the key did not fail")
	}
	// The key answers a query after the turn that failed it, so what that
	// turn sent its parent is in the parent's mailbox before the question
	// for the last Settled.
	answered := make(chan QueryAnswer, 1)
	sys.Root.Send(parent, &Query{Reply: answered})
	<-answered
	reply := make(chan int64, 1)
	sys.Root.Send(parent, &lastSettled{reply})
	return <-reply, err
}

// A key whose fold fails (policy fail) does not report the failing record as
// settled: its offset was counted as seen before the fold ran, so a key with
// nothing dirty sent a Progress at that offset right after its KeyFailed,
// and a partition that went on (a revoke-time flush swallows a KeyFailed
// wrapping ErrFenced) committed past a record never folded nor dead-lettered
// (found by a review). The records before it stay settled.
func TestAFailedFoldIsNotSettled(t *testing.T) {
	boom := errors.New("boom")
	flow := &Flow[int]{Codec: intCodec{},
		Fold: func(_ *Core, s *int, rec *kgo.Record) (*int, error) {
			if rec.Offset == 5 {
				return s, boom
			}
			n := 1
			if s != nil {
				n += *s
			}
			return &n, nil
		}}
	got, err := failedSettled(t, flow, "k", func(ctx actor.Context, child *actor.PID) {
		recs := []*kgo.Record{{Topic: "in", Offset: 3, Key: []byte("k")}, {Topic: "in", Offset: 4, Key: []byte("k")}}
		ctx.Send(child, &Deliver{Records: recs})
		ctx.Send(child, &Flush{})
		ctx.Send(child, &Deliver{Records: []*kgo.Record{{Topic: "in", Offset: 5, Key: []byte("k")}}})
	})
	if !errors.Is(err, boom) {
		t.Fatalf("KeyFailed %v, want the fold's error", err)
	}
	if got >= 5 || got < 4 {
		t.Fatalf("the key's last Settled is %d after its fold of offset 5 failed, want 4: not past a record neither folded nor dead-lettered, and the records before it settled", got)
	}
}

// The key-less records' actor whose dead letter fails (the plain mode with
// no producer for it) does not report the record settled either: it set no
// offset for its failure to pin, and its next Progress passed a record
// never dead-lettered (found by a review).
func TestAFailedKeylessDeadLetterIsNotSettled(t *testing.T) {
	flow := &Flow[int]{Codec: intCodec{}, Fold: func(_ *Core, s *int, _ *kgo.Record) (*int, error) { return s, nil },
		Config: Config{DeadLetter: "in-dlq", DeadLetterRecord: func(topic string, rec *kgo.Record, _ Kind, _ error, _ time.Time, _ int) (*kgo.Record, string) {
			return &kgo.Record{Topic: topic, Value: rec.Value}, ""
		}}}
	got, err := failedSettled(t, flow, snapshotstore.KeylessKey, func(ctx actor.Context, child *actor.PID) {
		ctx.Send(child, &Deliver{Records: []*kgo.Record{{Topic: "in", Offset: 7}}})
	})
	if !errors.Is(err, ErrNoDeadLetterProducer) {
		t.Fatalf("KeyFailed %v, want ErrNoDeadLetterProducer", err)
	}
	if got >= 7 {
		t.Fatalf("the key-less actor's last Settled is %d after its dead letter of offset 7 failed, want below 7", got)
	}
}

// A failed output's error says what it was: an output of a timer or a load
// hook (no input offset; it said "timer" for both), or a dead letter (it
// said "emit output to" the dead-letter topic). Found by a review.
func TestAnOutputErrorSaysWhatFailed(t *testing.T) {
	k := &Core{key: "k", env: &Env{Topic: "in", Partition: 2}, cfg: &Config{DeadLetter: "in.dlq"}}
	for _, c := range []struct {
		ack  outputAck
		want string
	}{
		{outputAck{offset: 7, topic: "out", err: errors.New("boom")}, `in[2] offset 7 key "k": emit output to out: boom`},
		{outputAck{offset: -1, topic: "out", err: errors.New("boom")}, `in[2] timer, load hook or dropped state key "k": emit output to out: boom`},
		{outputAck{offset: 7, topic: "in.dlq", err: errors.New("boom")}, `in[2] offset 7 key "k": dead letter to in.dlq: boom`},
	} {
		if got := k.outputError(&c.ack).Error(); got != c.want {
			t.Errorf("outputError = %q, want %q", got, c.want)
		}
	}
}
