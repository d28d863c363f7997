package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stateV2 is a state type the ledger's snapshots do not decode into (its
// balance is a string): a flow redeployed with an incompatible state.
type stateV2 struct {
	Balance string `json:"balance"`
	Events  int    `json:"events"`
}

// UndecodableStateDeadLettered: a flow redeployed with a state type its
// keys' snapshots do not decode into, under
// WithUndecodableStatePolicy(DeadLetter). Every key that gets a record
// writes its old snapshot's value to the dead-letter topic once (kind
// KindUndecodableState, the headers naming the snapshot topic, partition
// and offset), starts from no state and folds only the new records; no
// partition fails; the keys that got none keep their old snapshots. A
// restart then meets no undecodable state and writes no dead letter again.
func UndecodableStateDeadLettered(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	const partitions = 2
	input, snaps, group := Topics(t, brokers, partitions)
	dlq := DeadLetterTopic(t, brokers, input, partitions)
	ctx := t.Context()
	exp := ledger.Expected{}
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 10}, 50, exp)
	w := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, mode)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatalf("first run: %v", err)
	}
	VerifyLedger(t, brokers, snaps, partitions, exp)
	oldValue := map[string]string{}
	for _, r := range testkit.ReadTopic(t, brokers, snaps, true) {
		if r.Value != nil && string(r.Key) != snapshotstore.MarkerKey {
			oldValue[string(r.Key)] = string(r.Value)
		}
	}

	// The redeployed flow gets 3 events for each of 5 accounts, then, once
	// restarted, one more each: their keys load again, from the new
	// snapshots.
	touched := map[string]int{}
	for acct := range exp {
		if len(touched) == 5 {
			break
		}
		touched[acct] = 0
	}
	produce := func(n int) {
		var recs []*kgo.Record
		for acct := range touched {
			touched[acct] += n
			for range n {
				recs = append(recs, &kgo.Record{Topic: input, Key: []byte(acct), Value: []byte("v2 event")})
			}
		}
		if err := testkit.Client(t, brokers).ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	v2 := keyflow.New(func(_ *keyflow.Context, s *stateV2, _ *kgo.Record) (*stateV2, error) {
		if s == nil {
			s = &stateV2{Balance: "new"}
		}
		s.Events++
		return s, nil
	}, keyflow.WithUndecodableStatePolicy(keyflow.DeadLetter))
	for i, run := range []string{"redeployed", "restarted"} {
		produce(3 - 2*i) // 3, then 1
		w := StartWorker(t, v2, brokers, group, input, snaps, mode)
		testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
		if st := w.W.Status(context.Background()); len(st.Failed) > 0 {
			t.Fatalf("%s: failed partitions %+v", run, st.Failed)
		}
		if err := w.Stop(t); err != nil {
			t.Fatalf("%s: Run = %v", run, err)
		}
		dls := testkit.ReadTopic(t, brokers, dlq, true)
		if len(dls) != len(touched) {
			t.Fatalf("%s: %d dead letters, want one per account with new events (%d): %v", run, len(dls), len(touched), dls)
		}
		for _, dl := range dls {
			acct := string(dl.Key)
			hs := map[string]string{}
			for _, h := range dl.Headers {
				hs[h.Key] = string(h.Value)
			}
			if _, ok := touched[acct]; !ok || string(dl.Value) != oldValue[acct] || hs[keyflow.HeaderErrorException] != string(keyflow.KindUndecodableState) ||
				hs[keyflow.HeaderErrorTopic] != snaps || hs[keyflow.HeaderErrorOffset] == "" {
				t.Fatalf("%s: dead letter %q=%q headers %v; want an account with new events, its old state %q, kind %s, source %s",
					run, acct, dl.Value, hs, oldValue[acct], keyflow.KindUndecodableState, snaps)
			}
			if _, err := strconv.ParseInt(hs[keyflow.HeaderErrorOffset], 10, 64); err != nil {
				t.Fatalf("%s: dead letter offset header %q", run, hs[keyflow.HeaderErrorOffset])
			}
		}
		latest := map[string]*kgo.Record{}
		for _, r := range testkit.ReadTopic(t, brokers, snaps, true) {
			if string(r.Key) != snapshotstore.MarkerKey {
				latest[string(r.Key)] = r
			}
		}
		for acct := range exp {
			r := latest[acct]
			if r == nil {
				t.Fatalf("%s: no snapshot of %s", run, acct)
			}
			if _, ok := touched[acct]; !ok {
				if string(r.Value) != oldValue[acct] {
					t.Fatalf("%s: %s got no event but its snapshot changed: %q, was %q", run, acct, r.Value, oldValue[acct])
				}
				continue
			}
			var s stateV2
			if err := json.Unmarshal(r.Value, &s); err != nil || s != (stateV2{Balance: "new", Events: touched[acct]}) {
				t.Fatalf("%s: %s's state %q (%v), want %s", run, acct, r.Value, err, fmt.Sprint(stateV2{"new", touched[acct]}))
			}
		}
	}
}
