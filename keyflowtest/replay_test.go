package keyflowtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// replayed is the state of replayFlow.
type replayed struct {
	N     int      `json:"n"`
	Loads int      `json:"loads"`
	Log   []string `json:"log"`
}

// replayFlow is deterministic, with every kind of call a replay check
// replays: folds that emit (with a header), set two timers due at the same
// instant and fail on "bad" (dead-lettered); timers that emit and change
// the state; a load hook that emits and changes the state (so a replay
// that ran it on a loaded key, or skipped it on a load, would differ).
func replayFlow() *keyflow.Flow[replayed] {
	return keyflow.New(
		func(kc *keyflow.Context, s *replayed, rec *kgo.Record) (*replayed, error) {
			n, err := strconv.Atoi(string(rec.Value))
			if err != nil {
				return s, fmt.Errorf("not a number: %q", rec.Value)
			}
			if s == nil {
				s = &replayed{}
			}
			s.N += n
			s.Log = append(s.Log, "fold "+string(rec.Value))
			if err := kc.Emit(&kgo.Record{Key: rec.Key, Value: []byte(strconv.Itoa(s.N)),
				Headers: []kgo.RecordHeader{{Key: "offset", Value: []byte(strconv.FormatInt(rec.Offset, 10))}}}); err != nil {
				return s, err
			}
			at := kc.Now().Add(time.Minute)
			if err := kc.SetTimer("b", at); err != nil {
				return s, err
			}
			// A tie: a loaded key fires "b" first, the order they were set
			// in, not the snapshot's (by name), which the replay must
			// follow; a key loaded for them fires "a" first.
			return s, kc.SetTimer("a", at)
		},
		keyflow.WithTimers(func(kc *keyflow.Context, s *replayed, name string) (*replayed, error) {
			s.Log = append(s.Log, "timer "+name+" at "+kc.Now().Format(time.RFC3339))
			return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: []byte(name + ":" + strconv.Itoa(s.N))})
		}),
		keyflow.WithOnLoad(func(kc *keyflow.Context, s *replayed) (*replayed, error) {
			if s == nil {
				return nil, nil
			}
			s.Loads++
			return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: []byte("loaded " + strconv.Itoa(s.Loads))})
		}),
		keyflow.WithFoldErrorPolicy(keyflow.DeadLetter),
		keyflow.WithOutput(nil, "out"),
	)
}

// replayScript drives d through records, timers (ties among them),
// restarts with overdue timers and records arriving meanwhile, a fold
// error and a second partition's keys, and returns what it saw.
func replayScript(t *testing.T, d *keyflowtest.Driver[replayed]) string {
	t.Helper()
	must(t, d.Pipe("k1", "1"))
	must(t, d.Pipe("k2", "2"))
	must(t, d.Pipe("k1", "bad"))
	must(t, d.Advance(30*time.Second))
	must(t, d.Pipe("k1", "3"))
	must(t, d.Advance(2*time.Minute))
	must(t, d.Pipe("k2", "4"))
	must(t, d.Restart())
	must(t, d.Pipe("k1", "5"))
	must(t, d.RestartAfter(5*time.Minute, &kgo.Record{Key: []byte("k2"), Value: []byte("6"), Partition: partitionOf("k2", d)}))
	must(t, d.Advance(time.Hour))
	return describe(d, "k1", "k2", "k3")
}

func partitionOf[S any](key string, d *keyflowtest.Driver[S]) int32 {
	n := 1
	for d.Err(int32(n)) == nil {
		n++
	}
	if n == 1 {
		return 0
	}
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(d.Topic()).Partition(&kgo.Record{Key: []byte(key)}, n))
}

// describe is everything d shows: outputs, dead letters, skips, states
// and timers of keys.
func describe[S any](d *keyflowtest.Driver[S], keys ...string) string {
	var b strings.Builder
	for _, o := range d.Outputs() {
		fmt.Fprintf(&b, "out %s %s=%s %v %s\n", o.Topic, o.Key, o.Value, o.Headers, o.Timestamp.Format(time.RFC3339Nano))
	}
	for _, dl := range d.DeadLetters() {
		fmt.Fprintf(&b, "dead %s[%d]@%d %s %q %s %s\n", dl.Topic, dl.Partition, dl.Offset, dl.Kind, dl.Message, dl.Time.Format(time.RFC3339Nano), dl.Record.Value)
	}
	for _, err := range d.Skipped() {
		fmt.Fprintf(&b, "skipped %v\n", err)
	}
	fmt.Fprintf(&b, "keys %v\n", d.Keys())
	for _, k := range keys {
		s, ok := d.State(k)
		fmt.Fprintf(&b, "state %s %v %+v\n", k, ok, s)
		for _, name := range []string{"a", "b", "idle", "t"} {
			if at, ok := d.Timer(k, name); ok {
				fmt.Fprintf(&b, "timer %s %s %s\n", k, name, at.Format(time.RFC3339Nano))
			}
		}
	}
	return b.String()
}

func TestReplayCheckPassesADeterministicFlowWithTheSameResults(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []keyflowtest.Option
	}{
		{"one partition", nil},
		{"reloads", []keyflowtest.Option{keyflowtest.WithReloads()}},
		{"three partitions", []keyflowtest.Option{keyflowtest.WithPartitions(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			without := replayScript(t, newDriver(t, replayFlow(), tc.opts...))
			with := replayScript(t, newDriver(t, replayFlow(), append(tc.opts, keyflowtest.WithReplayCheck())...))
			if with != without {
				t.Fatalf("with the replay check:\n%s\nwithout:\n%s", with, without)
			}
			// The script did what it is for: timers tied and fired, a load
			// hook ran, a dead letter.
			for _, want := range []string{"=a:", "=b:", "=loaded 1", "dead input", "timer a at", "timer b at"} {
				if !strings.Contains(with, want) {
					t.Errorf("no %q in\n%s", want, with)
				}
			}
		})
	}
}

// counter is what the nondeterministic flows read: each run of a call
// reads another value, as a replay after a crash would.
var counter atomic.Int64

func TestReplayCheckCatchesTimeNowInAnOutput(t *testing.T) {
	flow := func() *keyflow.Flow[int] {
		return keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			return s, kc.Emit(&kgo.Record{Key: rec.Key, Value: []byte(strconv.FormatInt(time.Now().UnixNano(), 10))})
		}, keyflow.WithOutput(nil, "stamps"))
	}
	d := newDriver(t, flow(), keyflowtest.WithReplayCheck(), keyflowtest.WithTopic("clicks"))
	err := d.Pipe("user-7", "click")
	if !errors.Is(err, keyflowtest.ErrNondeterministic) {
		t.Fatalf("Pipe: %v, want ErrNondeterministic", err)
	}
	if errors.Is(err, keyflowtest.ErrPartitionFailed) {
		t.Fatalf("Pipe: %v matches ErrPartitionFailed", err)
	}
	for _, want := range []string{`clicks[0] offset 0 key "user-7"`, `output 0 (topic "stamps", key "user-7"): value "`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if outs := d.Outputs(); len(outs) != 1 {
		t.Fatalf("%d outputs, want the first fold's 1", len(outs))
	}
	// The partition goes on; each call is checked.
	if err := d.Pipe("user-7", "click"); !errors.Is(err, keyflowtest.ErrNondeterministic) || !strings.Contains(err.Error(), "offset 1 ") {
		t.Fatalf("second Pipe: %v", err)
	}
	// Without the check nothing fails: the check is what catches it.
	plain := newDriver(t, flow())
	must(t, plain.Pipe("user-7", "click"))
}

func TestReplayCheckCatchesStateFromAGlobalCounter(t *testing.T) {
	type ticket struct {
		Number int64 `json:"number"`
		Clicks int   `json:"clicks"`
	}
	flow := keyflow.New(func(kc *keyflow.Context, s *ticket, rec *kgo.Record) (*ticket, error) {
		if s == nil {
			s = &ticket{Number: counter.Add(1)} // the state depends on a global
		}
		s.Clicks++
		return s, nil
	})
	d := newDriver(t, flow, keyflowtest.WithReplayCheck())
	err := d.Pipe("ann", "click")
	if !errors.Is(err, keyflowtest.ErrNondeterministic) {
		t.Fatalf("Pipe: %v, want ErrNondeterministic", err)
	}
	for _, want := range []string{`input[0] offset 0 key "ann"`, "replayed from no persisted snapshot (a new key)", "state: ", "first difference at byte"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "output") {
		t.Errorf("error %q names outputs, the flow has none", err)
	}
	first, _ := d.State("ann")
	// The next call starts from the persisted state, and is the same on a
	// replay: deterministic from there on.
	must(t, d.Pipe("ann", "click"))
	if s, _ := d.State("ann"); s.Number != first.Number || s.Clicks != 2 {
		t.Fatalf("state %+v after %+v: not the first fold's", s, first)
	}
}

func TestReplayCheckCatchesANondeterministicTimer(t *testing.T) {
	flow := keyflow.New(
		func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			return s, kc.SetTimer("idle", kc.Now().Add(time.Minute))
		},
		keyflow.WithTimers(func(kc *keyflow.Context, s *int, name string) (*int, error) {
			return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: []byte(strconv.FormatInt(counter.Add(1), 10))})
		}),
		keyflow.WithOutput(nil, "closed"),
	)
	d := newDriver(t, flow, keyflowtest.WithReplayCheck())
	must(t, d.Pipe("bob", "click")) // the fold is deterministic
	err := d.Advance(time.Minute)
	if !errors.Is(err, keyflowtest.ErrNondeterministic) {
		t.Fatalf("Advance: %v, want ErrNondeterministic", err)
	}
	for _, want := range []string{`input[0] key "bob" timer "idle"`, `output 0 (topic "closed", key "bob")`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if outs := d.Outputs(); len(outs) != 1 {
		t.Fatalf("%d outputs, want the first run's 1", len(outs))
	}
	if _, ok := d.Timer("bob", "idle"); ok {
		t.Fatal("the timer is still pending")
	}
}

// TestReplayCheckNamesWhatDiffers covers each part of a call the check
// compares, and the calls it replays (a load hook, overdue timers fired
// at a load).
func TestReplayCheckNamesWhatDiffers(t *testing.T) {
	emit := func(kc *keyflow.Context, rec *kgo.Record) error { return kc.Emit(rec) }
	for _, tc := range []struct {
		name string
		flow *keyflow.Flow[int]
		run  func(d *keyflowtest.Driver[int]) error
		want []string
	}{{
		name: "a header",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			return s, emit(kc, &kgo.Record{Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.FormatInt(counter.Add(1), 10))}}})
		}, keyflow.WithOutput(nil, "out")),
		want: []string{`output 0 (topic "out", key nil): headers [n=`},
	}, {
		name: "the number of outputs",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			if counter.Add(1)%2 == 0 {
				return s, emit(kc, &kgo.Record{Key: []byte("even"), Value: []byte("v")})
			}
			return s, nil
		}, keyflow.WithOutput(nil, "out")),
		want: []string{"outputs: ", `the first extra: output 0, topic "out", key "even"`},
	}, {
		name: "a timer's due time",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			return s, kc.SetTimer("t", kc.Now().Add(time.Duration(counter.Add(1))*time.Minute))
		}, keyflow.WithTimers(func(_ *keyflow.Context, s *int, _ string) (*int, error) { return s, nil })),
		want: []string{`timers: ["t" at 2026-01-01T`, `] vs ["t" at 2026-01-01T`},
	}, {
		name: "a dead letter",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			return s, fmt.Errorf("call %d", counter.Add(1))
		}, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter)),
		want: []string{`dead letter 0 (topic "input.dlq", key "k"): headers [`},
	}, {
		name: "a skip",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			if counter.Add(1)%2 == 0 {
				return s, errors.New("even")
			}
			n := 1
			return &n, nil
		}, keyflow.WithFoldErrorPolicy(keyflow.Skip)),
		want: []string{"skipped calls: "},
	}, {
		name: "a failure of the replay only",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			if counter.Add(1)%2 == 0 {
				panic("even")
			}
			return s, nil
		}),
		run: func(d *keyflowtest.Driver[int]) error {
			for counter.Load()%2 == 1 { // the first run's call is odd
				counter.Add(1)
			}
			return d.Pipe("k", "v")
		},
		want: []string{"the replay failed: ", "panic"},
	}, {
		name: "a load hook",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			if s == nil {
				n := 1
				return &n, nil
			}
			return s, nil
		}, keyflow.WithOnLoad(func(kc *keyflow.Context, s *int) (*int, error) {
			if s == nil {
				return s, nil
			}
			n := int(counter.Add(1))
			return &n, nil
		})),
		run: func(d *keyflowtest.Driver[int]) error {
			if err := d.Pipe("k", "v"); err != nil {
				return err
			}
			if err := d.Restart(); err != nil {
				return err
			}
			return d.Pipe("k", "v") // loads the key: the hook runs, and in the replay
		},
		want: []string{`input[0] offset 1 key "k": replayed from its persisted snapshot (covering offset 0)`, "state: "},
	}, {
		name: "overdue timers fired at a load",
		flow: keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
			return s, kc.SetTimer("t", kc.Now().Add(time.Minute))
		}, keyflow.WithTimers(func(kc *keyflow.Context, s *int, _ string) (*int, error) {
			n := int(counter.Add(1))
			return &n, nil
		})),
		run: func(d *keyflowtest.Driver[int]) error {
			if err := d.Pipe("k", "v"); err != nil {
				return err
			}
			return d.RestartAfter(time.Hour)
		},
		want: []string{`input[0] key "k": load for its overdue timers`, "state: "},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, tc.flow, keyflowtest.WithReplayCheck())
			run := tc.run
			if run == nil {
				run = func(d *keyflowtest.Driver[int]) error { return d.Pipe("k", "v") }
			}
			err := run(d)
			if !errors.Is(err, keyflowtest.ErrNondeterministic) {
				t.Fatalf("%v, want ErrNondeterministic", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestReplayCheckDoesNotDoubleOutputs(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(fmt.Sprintf("reloads=%v", reload), func(t *testing.T) {
			opts := []keyflowtest.Option{keyflowtest.WithReplayCheck()}
			if reload {
				opts = append(opts, keyflowtest.WithReloads())
			}
			d := newDriver(t, replayFlow(), opts...)
			must(t, d.Pipe("k", "1"))
			must(t, d.Pipe("k", "2"))
			must(t, d.Pipe("k", "bad"))
			must(t, d.Advance(time.Minute))
			loads := 0
			if reload {
				loads = 3 // each call but the first loads the key (the timers fire in one)
			}
			var vals []string
			for _, o := range d.Outputs() {
				vals = append(vals, string(o.Value))
			}
			want := []string{"1", "3", "b:3", "a:3"}
			if reload {
				want = []string{"1", "loaded 1", "3", "loaded 2", "loaded 3", "a:3", "b:3"}
			}
			if !reflect.DeepEqual(vals, want) {
				t.Fatalf("outputs %q, want %q", vals, want)
			}
			if dls := d.DeadLetters(); len(dls) != 1 || dls[0].Offset != 2 {
				t.Fatalf("dead letters %+v, want the one of offset 2", dls)
			}
			if s, _ := d.State("k"); s.N != 3 || s.Loads != loads || len(s.Log) != 4 {
				t.Fatalf("state %+v", s)
			}
			if n := len(d.Skipped()); n != 0 {
				t.Fatalf("%d skipped", n)
			}
		})
	}
}

// paddedJSON encodes with one more trailing space at every call: one state
// encoded two ways, as gob encodes a map in iteration order.
type paddedJSON struct{ calls *atomic.Int64 }

func (c paddedJSON) Encode(s *map[string]int) ([]byte, error) {
	b, err := json.Marshal(s)
	return append(b, bytes.Repeat([]byte(" "), int(c.calls.Add(1)))...), err
}

func (paddedJSON) Decode(b []byte) (*map[string]int, error) {
	s := new(map[string]int)
	return s, json.Unmarshal(b, s)
}

// A state whose encodings differ but decode to equal values is no
// difference: a codec that writes a map in iteration order (gob) made every
// call of a deterministic flow fail.
func TestReplayCheckComparesStatesDecoded(t *testing.T) {
	flow := keyflow.New(func(_ *keyflow.Context, s *map[string]int, rec *kgo.Record) (*map[string]int, error) {
		if s == nil {
			s = &map[string]int{}
		}
		(*s)[string(rec.Value)]++
		return s, nil
	}, keyflow.WithCodec[map[string]int](paddedJSON{calls: new(atomic.Int64)}))
	d := keyflowtest.New(flow, keyflowtest.WithReplayCheck())
	defer d.Close()
	for _, v := range []string{"a", "b", "a"} {
		if err := d.Pipe("k", v); err != nil {
			t.Fatalf("Pipe(%s) = %v; want no difference (equal states encoded apart)", v, err)
		}
	}
	if got, ok := d.State("k"); !ok || got["a"] != 2 || got["b"] != 1 {
		t.Fatalf("state %v", got)
	}
}

// A state that differs past its first 64 bytes is quoted where it differs.
func TestReplayCheckQuotesTheStatesWhereTheyDiffer(t *testing.T) {
	var calls atomic.Int64
	flow := keyflow.New(func(_ *keyflow.Context, _ *string, _ *kgo.Record) (*string, error) {
		s := strings.Repeat("x", 100) + "-call-" + strconv.FormatInt(calls.Add(1), 10)
		return &s, nil
	})
	d := keyflowtest.New(flow, keyflowtest.WithReplayCheck())
	defer d.Close()
	err := d.Pipe("k", "v")
	if !errors.Is(err, keyflowtest.ErrNondeterministic) || !strings.Contains(err.Error(), "-call-1") || !strings.Contains(err.Error(), "-call-2") {
		t.Fatalf("Pipe = %v; want ErrNondeterministic quoting both states where they differ (-call-1 vs -call-2)", err)
	}
}
