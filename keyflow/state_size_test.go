package keyflow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// blob is a state that keeps every record's value: it outgrows one record.
type blob struct{ Data string }

func growFold(_ *keyflow.Context, s *blob, r *kgo.Record) (*blob, error) {
	n := blob{}
	if s != nil {
		n = *s
	}
	n.Data += string(r.Value)
	return &n, nil
}

// pipeGrowth folds three 400 KB values and a small one into key k: the
// third would make the snapshot record ~1.2 MB, above kgo's default
// ProducerBatchMaxBytes (1 000 012), which the driver applies as a
// worker's producer would.
func pipeGrowth(t *testing.T, d *keyflowtest.Driver[blob]) (third error) {
	t.Helper()
	big := strings.Repeat("x", 400_000)
	for i := range 2 {
		if err := d.Pipe("k", big); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	third = d.Pipe("k", big)
	if third == nil {
		if err := d.Pipe("k", "tail"); err != nil {
			t.Fatalf("the record after the skipped one: %v", err)
		}
	}
	return third
}

// Under Skip, the record whose fold would make the key's snapshot too
// large for its producer is skipped with no effect, as any failed fold: the
// state keeps the first two values, and the key goes on (the record after
// it folds). Without the check its transaction failed at every attempt.
func TestStateTooLargeForItsSnapshotIsSkipped(t *testing.T) {
	d := keyflowtest.New(keyflow.New(growFold, keyflow.WithFoldErrorPolicy(keyflow.Skip)))
	defer d.Close()
	if err := pipeGrowth(t, d); err != nil {
		t.Fatalf("third record: %v, want it skipped", err)
	}
	s, _ := d.State("k")
	if len(s.Data) != 800_004 {
		t.Fatalf("state of %d bytes, want the first two values and the tail (800 004)", len(s.Data))
	}
	sk := d.Skipped()
	if len(sk) != 1 || !errors.Is(sk[0], kerr.MessageTooLarge) || !strings.Contains(sk[0].Error(), "offset 2") || !strings.Contains(sk[0].Error(), `key "k"`) {
		t.Fatalf("skipped %v, want the record at offset 2 of key k, matching MESSAGE_TOO_LARGE", sk)
	}
}

// Under DeadLetter the same record goes to the dead-letter topic, its
// message naming MESSAGE_TOO_LARGE.
func TestStateTooLargeForItsSnapshotIsDeadLettered(t *testing.T) {
	d := keyflowtest.New(keyflow.New(growFold, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter)))
	defer d.Close()
	if err := pipeGrowth(t, d); err != nil {
		t.Fatalf("third record: %v, want it dead-lettered", err)
	}
	dls := d.DeadLetters()
	if len(dls) != 1 || dls[0].Offset != 2 || !strings.Contains(dls[0].Message, "MESSAGE_TOO_LARGE") {
		t.Fatalf("dead letters %+v, want the record at offset 2, naming MESSAGE_TOO_LARGE", dls)
	}
}

// Under Fail (the default) the key fails before its write, with an error
// matching kerr.MessageTooLarge that names it, the offset and the sizes.
func TestStateTooLargeForItsSnapshotFailsTheKey(t *testing.T) {
	d := keyflowtest.New(keyflow.New(growFold))
	defer d.Close()
	err := pipeGrowth(t, d)
	if !errors.Is(err, keyflowtest.ErrPartitionFailed) || !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("third record: %v; want ErrPartitionFailed and MESSAGE_TOO_LARGE", err)
	}
	for _, want := range []string{`key "k"`, "snapshot at offset 2", "limit 1000012", "max.message.bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("third record: %v; want it to name %s", err, want)
		}
	}
}

// timersFold keeps its record's value as the state and sets 2 000 timers
// an hour ahead: their header is ~98 KB, and the size check's quick bound
// (6 bytes per name byte, escaped) counts ~290 KB for it.
func timersFold(kc *keyflow.Context, _ *blob, r *kgo.Record) (*blob, error) {
	for i := range 2000 {
		if err := kc.SetTimer(fmt.Sprintf("session-%010d", i), kc.Now().Add(time.Hour)); err != nil {
			return nil, err
		}
	}
	return &blob{Data: string(r.Value)}, nil
}

// A state with timers whose record fits is never refused for the bound's
// slack: the check measures the record itself before refusing. One that
// does not fit is still refused.
func TestStateWithTimersIsMeasuredBeforeItIsRefused(t *testing.T) {
	flow := keyflow.New(timersFold, keyflow.WithFoldErrorPolicy(keyflow.Skip),
		keyflow.WithTimers(func(_ *keyflow.Context, s *blob, _ string) (*blob, error) { return s, nil }))
	d := keyflowtest.New(flow)
	defer d.Close()
	if err := d.Pipe("k", strings.Repeat("x", 850_000)); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.State("k"); len(s.Data) != 850_000 || len(d.Skipped()) != 0 {
		t.Fatalf("state of %d bytes, skipped %v: an 850 KB state with ~98 KB of timers fits 1 000 012 bytes", len(s.Data), d.Skipped())
	}
	if err := d.Pipe("k", strings.Repeat("x", 920_000)); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.State("k"); len(s.Data) != 850_000 || len(d.Skipped()) != 1 || !errors.Is(d.Skipped()[0], kerr.MessageTooLarge) {
		t.Fatalf("state of %d bytes, skipped %v: 920 KB and the timers do not fit, want it skipped", len(s.Data), d.Skipped())
	}
}

// countingCodec counts Encode calls.
type countingCodec struct {
	keyflow.Codec[blob]
	encodes *int
}

func (c countingCodec) Encode(s *blob) ([]byte, error) {
	*c.encodes++
	return c.Codec.Encode(s)
}

// The size check encodes nothing more: under Skip (which encodes the state
// once per call for its undo) and under Fail (once per write), the
// driver's one call and one write per record cost one Encode each.
func TestStateSizeCheckCostsNoEncoding(t *testing.T) {
	for _, pol := range []keyflow.Policy{keyflow.Skip, keyflow.Fail} {
		n := 0
		d := keyflowtest.New(keyflow.New(growFold, keyflow.WithFoldErrorPolicy(pol), keyflow.WithCodec[blob](countingCodec{keyflow.JSON[blob](), &n})))
		for i := range 10 {
			if err := d.Pipe("k", fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
		d.Close()
		if n != 10 {
			t.Errorf("policy %s: %d encodes for 10 records, want 10", pol, n)
		}
	}
}

// tombstoneTimersFold deletes the state and sets 20 000 timers with
// 40-byte names: the tombstone keeps them, and their header alone (~1.2
// MB) does not fit one record of kgo's default ProducerBatchMaxBytes.
func tombstoneTimersFold(kc *keyflow.Context, s *blob, r *kgo.Record) (*blob, error) {
	if string(r.Value) != "delete" {
		return &blob{Data: string(r.Value)}, nil
	}
	for i := range 20_000 {
		if err := kc.SetTimer(fmt.Sprintf("reminder-%031d", i), kc.Now().Add(time.Hour)); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// A call that deletes the state is checked too: its tombstone carries the
// key's timers. Under Skip the call is skipped and the state kept; without
// the check the key failed at its write, whatever the policy.
func TestTombstoneWithTimersTooLargeIsSkipped(t *testing.T) {
	flow := keyflow.New(tombstoneTimersFold, keyflow.WithFoldErrorPolicy(keyflow.Skip),
		keyflow.WithTimers(func(_ *keyflow.Context, s *blob, _ string) (*blob, error) { return s, nil }))
	d := keyflowtest.New(flow)
	defer d.Close()
	for _, v := range []string{"kept", "delete", "after"} {
		if err := d.Pipe("k", v); err != nil {
			t.Fatalf("record %q: %v, want the deletion skipped", v, err)
		}
	}
	if s, ok := d.State("k"); !ok || s.Data != "after" {
		t.Fatalf("state %+v, want the record after the skipped deletion", s)
	}
	if sk := d.Skipped(); len(sk) != 1 || !errors.Is(sk[0], kerr.MessageTooLarge) || !strings.Contains(sk[0].Error(), "offset 1") || !strings.Contains(sk[0].Error(), "state deleted") {
		t.Fatalf("skipped %v, want the deletion at offset 1, named as one, matching MESSAGE_TOO_LARGE", sk)
	}
}
