package kgoproof

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lines keeps a client's kgo log.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *lines) Log(_ kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.l = append(l.l, fmt.Sprintf("%s %v", msg, kv))
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.l)
}

// A client's first transaction to a topic: a produce kgo acknowledged, then
// EndTransaction(TryCommit) answering nil, must leave the record committed
// (read_committed sees it).
//
// Run by scripts/kgo-drop-proof.sh only (KGO_PROOF_DELAY set): against an
// unpatched kgo the window opens a few times in a thousand runs under CPU
// load, and this raw use of kgo has no defence, so in the normal suite it
// would be a flake by design.
func TestEndTransactionNilMeansCommitted(t *testing.T) {
	if _, ok := os.LookupEnv("KGO_PROOF_DELAY"); !ok {
		t.Skip("scripts/kgo-drop-proof.sh runs this (KGO_PROOF_DELAY unset)")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	log := &lines{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"), kgo.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Skipf("EndTransaction(TryCommit) returned %v: an error is an honest answer", err)
	}

	// A plain producer's record after it bounds the read: once it is read,
	// everything before it that committed has been read too.
	pl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if err := pl.ProduceSync(ctx, &kgo.Record{Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var read []string
	for !slices.Contains(read, "end") && rctx.Err() == nil {
		rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
	}
	if !slices.Contains(read, "end") {
		t.Fatalf("the plain record after the transaction was not read within 10 s (read %q)", read)
	}
	if !slices.Contains(read, "first") {
		var said []string
		for _, l := range log.all() {
			if strings.Contains(l, "abort") {
				said = append(said, l)
			}
		}
		t.Fatalf("EndTransaction(TryCommit) returned nil, but the transaction's record is not committed (read_committed read %q); kgo logged: %q", read, said)
	}
}
