package keyflowtest_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The driver and a worker's partition actor (package partitionflow, over
// the in-memory store in the transactional mode) fold the same records of
// the same flow into the same snapshots and the same outputs and dead
// letters, per key in the same order: the driver runs the runtime's key
// actors, not a re-implementation.
func TestDriverAgreesWithThePartitionRuntime(t *testing.T) {
	flow := func() *keyflow.Flow[tally] {
		return sumFlow(keyflow.WithFoldErrorPolicy(keyflow.DeadLetter), keyflow.WithUndecodablePolicy(keyflow.Skip),
			keyflow.WithNilKeyPolicy(keyflow.DeadLetter))
	}
	var recs []*kgo.Record
	for i := range 60 {
		v := strconv.Itoa(i % 7)
		switch i % 11 {
		case 3:
			v = "x" // undecodable: skipped
		case 5:
			v = "101" // fold error after an in-place change: dead-lettered
		}
		var key []byte
		if i%13 != 12 {
			key = []byte("k" + strconv.Itoa(i%5))
		}
		recs = append(recs, &kgo.Record{Topic: keyflowtest.DefaultTopic, Offset: int64(i), Key: key, Value: []byte(v)})
	}

	// The runtime: one partition actor over the in-memory store.
	mem := snapshotstore.NewMemory()
	mem.TransactionalOutputs = true
	commits := make(chan struct{}, 1)
	mem.AfterCommit = func(snapshotstore.PartitionInfo, snapshotstore.Batch) {
		select {
		case commits <- struct{}{}:
		default:
		}
	}
	store, err := mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: keyflowtest.DefaultTopic})
	if err != nil {
		t.Fatal(err)
	}
	sys := actors.NewSystem(nil)
	stopped := make(chan error, 1)
	pid := sys.Root.Spawn(partitionflow.Props(partitionflow.Config{
		Topic: keyflowtest.DefaultTopic, Store: store, Handler: keyactor.MustOf(flow()),
		PersistEvery: 5 * time.Millisecond, CommitOffsetsInterval: 5 * time.Millisecond,
		OnStopped: func(err error) { stopped <- err },
	}))
	defer func() {
		sys.Root.Send(pid, &partitionflow.Revoke{})
		<-stopped
	}()
	var copies []*kgo.Record
	for _, r := range recs {
		c := *r
		copies = append(copies, &c)
	}
	sys.Root.Send(pid, &partitionflow.Records{Records: copies})
	timeout := time.After(10 * time.Second)
	for mem.Committed(keyflowtest.DefaultTopic, 0) < int64(len(recs)) {
		select {
		case <-commits:
		case err := <-stopped:
			t.Fatalf("partition stopped: %v", err)
		case <-timeout:
			t.Fatalf("offset %d not committed (at %d)", len(recs), mem.Committed(keyflowtest.DefaultTopic, 0))
		}
	}

	// The driver, one record at a time.
	d := newDriver(t, flow())
	for _, r := range recs {
		c := *r
		c.Offset = 0
		must(t, d.PipeRecord(&c))
	}

	latest := mem.Latest(keyflowtest.DefaultTopic, 0)
	for k := range 5 {
		key := "k" + strconv.Itoa(k)
		got, ok := d.State(key)
		want, err := keyactor.MustOf(flow()).(*keyactor.Flow[tally]).Codec.Decode(latest[key].Value)
		if err != nil || !ok {
			t.Fatalf("%s: driver %v, runtime %v", key, ok, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(*want) {
			t.Errorf("%s: driver %+v, runtime %+v", key, got, *want)
		}
	}
	perKey := func(rs []*kgo.Record) map[string][]string {
		m := map[string][]string{}
		for _, r := range rs {
			var hs []string
			for _, h := range r.Headers {
				if h.Key != keyflow.HeaderErrorTime { // the clock differs
					hs = append(hs, h.Key+"="+string(h.Value))
				}
			}
			k := r.Topic + "/" + string(r.Key)
			m[k] = append(m[k], fmt.Sprintf("%s %v", r.Value, hs))
		}
		return m
	}
	driverOut := d.Outputs()
	for _, dl := range d.DeadLetters() {
		driverOut = append(driverOut, dl.Record)
	}
	// The outputs of one key, and its dead letters, are in one order in
	// both; across keys the runtime interleaves them as its actors run.
	want, got := perKey(mem.Outputs(keyflowtest.DefaultTopic, 0)), perKey(driverOut)
	if len(want) == 0 || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("outputs and dead letters per key:\nruntime %v\ndriver  %v", want, got)
	}
	if n := len(d.DeadLetters()); n < 6 {
		t.Errorf("%d dead letters: the records exercise too little", n)
	}
}
