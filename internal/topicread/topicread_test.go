package topicread_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/internal/topicread"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transaction open at the topic's end when the read lists its end
// offsets, then aborted: its records below the end are never delivered
// (read_committed) and its marker lands past the end. The read ends there
// instead of waiting for a record at end−1 until its context expires.
func TestScanEndsAtATransactionAbortedAfterItsEndOffsets(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic("out"), kgo.TransactionalID("t"))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	committed := &kgo.Record{Value: []byte("committed")}
	if err := cl.ProduceSync(ctx, committed).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := kgotxn.EndTransaction(ctx, cl, kgo.TryCommit, 10*time.Second, committed); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// kfake answers requests one at a time: the read's end offsets are
	// listed before the abort below is handled.
	listed := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(listed) }) // an unhandled control stays installed
		return nil, nil, false
	})
	done := make(chan error, 1)
	var got []string
	go func() {
		done <- topicread.Scan(ctx, brokers, "out", kgo.ReadCommitted(), func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				got = append(got, string(r.Value))
			}
		})
	}()
	<-listed
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Scan = %v, want nil once the abort marker is read", err)
	}
	if len(got) != 1 || got[0] != "committed" {
		t.Fatalf("read %q, want the committed record only", got)
	}
}

// A partition whose records were all deleted (its log start at its end)
// has nothing to read: the read ends instead of waiting for a record that
// will never come.
func TestScanSkipsAPartitionDeletedToItsEnd(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("a")}, &kgo.Record{Partition: p, Value: []byte("b")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "t", Partition: 0, At: 2})
	if res, err := adm.DeleteRecords(ctx, del); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	var got []string
	if err := topicread.Scan(ctx, brokers, "t", kgo.ReadCommitted(), func(r *kgo.Record) { got = append(got, string(r.Value)) }); err != nil {
		t.Fatalf("Scan = %v, want the read of partition 1 alone", err)
	}
	if len(got) != 2 {
		t.Fatalf("read %q, want partition 1's two records", got)
	}
}
