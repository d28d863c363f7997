package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster pieces (produce, worker, verify) against an embedded broker.
func TestProduceWorkerVerify(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	b := brokers[0]
	common := []string{"--brokers", b, "--input", "in", "--partitions", "3"}
	if rc := produceCmd(context.Background(), append(common, "--events", "3000", "--rate", "100000", "--accounts", "50")); rc != 0 {
		t.Fatalf("produce exited %d", rc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- worker(ctx, append(common, "--group", "g", "--snapshots", "snaps", "--output", "out",
			"--http", "127.0.0.1:0", "--persist-every", "50ms"))
	}()
	if rc := runVerify([]string{"--brokers", b, "--group", "g", "--input", "in", "--snapshots", "snaps", "--output", "out", "--timeout", "1m"}); rc != 0 {
		t.Fatalf("verify exited %d", rc)
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("worker exited %d", rc)
	}
}

// The verifier's output check, per account: a duplicate, a missing and an
// out-of-order output are each counted and fail the exactly-once check,
// not the at-least-once one (duplicates and order there are allowed). An
// output whose balance is none its sequence number should carry fails
// both.
func TestCheckOutputsCountsPerKey(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := createTopic(context.Background(), cl, "out", 1); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, o := range []ledger.Output{{Account: "a", Seq: 1, Balance: 10}, {Account: "a", Seq: 2, Balance: 20}, {Account: "a", Seq: 2, Balance: 20},
		{Account: "b", Seq: 2, Balance: 20}, {Account: "b", Seq: 1, Balance: 10}, {Account: "c", Seq: 1, Balance: 10}} {
		b, _ := json.Marshal(o)
		recs = append(recs, &kgo.Record{Key: []byte(o.Account), Value: b})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// d's input repeated its event 2 (a producer's retry that landed twice):
	// the flow emits seq 2 twice, which is no duplicate; e's input skipped
	// seq 2: no output is missing for it.
	// f's output carries a balance its state never had (emitted from a
	// state that diverged).
	for _, o := range []ledger.Output{{Account: "d", Seq: 1, Balance: 10}, {Account: "d", Seq: 2, Balance: 20}, {Account: "d", Seq: 2, Balance: 25},
		{Account: "e", Seq: 1, Balance: 10}, {Account: "e", Seq: 3, Balance: 30}, {Account: "f", Seq: 1, Balance: 11}} {
		b, _ := json.Marshal(o)
		recs = append(recs, &kgo.Record{Key: []byte(o.Account), Value: b})
	}
	if err := cl.ProduceSync(context.Background(), recs[6:]...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int64][]int64{"a": {1: {10}, 2: {20}}, "b": {1: {10}, 2: {20}}, "c": {1: {10}, 2: {20}, 3: {30}},
		"d": {1: {10}, 2: {20, 25}}, "e": {1: {10}, 3: {30}}, "f": {1: {10}}}
	r := &report{ExactlyOnce: true}
	if err := checkOutputs(context.Background(), brokers, "out", want, r); err != nil {
		t.Fatal(err)
	}
	if r.Outputs != 12 || r.OutputDuplicates != 1 || r.KeysWithDuplicates != 1 || r.MissingOutputs != 2 || r.KeysWithMissing != 1 || r.OutputsOutOfOrder != 1 ||
		r.WrongBalances != 1 || r.KeysWithWrongBalances != 1 {
		t.Fatalf("report %+v: want 12 outputs, 1 duplicate (a), 2 missing (c), 1 out of order (b), 1 wrong balance (f), none for d and e", r)
	}
	if len(r.BalanceExamples) != 1 || !strings.HasPrefix(r.BalanceExamples[0], "f seq 1: balance 11 at out[0]@") || !strings.HasSuffix(r.BalanceExamples[0], "want one of [10]") {
		t.Fatalf("balance examples %q: want f seq 1's", r.BalanceExamples)
	}
	// a's seq 2 is at offsets 1 and 2 of out[0].
	if len(r.DuplicateCopies) != 1 || !strings.HasPrefix(r.DuplicateCopies[0], "a seq 2: out[0]@1 (producer ") || !strings.Contains(r.DuplicateCopies[0], "; out[0]@2 (producer ") {
		t.Fatalf("duplicate copies %q: want a seq 2 at out[0]@1 and out[0]@2", r.DuplicateCopies)
	}
	if len(r.OutputExamples) != 4 || !r.outputsFailed() {
		t.Fatalf("examples %q, failed %v: want one line per bad account and a failure", r.OutputExamples, r.outputsFailed())
	}
	// At-least-once: c's missing outputs fail it; duplicates and a
	// replay's order do not.
	r.ExactlyOnce = false
	if !r.outputsFailed() {
		t.Fatal("at-least-once check passed with 2 outputs missing")
	}
	r.MissingOutputs = 0
	if !r.outputsFailed() {
		t.Fatal("at-least-once check passed with a wrong balance")
	}
	r.WrongBalances = 0
	if r.outputsFailed() {
		t.Fatal("at-least-once check failed on duplicates or order")
	}
}

// A verification that saw no input, or an input with gaps, verified
// nothing (or not what was produced): it fails whatever else it found.
func TestVerifyFailsWithoutInputOrWithGaps(t *testing.T) {
	if r := (&report{}); !r.failed() {
		t.Fatal("passed with no input event")
	}
	if r := (&report{Events: 10, InputGaps: 1}); !r.failed() {
		t.Fatal("passed with a gap in the input")
	}
	if r := (&report{Events: 10}); r.failed() {
		t.Fatal("failed with nothing wrong")
	}
	// A snapshot of an account with no event is a mismatch.
	mm := ledger.Compare(ledger.Expected{"a": {Balance: 1, Count: 1, LastSeq: 1}},
		map[string]*ledger.State{"a": {Balance: 1, Count: 1, LastSeq: 1}, "ghost": {Balance: 5}})
	if len(mm) != 1 || mm[0].Account != "ghost" || !mm[0].Unexpected || !strings.Contains(mm[0].String(), "no event in the input") {
		t.Fatalf("mismatches %v: want the ghost account, unexpected", mm)
	}
}

// Poison records in the input (a non-JSON value and an int64-overflowing
// amount for existing accounts, a record without key), workers with the
// dead-letter policy: the verifier skips and counts them when it folds the
// input (instead of failing on them), finds each in the dead-letter topic
// exactly once with the KIP-1034 headers naming its source, and passes.
func TestVerifySkipsPoisonAndFindsItsDeadLetters(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	b := brokers[0]
	common := []string{"--brokers", b, "--input", "in", "--partitions", "3"}
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic("in"))
	if err := createTopic(context.Background(), cl, "in", 3); err != nil {
		t.Fatal(err)
	}
	// Events before and after the poison, one sequence per account.
	gen := &ledger.Generator{Accounts: 20}
	produce := func(n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = ledger.Record("in", gen.Next())
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(600)
	injected, err := poison(context.Background(), []string{b}, "in", "acct-3", poisonKinds)
	if err != nil {
		t.Fatal(err)
	}
	if len(injected) != 3 {
		t.Fatalf("injected %+v: want 3 records", injected)
	}
	produce(60)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- worker(ctx, append(common, "--group", "g", "--snapshots", "snaps", "--output", "out",
			"--http", "127.0.0.1:0", "--persist-every", "50ms",
			"--undecodable-policy", "dead-letter", "--nil-key-policy", "dead-letter"))
	}()
	r, err := verify(context.Background(), brokers, "g", "in", "snaps", "out", "", time.Minute, acknowledged{})
	cancel()
	if rc := <-done; rc != 0 {
		t.Errorf("worker exited %d", rc)
	}
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	r.ExactlyOnce, r.Transactional = true, true
	if r.Mismatches != 0 || r.SkippedInputs != 3 || r.Events != 660 {
		t.Fatalf("mismatches %d (%q), skipped %d (%+v), events %d: want 0, 3, 660", r.Mismatches, r.Examples, r.SkippedInputs, r.Skipped, r.Events)
	}
	if r.DeadLetterTopic != "in.dlq" || r.DeadLettersTotal != 3 || r.DeadLetterDuplicates != 0 || r.DeadLettersMissing != 0 || r.DeadLettersUnexpected != 0 || r.failed() {
		t.Fatalf("dead letters %+v: want 3 in in.dlq, each once, and a pass", r)
	}
	for _, in := range injected {
		n := 0
		for _, dl := range r.DeadLetters {
			if dl.Source == in.inputRef && dl.Exception == in.Exception {
				n++
			}
		}
		if n != 1 {
			t.Errorf("poison %+v: %d dead letters with its topic, partition, offset and kind (want 1): %+v", in, n, r.DeadLetters)
		}
	}
}

// The dead-letter check: a skipped input missing from the dead-letter
// topic, one seen twice and a dead letter of no skipped input are each
// counted; duplicates fail only the transactional mode's check, with or
// without an output topic (it needed one: found by a review).
func TestMatchDeadLetters(t *testing.T) {
	a, b, c := inputRef{"in", 0, 5}, inputRef{"in", 1, 7}, inputRef{"in", 2, 9}
	r := &report{Events: 1, Skipped: []skippedInput{{inputRef: a}, {inputRef: b}}, SkippedInputs: 2, DeadLetterTopic: "in.dlq",
		DeadLetters: []deadLetter{{Source: b}, {Source: b}, {Source: c}}, DeadLettersTotal: 3}
	r.matchDeadLetters()
	if r.DeadLettersMissing != 1 || r.DeadLetterDuplicates != 1 || r.DeadLettersUnexpected != 1 {
		t.Fatalf("missing %d, duplicates %d, unexpected %d: want 1 each", r.DeadLettersMissing, r.DeadLetterDuplicates, r.DeadLettersUnexpected)
	}
	r.Transactional = true
	if !r.failed() {
		t.Fatal("not failed")
	}
	r2 := &report{Events: 1, Skipped: []skippedInput{{inputRef: a}}, SkippedInputs: 1, DeadLetterTopic: "in.dlq",
		DeadLetters: []deadLetter{{Source: a}, {Source: a}}, DeadLettersTotal: 2}
	r2.matchDeadLetters()
	if r2.failed() {
		t.Fatal("at-least-once: a duplicate dead letter failed the check")
	}
	r2.Transactional = true
	if !r2.failed() {
		t.Fatal("transactional: a duplicate dead letter passed the check")
	}
}

// The trace of a failed account shows each record's transaction and its
// outcome: an output of a committed transaction and one of an aborted
// transaction are told apart, and a snapshot write names the input offset
// its transaction committed (the marker record); an input event is shown
// as not transactional.
func TestTraceKeysNamesEachRecordsTransaction(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	ctx := context.Background()
	admin := testkit.Client(t, brokers)
	for _, topic := range []string{"in", "snaps", "out"} {
		if err := createTopic(ctx, admin, topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	in := testkit.Client(t, brokers, kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ev, _ := json.Marshal(ledger.Event{Account: "a", Seq: 1, Amount: 5})
	if err := in.ProduceSync(ctx, &kgo.Record{Key: []byte("a"), Value: ev}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := testkit.Client(t, brokers, kgo.TransactionalID("trace-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	out, _ := json.Marshal(ledger.Output{Account: "a", Seq: 1, Balance: 5})
	state, _ := json.Marshal(ledger.State{Balance: 5, Count: 1, LastSeq: 1})
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := []*kgo.Record{
			snapshotstore.EncodeRecord("snaps", 0, snapshotstore.Snapshot{Key: "a", Value: state, Offset: 0}),
			{Topic: "snaps", Key: []byte(snapshotstore.MarkerKey), Value: []byte("1")},
			{Topic: "out", Key: []byte("a"), Value: out},
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := kgotxn.EndTransaction(ctx, txn, end, 10*time.Second, recs...); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := traceKeys(ctx, brokers, "in", "snaps", "out", []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(lines, "\n")
	want := []string{
		"a: 5 records",
		"input    in[0]@0 seq 1 amount 5 (producer ",
		"not transactional)",
		"snapshot snaps[0]@0 through input offset 0: last seq 1 count 1 balance 5 (producer ",
		", commit@2, commits input offset 1)",
		"output   out[0]@0 seq 1 balance 5 (producer ",
		", commit@1)",
		"output   out[0]@2 seq 1 balance 5 (producer ",
		", abort@3)",
		"snapshot snaps[0]@3 ",
		", abort@5, commits input offset 1)",
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("trace lacks %q:\n%s", w, all)
		}
	}
}

// A worker stopped (SIGTERM) while it still waits for its brokers exits 0,
// as its doc says of a clean stop: nothing started, nothing to flush. It
// exited 1, which the chaos run counts as a worker failure (found by a
// review).
func TestWorkerStoppedWhileStartingExitsZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- worker(ctx, []string{"--brokers", "127.0.0.1:1", "--http", "127.0.0.1:0"}) }()
	cancel() // while Run reaches the brokers (there are none), or before it starts: the same path
	select {
	case rc := <-done:
		if rc != 0 {
			t.Fatalf("worker exited %d, want 0", rc)
		}
	case <-time.After(time.Minute):
		t.Fatal("the worker did not stop")
	}
}

// The events the producer acknowledged are checked per account: round-robin
// from a fresh start, account i's sequence numbers run to produced/accounts,
// one more for the first produced%accounts. A lost tail fails the
// verification even when repeats of a retried batch made up the count
// (found by a review: the chaos run compared counts).
func TestAcknowledgedEventsAreCheckedPerAccount(t *testing.T) {
	ack := acknowledged{produced: 10, accounts: 3} // want 4, 3, 3
	r := &report{Events: 10, AcknowledgedMissing: ack.missing(map[string]*ledger.State{"acct-0": {LastSeq: 4}, "acct-1": {LastSeq: 2}, "acct-2": {LastSeq: 3}})}
	if r.AcknowledgedMissing != 1 || !r.failed() {
		t.Fatalf("missing %d, failed %v: want acct-1's seq 3 missing, and a failure", r.AcknowledgedMissing, r.failed())
	}
	ok := &report{Events: 10, AcknowledgedMissing: ack.missing(map[string]*ledger.State{"acct-0": {LastSeq: 4}, "acct-1": {LastSeq: 3}, "acct-2": {LastSeq: 3}})}
	if ok.AcknowledgedMissing != 0 || ok.failed() {
		t.Fatalf("missing %d, failed %v: want none", ok.AcknowledgedMissing, ok.failed())
	}
}
