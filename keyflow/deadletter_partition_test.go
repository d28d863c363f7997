package keyflow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dlqs returns the dead letters committed by the partition's transactions.
func dlqs(mem *snapshotstore.Memory) []*kgo.Record {
	var out []*kgo.Record
	for _, o := range mem.Outputs(inTopic, 0) {
		if o.Topic == keyflow.DefaultDeadLetterTopic(inTopic) {
			out = append(out, o)
		}
	}
	return out
}

// Under DeadLetter (transactional outputs) a failing fold, an undecodable
// record and a key-less record each commit one dead letter with their
// source position, the state of their key is untouched, the offset passes
// them, and a replay of the whole partition (a restart from offset 0)
// writes none of them again: the key's snapshot covers the record.
func TestDeadLettersCommittedOnceAcrossReplay(t *testing.T) {
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		if string(r.Value) == "undecodable" {
			return nil, fmt.Errorf("parse: %w", keyflow.ErrUndecodable)
		}
		return countFold(kc, s, r)
	}
	flow := keyflow.New(fold, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter),
		keyflow.WithNilKeyPolicy(keyflow.DeadLetter))
	mem := snapshotstore.NewMemory()
	mem.TransactionalOutputs = true
	nilKey := &kgo.Record{Topic: inTopic, Offset: 3, Value: []byte("no key")}
	batch := []*kgo.Record{rec(0, "a", ""), rec(1, "a", "bad"), rec(2, "b", "undecodable"), nilKey, rec(4, "a", "")}

	p := runPartitionOn(t, mem, flow, 10*time.Millisecond, 0)
	p.send(batch...)
	p.awaitCommitted(5)
	check := func(when string) {
		t.Helper()
		got := dlqs(mem)
		kinds := map[int64]string{1: "actorflow.FoldError", 2: "actorflow.UndecodableInput", 3: "actorflow.NilKey"}
		if len(got) != len(kinds) {
			t.Fatalf("%s: %d dead letters, want %d (one per bad record): %+v", when, len(got), len(kinds), got)
		}
		for _, dl := range got {
			off, _ := header(dl, keyflow.HeaderErrorOffset)
			var o int64
			fmt.Sscan(off, &o)
			if kind, _ := header(dl, keyflow.HeaderErrorException); kind != kinds[o] {
				t.Errorf("%s: dead letter of offset %s has kind %q, want %q", when, off, kind, kinds[o])
			}
			delete(kinds, o)
		}
		if c := p.latest("a"); c.N != 2 || fmt.Sprint(c.Offsets) != "[0 4]" {
			t.Errorf("%s: key a persisted %+v, want N=2 over [0 4]: the dead-lettered record 1 left an effect", when, c)
		}
	}
	check("first run")
	p.sys.Root.Send(p.pid, &partitionflow.Revoke{Flush: true})
	if err := p.awaitStopped(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	p = runPartitionOn(t, mem, flow, 10*time.Millisecond, 0) // replays everything
	p.send(batch...)
	// This run's own commit of offset 5 (the store already holds 5).
	testkit.Eventually(t, 10*time.Second, "the replay commits offset 5", func() (bool, string) {
		st := p.status()
		return st.Committed >= 5, fmt.Sprintf("%+v", st)
	})
	check("after a replay from offset 0")
}
