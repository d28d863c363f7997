package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
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
// not the at-least-once one (duplicates and order there are allowed).
func TestCheckOutputsCountsPerKey(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := createTopic(context.Background(), cl, "out", 1); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, o := range []ledger.Output{{Account: "a", Seq: 1}, {Account: "a", Seq: 2}, {Account: "a", Seq: 2}, {Account: "b", Seq: 2}, {Account: "b", Seq: 1}, {Account: "c", Seq: 1}} {
		b, _ := json.Marshal(o)
		recs = append(recs, &kgo.Record{Key: []byte(o.Account), Value: b})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	exp := map[string]*ledger.State{"a": {LastSeq: 2}, "b": {LastSeq: 2}, "c": {LastSeq: 3}}
	r := &report{ExactlyOnce: true}
	if err := checkOutputs(context.Background(), brokers, "out", exp, r); err != nil {
		t.Fatal(err)
	}
	if r.Outputs != 6 || r.OutputDuplicates != 1 || r.KeysWithDuplicates != 1 || r.MissingOutputs != 2 || r.KeysWithMissing != 1 || r.OutputsOutOfOrder != 1 {
		t.Fatalf("report %+v: want 6 outputs, 1 duplicate (a), 2 missing (c), 1 out of order (b)", r)
	}
	if len(r.OutputExamples) != 3 || !r.outputsFailed() {
		t.Fatalf("examples %q, failed %v: want one line per bad account and a failure", r.OutputExamples, r.outputsFailed())
	}
	r.ExactlyOnce = false
	if r.outputsFailed() {
		t.Fatal("at-least-once check failed on duplicates")
	}
}
