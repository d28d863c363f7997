package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// restartableConsumer is testConsumer owning tp, bound under its member, on
// a kfake broker with topic "in" and the group's committed offset 7: enough
// for a restart's offset fetch.
func restartableConsumer(t *testing.T, h Handler, tp TopicPartition) (*Consumer, *kgo.Client) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c := testConsumer(cl, h, tp)
	c.adm = kadm.NewClient(cl)
	c.log = zaptest.NewLogger(t)
	// An assignment's background list of end offsets (seedHighWatermarks)
	// ends before the client closes and the test does: it logged through t
	// after the test had ended (a race CI's detector caught).
	t.Cleanup(c.seeds.Wait)
	c.cfg.Group, c.cfg.Topic, c.cfg.RebalanceTimeout = "g", "in", 30*time.Second
	c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
	var offs kadm.Offsets
	offs.AddOffset(tp.Topic, tp.Partition, 7, -1)
	if _, err := c.adm.CommitOffsets(context.Background(), "g", offs); err != nil {
		t.Fatal(err)
	}
	return c, cl
}

func TestPollFence(t *testing.T) {
	tp, other := TopicPartition{"in", 0}, TopicPartition{"in", 1}
	f := newPollFence()
	woken := 0
	wake := func() { woken++ }

	before, due := f.startPoll(wake) // a poll under way when tp is sought
	if len(due) != 0 || !f.current(tp, before) {
		t.Fatalf("a partition never sought: due %v, current %v", due, f.current(tp, before))
	}
	f.seek(tp)
	if f.current(tp, before) {
		t.Fatal("the records of a poll begun before the seek were current")
	}
	if !f.current(other, before) {
		t.Fatal("a seek of one partition dropped another's records")
	}
	during, due := f.startPoll(wake) // begun after the seek, before the start: tp still paused
	if len(due) != 0 {
		t.Fatalf("resumed %v before its start", due)
	}
	if !f.current(tp, during) {
		t.Fatal("a poll begun after the seek was not current")
	}
	f.resumeAfterSeek(tp)
	if woken != 1 {
		t.Fatalf("woken %d times, want 1: a poll blocked on the other partitions would hold the resume back", woken)
	}
	after, due := f.startPoll(wake)
	if !slices.Equal(due, []TopicPartition{tp}) || !f.current(tp, after) {
		t.Fatalf("the next poll: due %v, current %v", due, f.current(tp, after))
	}
	if _, due := f.startPoll(wake); len(due) != 0 {
		t.Fatalf("resumed again: %v", due)
	}

	// A resume voided by a later seek, or forgotten by a stop.
	f.resumeAfterSeek(tp)
	f.seek(tp)
	if _, due := f.startPoll(wake); len(due) != 0 {
		t.Fatalf("a resume from before the latest seek ran: %v", due)
	}
	f.resumeAfterSeek(tp)
	if !f.forget(tp) || f.forget(tp) {
		t.Fatal("forget did not report the pending resume once")
	}
	if _, due := f.startPoll(wake); len(due) != 0 {
		t.Fatalf("a forgotten resume ran: %v", due)
	}
}

// recordingDeliver is a Handler that records what is delivered.
type recordingDeliver struct {
	nopHandler
	got map[TopicPartition][]int64
}

func (r *recordingDeliver) Deliver(tp TopicPartition, recs []*kgo.Record, _ bool) {
	for _, rec := range recs {
		r.got[tp] = append(r.got[tp], rec.Offset)
	}
}

func fetchOf(tp TopicPartition, offsets ...int64) kgo.Fetches {
	fp := kgo.FetchPartition{Partition: tp.Partition, HighWatermark: -1, LastStableOffset: -1}
	for _, o := range offsets {
		fp.Records = append(fp.Records, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: o, Value: []byte("v")})
	}
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: tp.Topic, Partitions: []kgo.FetchPartition{fp}}}}}
}

// A poll that returned records from kgo's old position just before a failed
// partition's restart sought it back to its committed offset, and took the
// delivery lock only after the restart released it, handed the new copy
// records from past its committed offset: the copy folded them first and
// skipped the records before them as replays (found by a review). They are
// dropped now, and the partition stays paused until a poll begun after its
// seek.
func TestAPollFromBeforeARestartsSeekDeliversNothing(t *testing.T) {
	tp := TopicPartition{"in", 0}
	h := &recordingDeliver{got: map[TopicPartition][]int64{}}
	c, cl := restartableConsumer(t, h, tp)
	c.PartitionFailed(tp, errors.New("poison"))
	_, stale, seq := c.beginPoll(context.Background()) // the poll returns old records...
	defer stale()
	c.restart(context.Background(), tp) // ...the restart seeks and starts the partition meanwhile...
	c.mu.Lock()
	failed := c.failed[tp]
	c.mu.Unlock()
	if failed != nil {
		t.Fatalf("not started again: %v", failed.Err)
	}
	c.handOver(context.Background(), seq, fetchOf(tp, 40, 41)) // ...and hands them over after it
	if len(h.got[tp]) != 0 {
		t.Fatalf("delivered %v from a poll begun before the seek", h.got[tp])
	}
	if _, ok := cl.PauseFetchPartitions(nil)[tp.Topic]; !ok {
		t.Fatal("not paused after its seek: a poll under way could return records from both positions")
	}
	_, next, seq := c.beginPoll(context.Background())
	defer next()
	if paused := cl.PauseFetchPartitions(nil); len(paused) != 0 {
		t.Fatalf("still paused at the next poll: %v", paused)
	}
	c.handOver(context.Background(), seq, fetchOf(tp, 7, 8))
	if !slices.Equal(h.got[tp], []int64{7, 8}) {
		t.Fatalf("delivered %v, want the next poll's [7 8]", h.got[tp])
	}
}

// failingStart is a Handler whose partitions fail as they start, reporting
// their failure to c before Start returns.
type failingStart struct {
	nopHandler
	c *Consumer
}

func (f failingStart) Start(_ context.Context, assigned map[TopicPartition]snapshotstore.Assignment) error {
	for tp := range assigned {
		f.c.PartitionFailed(tp, errors.New("the new copy failed at once"))
	}
	return nil
}

// A failure the restarted copy reports before the restart's own bookkeeping
// is the new copy's: the restart deleted it with its own after the start,
// and resumed fetching, leaving the partition owned with nothing running
// it and never started again (found by a review).
func TestAFailureReportedDuringARestartStays(t *testing.T) {
	tp := TopicPartition{"in", 0}
	h := &failingStart{}
	c, cl := restartableConsumer(t, h, tp)
	h.c = c
	c.PartitionFailed(tp, errors.New("poison"))
	c.restart(context.Background(), tp)
	c.mu.Lock()
	f := c.failed[tp]
	c.mu.Unlock()
	if f == nil {
		t.Fatal("the new copy's failure was erased: the partition runs nothing and is never started again")
	}
	_, wake, _ := c.beginPoll(context.Background())
	defer wake()
	if _, ok := cl.PauseFetchPartitions(nil)[tp.Topic]; !ok {
		t.Fatal("a failed partition was resumed")
	}
}

// A partition kgo kept across a membership change is re-acquired here: kgo
// fetched it from its own position meanwhile, and a poll that returned
// those records before the assignment paused it was handed over once the
// partition was owned again, counted in its new budget (never released:
// its copy did not exist yet, or, later, got records from past its
// committed offset). Found by a review.
//
// The same for a partition assigned again, not kept (revoked or lost, then
// assigned back: eager rebalances, a KIP-848 rejoin after a fenced epoch):
// a poll that returned its records from before the revoke, and took the
// delivery lock only after the new assignment, handed them to the new copy,
// which folded them first and skipped the records before them as replays.
// Found by a review too.
func TestAPollFromBeforeAnAssignmentDeliversNothing(t *testing.T) {
	for _, kept := range []bool{true, false} {
		t.Run(fmt.Sprintf("kept=%v", kept), func(t *testing.T) {
			tp := TopicPartition{"in", 0}
			h := &recordingDeliver{got: map[TopicPartition][]int64{}}
			c, cl := restartableConsumer(t, h, tp)
			c.mu.Lock()
			delete(c.owned, tp) // lost with the membership (kgo kept fetching it), or revoked
			c.mu.Unlock()
			var keptTPs []TopicPartition
			if kept {
				keptTPs = []TopicPartition{tp}
			}
			_, stale, seq := c.beginPoll(context.Background()) // the poll returns records from before...
			defer stale()
			if err := c.assign(context.Background(), []TopicPartition{tp}, keptTPs); err != nil { // ...assigned meanwhile...
				t.Fatal(err)
			}
			c.handOver(context.Background(), seq, fetchOf(tp, 40, 41)) // ...and hands them over after it
			if len(h.got[tp]) != 0 || c.fc.InFlight(tp) != 0 {
				t.Fatalf("delivered %v (in flight %d) from a poll begun before the assignment", h.got[tp], c.fc.InFlight(tp))
			}
			_, next, seq := c.beginPoll(context.Background())
			defer next()
			if paused := cl.PauseFetchPartitions(nil); len(paused) != 0 {
				t.Fatalf("still paused at the next poll: %v", paused)
			}
			c.handOver(context.Background(), seq, fetchOf(tp, 7))
			if !slices.Equal(h.got[tp], []int64{7}) {
				t.Fatalf("delivered %v, want the next poll's [7]", h.got[tp])
			}
		})
	}
}

// A committed offset below the input's log start (records deleted by
// retention before the group processed them) is warned of at the
// assignment, naming the partition, both offsets and how many records are
// lost: kgo resets such a fetch to the log start without a word (found by
// a review).
func TestACommittedOffsetBelowTheLogStartIsWarnedOf(t *testing.T) {
	tp := TopicPartition{"in", 0}
	c, cl := restartableConsumer(t, nopHandler{}, tp) // committed 7
	core, logs := observer.New(zapcore.WarnLevel)
	c.log = zap.New(core)
	recs := make([]*kgo.Record, 12)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Value: []byte("v")}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil { // "in" has one partition
		t.Fatal(err)
	}
	var del kadm.Offsets
	del.AddOffset("in", 0, 10, -1)
	if _, err := c.adm.DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	got, err := c.assignedOffsets(context.Background(), []TopicPartition{tp}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if a := got[tp]; a.Offset != 7 || a.LogStart != 10 || !a.Committed {
		t.Fatalf("assignment %+v, want committed 7 with log start 10", a)
	}
	w := logs.FilterMessageSnippet("below the input's log start").All()
	if len(w) != 1 || w[0].ContextMap()["records_lost"] != int64(3) || w[0].ContextMap()["committed"] != int64(7) || w[0].ContextMap()["log_start"] != int64(10) {
		t.Fatalf("warnings %v, want one naming committed 7, log start 10, 3 records lost", w)
	}
}
