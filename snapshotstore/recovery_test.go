package snapshotstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// testTimeout bounds every wait: an event that does not happen within it is
// a hang.
const testTimeout = 10 * time.Second

type endsResult struct {
	hwm, lso int64
	err      error
}

type pollResult struct {
	recs []*kgo.Record
	next int64 // the read position after the fetch
	err  error
}

// scriptedLog is a LogReader driven by the test. Ends answers from a script
// (the last entry repeats). Poll blocks, like a fetch the broker holds, until
// the test feeds a result or the poll's context ends; every call is announced
// on polls with its context. Once the fed results are used up, while a
// sticky error is set, every Poll returns it at once (a broker that keeps
// failing).
type scriptedLog struct {
	mu     sync.Mutex
	ends   []endsResult
	nEnds  int
	sticky error

	feed  chan pollResult
	polls chan context.Context
}

func newScriptedLog(ends ...endsResult) *scriptedLog {
	return &scriptedLog{ends: ends, feed: make(chan pollResult, 100), polls: make(chan context.Context, 100)}
}

func (l *scriptedLog) Ends(context.Context) (int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.ends[min(l.nEnds, len(l.ends)-1)]
	l.nEnds++
	return e.hwm, e.lso, e.err
}

func (l *scriptedLog) endsCalls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nEnds
}

func (l *scriptedLog) Poll(ctx context.Context) ([]*kgo.Record, int64, error) {
	select {
	case l.polls <- ctx:
	default: // a test that does not watch the polls
	}
	select {
	case r := <-l.feed: // fed results first
		return r.recs, r.next, r.err
	default:
	}
	l.mu.Lock()
	sticky := l.sticky
	l.mu.Unlock()
	if sticky != nil {
		return nil, 0, sticky
	}
	select {
	case r := <-l.feed:
		return r.recs, r.next, r.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// give queues records for a later poll, one poll per call; the position
// after it is the last record's offset + 1, as for a fetch whose last batch
// ends with a record.
func (l *scriptedLog) give(recs ...*kgo.Record) {
	var next int64
	if len(recs) > 0 {
		next = recs[len(recs)-1].Offset + 1
	}
	l.feed <- pollResult{recs: recs, next: next}
}

// giveAt queues a poll that returns recs and leaves the position at next,
// which may be past the last record: the fetch passed batches that yielded
// no record.
func (l *scriptedLog) giveAt(next int64, recs ...*kgo.Record) {
	l.feed <- pollResult{recs: recs, next: next}
}

// fail queues a poll that fails with err.
func (l *scriptedLog) fail(err error) { l.feed <- pollResult{err: err} }

// failAlways makes every poll fail with err.
func (l *scriptedLog) failAlways(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sticky = err
}

// awaitPoll returns the context of the next Poll call.
func (l *scriptedLog) awaitPoll(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-l.polls:
		return ctx
	case <-time.After(testTimeout):
		t.Fatal("the read did not poll")
		return nil
	}
}

func dataRec(offset int64) *kgo.Record {
	return &kgo.Record{Topic: "snaps", Partition: 0, Offset: offset, Key: fmt.Appendf(nil, "k%d", offset)}
}

// controlRec is a transaction marker, as kgo returns it with
// KeepControlRecords.
func controlRec(offset int64) *kgo.Record {
	return &kgo.Record{Topic: "snaps", Partition: 0, Offset: offset,
		Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})}
}

func recs(from, to int64) []*kgo.Record {
	var out []*kgo.Record
	for o := from; o <= to; o++ {
		out = append(out, dataRec(o))
	}
	return out
}

// read runs ReadToTarget in the background, recording the offsets fn saw.
type read struct {
	mu   sync.Mutex
	seen []int64
	done chan error
}

func startRead(ctx context.Context, l snapshotstore.LogReader, o snapshotstore.ReadOptions) *read {
	r := &read{done: make(chan error, 1)}
	go func() {
		r.done <- snapshotstore.ReadToTarget(ctx, l, o, func(rec *kgo.Record) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen = append(r.seen, rec.Offset)
			return nil
		})
	}()
	return r
}

func (r *read) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(testTimeout):
		t.Fatal("the read did not return")
		return nil
	}
}

func (r *read) offsets() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.seen)
}

func TestControlRecordHelperSetsTheControlBit(t *testing.T) {
	if !controlRec(0).Attrs.IsControl() || dataRec(0).Attrs.IsControl() {
		t.Fatal("kgo.NewRecordAttrs does not build the control bit the read checks")
	}
}

// The read's target is the high watermark, not the LSO: with an open
// transaction pinning the LSO at 5, a read bounded by the LSO would stop
// after offset 4 and silently miss 5..9 (KAFKA-10167).
func TestReadToTargetReadsToHighWatermarkNotLSO(t *testing.T) {
	l := newScriptedLog(endsResult{hwm: 10, lso: 5})
	l.give(recs(0, 4)...)
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[0]", StallTimeout: time.Minute})
	l.awaitPoll(t) // the first poll returns 0..4
	l.awaitPoll(t) // at position 5 (the LSO) the read polls again: it did not stop
	select {
	case err := <-r.done:
		t.Fatalf("the read returned (%v) at the LSO with records 5..9 unread", err)
	default:
	}
	l.give(recs(5, 9)...) // the transaction resolves
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if got := r.offsets(); got != fmt.Sprint([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("fn saw %s, want 0..9", got)
	}
}

func TestReadToTargetControlRecordsAdvanceWithoutCallingFn(t *testing.T) {
	// 0..2 committed data, 3 its commit marker, 4 aborted data (hidden by
	// read_committed), 5 the abort marker: the target 6 is reachable only
	// through the markers.
	l := newScriptedLog(endsResult{hwm: 6, lso: 6})
	l.give(dataRec(0), dataRec(1), dataRec(2), controlRec(3))
	l.give(controlRec(5))
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: time.Minute})
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if got := r.offsets(); got != "[0 1 2]" {
		t.Fatalf("fn saw %s, want only the data records [0 1 2]", got)
	}
}

func TestReadToTargetEmptyPartitionReturnsWithoutPolling(t *testing.T) {
	l := newScriptedLog(endsResult{hwm: 0, lso: 0})
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{})
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.polls:
		t.Fatal("an empty partition was polled")
	default:
	}
}

func TestReadToTargetLogStartingAboveZero(t *testing.T) {
	// Compaction/retention removed the head: the first record is 100.
	l := newScriptedLog(endsResult{hwm: 103, lso: 103})
	l.give(dataRec(100), dataRec(102))
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: time.Minute})
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if got := r.offsets(); got != "[100 102]" {
		t.Fatalf("fn saw %s", got)
	}
}

func TestReadToTargetStallDiagnosis(t *testing.T) {
	rereadFailed := errors.New("list offsets: NOT_LEADER_OR_FOLLOWER")
	for _, tc := range []struct {
		name      string
		reread    endsResult
		cause     snapshotstore.StallCause
		logEnd    int64
		rereadErr error
	}{
		{"log end below the target: truncation", endsResult{hwm: 7, lso: 7}, snapshotstore.StallTruncation, 7, nil},
		{"log end at the target: open transaction", endsResult{hwm: 10, lso: 5}, snapshotstore.StallOpenTransaction, 10, nil},
		{"log end above the target: open transaction", endsResult{hwm: 15, lso: 5}, snapshotstore.StallOpenTransaction, 15, nil},
		{"failing re-read never masks the stall", endsResult{err: rereadFailed}, snapshotstore.StallUnknown, -1, rereadFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const stall = 30 * time.Millisecond
			l := newScriptedLog(endsResult{hwm: 10, lso: 5}, tc.reread)
			l.give(recs(0, 4)...)
			start := time.Now()
			r := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[3]", StallTimeout: stall})
			err := r.wait(t)
			var se *snapshotstore.RecoveryReadStalledError
			if !errors.As(err, &se) {
				t.Fatalf("read error %v (%T), want a *RecoveryReadStalledError", err, err)
			}
			if se.Cause != tc.cause {
				t.Errorf("Cause = %v, want %v", se.Cause, tc.cause)
			}
			if se.Partition != "snaps[3]" || se.Target != 10 || se.Position != 5 || se.LogEnd != tc.logEnd {
				t.Errorf("stall = {Partition %q Target %d Position %d LogEnd %d}, want {snaps[3] 10 5 %d}",
					se.Partition, se.Target, se.Position, se.LogEnd, tc.logEnd)
			}
			if se.Stalled < stall {
				t.Errorf("Stalled = %s, below the stall timeout %s", se.Stalled, stall)
			}
			if elapsed := time.Since(start); elapsed < stall {
				t.Errorf("the read failed after %s, before the stall timeout %s", elapsed, stall)
			}
			if tc.rereadErr != nil {
				if !errors.Is(se.ReReadErr, tc.rereadErr) || !errors.Is(err, tc.rereadErr) {
					t.Errorf("ReReadErr = %v (errors.Is(err) %v), want the re-read error", se.ReReadErr, errors.Is(err, tc.rereadErr))
				}
			} else if se.ReReadErr != nil {
				t.Errorf("ReReadErr = %v, want nil", se.ReReadErr)
			}
			if n := l.endsCalls(); n != 2 {
				t.Errorf("Ends called %d times, want 2 (capture, then the re-read at the stall)", n)
			}
			if se.Error() == "" || r.offsets() != "[0 1 2 3 4]" {
				t.Errorf("Error() = %q, fn saw %s", se.Error(), r.offsets())
			}
		})
	}
}

// Every advance resets the no-progress deadline: a read that progresses in
// gaps shorter than the stall timeout completes, however long it takes in
// total.
func TestReadToTargetProgressingReadOutlivesTheStallTimeout(t *testing.T) {
	const (
		stall = 200 * time.Millisecond
		gap   = 30 * time.Millisecond // well below the stall timeout, even on a loaded -race run
		n     = 10                    // n × gap = 1.5 × stall
	)
	l := newScriptedLog(endsResult{hwm: n, lso: n})
	start := time.Now()
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: stall})
	for o := range int64(n) {
		var ctx context.Context
		select {
		case ctx = <-l.polls:
		case err := <-r.done:
			t.Fatalf("the read returned before record %d: %v", o, err)
		case <-time.After(testTimeout):
			t.Fatal("the read did not poll")
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > stall {
			t.Fatalf("poll %d: deadline %v (set %v), want at most the stall timeout ahead", o, time.Until(dl), ok)
		}
		time.Sleep(gap) // slow, but within the deadline
		l.give(dataRec(o))
	}
	if err := r.wait(t); err != nil {
		t.Fatalf("a progressing read failed: %v", err)
	}
	if elapsed := time.Since(start); elapsed <= stall {
		t.Fatalf("the read took %s, not longer than the stall timeout %s: the test proved nothing", elapsed, stall)
	}
	if n := l.endsCalls(); n != 1 {
		t.Fatalf("Ends called %d times: a stall was diagnosed", n)
	}
}

// With no stall timeout (the plain mode) the read waits unbounded.
func TestReadToTargetWithoutStallTimeoutWaits(t *testing.T) {
	const wouldHaveFired = 50 * time.Millisecond
	l := newScriptedLog(endsResult{hwm: 3, lso: 1})
	l.give(dataRec(0))
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: 0})
	l.awaitPoll(t)
	ctx := l.awaitPoll(t) // blocked at position 1
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 30*time.Second {
		t.Fatalf("poll has a deadline %v with StallTimeout 0, want none but the minute's warning", dl)
	}
	select {
	case err := <-r.done:
		t.Fatalf("the read returned (%v) while blocked below its target", err)
	case <-time.After(wouldHaveFired):
	}
	l.give(dataRec(1), controlRec(2))
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if got := r.offsets(); got != "[0 1]" {
		t.Fatalf("fn saw %s", got)
	}
}

func TestReadToTargetContextCancellation(t *testing.T) {
	for _, stall := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprint("stall=", stall), func(t *testing.T) {
			l := newScriptedLog(endsResult{hwm: 5, lso: 5})
			ctx, cancel := context.WithCancel(context.Background())
			r := startRead(ctx, l, snapshotstore.ReadOptions{Partition: "snaps[1]", StallTimeout: stall})
			l.awaitPoll(t)
			cancel()
			err := r.wait(t)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("read error %v, want one wrapping context.Canceled", err)
			}
			var se *snapshotstore.RecoveryReadStalledError
			if errors.As(err, &se) {
				t.Fatalf("a cancellation was reported as a stall: %v", err)
			}
		})
	}
}

func TestReadToTargetCaptureFailure(t *testing.T) {
	boom := errors.New("list offsets failed")
	l := newScriptedLog(endsResult{err: boom})
	err := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[2]"}).wait(t)
	if !errors.Is(err, boom) {
		t.Fatalf("read error %v, want one wrapping the capture error", err)
	}
}

// A fetch error that retrying cannot heal fails the read at once, in both
// modes, not at the stall deadline.
func TestReadToTargetPermanentFetchErrorFails(t *testing.T) {
	for _, boom := range []error{kerr.TopicAuthorizationFailed, errors.New("invalid record batch: negative record count -3")} {
		for _, stall := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprint(boom, "/stall=", stall), func(t *testing.T) {
				l := newScriptedLog(endsResult{hwm: 5, lso: 5})
				l.fail(boom)
				err := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: stall}).wait(t)
				var se *snapshotstore.RecoveryReadStalledError
				if !errors.Is(err, boom) || errors.As(err, &se) {
					t.Fatalf("read error %v, want one wrapping the poll error, not a stall", err)
				}
			})
		}
	}
}

// A transient fetch error (a leader moving, a broker restarting, a request
// timing out) is retried: the read completes once the fetches work again.
func TestReadToTargetRetriesTransientFetchErrors(t *testing.T) {
	for _, stall := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprint("stall=", stall), func(t *testing.T) {
			l := newScriptedLog(endsResult{hwm: 5, lso: 5})
			l.give(recs(0, 1)...)
			l.fail(kerr.NotLeaderForPartition)
			l.fail(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
			l.fail(fmt.Errorf("snaps[0]: fetch at 2: %w", kerr.RequestTimedOut))
			l.give(recs(2, 4)...)
			err := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[0]", StallTimeout: stall}).wait(t)
			if err != nil {
				t.Fatalf("a read with transient fetch errors failed: %v", err)
			}
			if n := l.endsCalls(); n != 1 {
				t.Fatalf("Ends called %d times: a stall was diagnosed", n)
			}
		})
	}
}

// Fetches that keep failing transiently fail the read at the stall deadline,
// as a stall whose diagnosis names the fetch error.
func TestReadToTargetTransientFetchErrorsUntilTheStallDeadline(t *testing.T) {
	const stall = 100 * time.Millisecond
	l := newScriptedLog(endsResult{hwm: 5, lso: 5})
	l.give(recs(0, 1)...)
	l.failAlways(kerr.NotLeaderForPartition)
	start := time.Now()
	err := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[4]", StallTimeout: stall}).wait(t)
	var se *snapshotstore.RecoveryReadStalledError
	if !errors.As(err, &se) {
		t.Fatalf("read error %v (%T), want a *RecoveryReadStalledError", err, err)
	}
	if se.Cause != snapshotstore.StallFetchError || !errors.Is(se.FetchErr, kerr.NotLeaderForPartition) || !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("stall = {Cause %v FetchErr %v}, want StallFetchError with NOT_LEADER_OR_FOLLOWER", se.Cause, se.FetchErr)
	}
	if se.Position != 2 || se.Partition != "snaps[4]" {
		t.Fatalf("stall at %s position %d, want snaps[4] position 2", se.Partition, se.Position)
	}
	if elapsed := time.Since(start); elapsed < stall {
		t.Fatalf("the read failed after %s, before the stall timeout %s", elapsed, stall)
	}
}

// Compaction removes records at the end of the log while keeping the
// position: a cleaned batch keeps its last offset (KAFKA-5443), emptied
// batches stay as headers, and read_committed skips aborted batches. The
// fetch position passes them without returning a record, and so must the
// read: tracking only the records received, it never reached the target (a
// false stall in the transactional mode, a hang in the plain mode).
func TestReadToTargetFollowsTheFetchPositionPastRemovedRecords(t *testing.T) {
	for _, stall := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(fmt.Sprint("stall=", stall), func(t *testing.T) {
			l := newScriptedLog(endsResult{hwm: 10, lso: 10})
			l.giveAt(7, dataRec(0), dataRec(1), dataRec(2), dataRec(4)) // 3, 5, 6 cleaned; the batch ends at 6
			l.giveAt(10)                                                // 7..9: batches that yield nothing
			r := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: stall})
			if err := r.wait(t); err != nil {
				t.Fatalf("read past removed records: %v", err)
			}
			if got := r.offsets(); got != "[0 1 2 4]" {
				t.Fatalf("fn saw %s, want [0 1 2 4]", got)
			}
		})
	}
}

// An advance of the fetch position alone is progress: it resets the stall
// deadline.
func TestReadToTargetPositionOnlyProgressResetsTheStallDeadline(t *testing.T) {
	const (
		// Wide enough that a loaded machine's scheduling (seen: 260 ms
		// before the first poll, with a chaos run beside it) stays within
		// a stall.
		stall = time.Second
		gap   = 150 * time.Millisecond
		n     = 10 // n × gap = 1.5 × stall
	)
	l := newScriptedLog(endsResult{hwm: n, lso: n})
	start := time.Now()
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: stall})
	for o := range int64(n) {
		select {
		case <-l.polls:
		case err := <-r.done:
			t.Fatalf("the read returned at position %d: %v", o, err)
		case <-time.After(testTimeout):
			t.Fatal("the read did not poll")
		}
		time.Sleep(gap)
		l.giveAt(o + 1) // an empty batch per poll
	}
	if err := r.wait(t); err != nil {
		t.Fatalf("a read progressing by position only failed: %v", err)
	}
	if elapsed := time.Since(start); elapsed <= stall {
		t.Fatalf("the read took %s, not longer than the stall timeout %s: the test proved nothing", elapsed, stall)
	}
}

// A reported position behind the read position never moves it back.
func TestReadToTargetPositionNeverMovesBack(t *testing.T) {
	l := newScriptedLog(endsResult{hwm: 8, lso: 8})
	l.give(recs(0, 4)...)
	l.giveAt(2)
	err := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: 50 * time.Millisecond}).wait(t)
	var se *snapshotstore.RecoveryReadStalledError
	if !errors.As(err, &se) || se.Position != 5 {
		t.Fatalf("read error %v, want a stall at position 5", err)
	}
}

func TestReadToTargetFnErrorStopsTheRead(t *testing.T) {
	boom := errors.New("decode failed")
	l := newScriptedLog(endsResult{hwm: 5, lso: 5})
	l.give(recs(0, 4)...)
	calls := 0
	err := snapshotstore.ReadToTarget(context.Background(), l, snapshotstore.ReadOptions{}, func(rec *kgo.Record) error {
		calls++
		if rec.Offset == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 3 {
		t.Fatalf("ReadToTarget = %v after %d calls, want the fn error after 3", err, calls)
	}
}

// A transaction the broker left hanging on the snapshot partition holds the
// read below its target for ever: after ResolveAfter without progress the
// read asks for it to be ended, and goes on once it is.
func TestReadToTargetResolvesAHangingTransaction(t *testing.T) {
	l := newScriptedLog(endsResult{hwm: 10, lso: 5})
	l.give(recs(0, 4)...)
	called := make(chan struct{}, 10)
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{
		Partition: "snaps[0]", StallTimeout: time.Minute, ResolveAfter: 20 * time.Millisecond,
		ResolveHanging: func(context.Context) (int, error) {
			called <- struct{}{}
			l.give(recs(5, 9)...) // the hanging transaction's markers land
			return 1, nil
		},
	})
	select {
	case <-called:
	case <-time.After(testTimeout):
		t.Fatal("the read stuck behind an open transaction never asked to resolve it")
	}
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if got := r.offsets(); got != fmt.Sprint([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("fn saw %s, want 0..9", got)
	}
	if n := len(called); n != 0 {
		t.Fatalf("resolve called %d more times after the read progressed", n)
	}
}

// A request kadm mapped to a broker the metadata no longer lists (a node of
// a 3-node cluster just killed) fails with kgo's "unknown broker" in a shard
// error: transient, as kgo's own client treats it. Before, an assignment's
// ListOffsets failing so stopped the worker (chaos-cluster-short, a node
// kill). Another shard error is not.
func TestUnknownBrokerShardErrorIsTransient(t *testing.T) {
	unknown := &kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{{Err: errors.New("unknown broker")}}}
	if err := fmt.Errorf("list start offsets of %q: %w", "in", unknown); !snapshotstore.Transient(err) {
		t.Fatalf("Transient(%v) = false, want true", err)
	}
	other := &kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{{Err: errors.New("topic authorization failed")}}}
	if snapshotstore.Transient(other) {
		t.Fatalf("Transient(%v) = true, want false", other)
	}
}

// A permanent fetch error fails the read even when the poll moved the
// position: kgo passes a batch it cannot decode (an unknown magic byte)
// with its error, and the snapshots in it were skipped without a word
// (found by a review).
func TestReadToTargetPermanentErrorWithAnAdvanceFails(t *testing.T) {
	boom := errors.New("unknown magic 7 (injected)")
	l := newScriptedLog(endsResult{hwm: 5, lso: 5})
	l.give(recs(0, 1)...)
	l.feed <- pollResult{next: 3, err: boom} // passes 2, the undecodable batch
	l.give(recs(3, 4)...)
	err := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[0]", StallTimeout: time.Minute}).wait(t)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "snaps[0]: recovery read at 2 of 5") {
		t.Fatalf("read error %v, want one wrapping the poll error, naming the partition and the position", err)
	}
}

// A look for hanging transactions that takes ResolveAfter or longer does not
// starve the read: the next poll still waits for records, so a transaction
// that ends on its own is read past. The look's start used to be its mark:
// every later poll got a deadline already past, the read looked again and
// again, and failed at the stall deadline (found by a review).
func TestReadToTargetASlowLookForHangingTransactionsStillFetches(t *testing.T) {
	l := newScriptedLog(endsResult{hwm: 10, lso: 5})
	l.give(recs(0, 4)...)
	var looks atomic.Int32
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{
		Partition: "snaps[0]", StallTimeout: 2 * time.Second, ResolveAfter: 100 * time.Millisecond,
		ResolveHanging: func(ctx context.Context) (int, error) {
			if looks.Add(1) == 1 {
				go func() {
					// The transaction ends on its own while the look runs,
					// its records arriving only to a poll that waits.
					time.Sleep(150 * time.Millisecond)
					for {
						select {
						case pctx := <-l.polls:
							if _, ok := pctx.Deadline(); ok && pctx.Err() == nil {
								l.give(recs(5, 9)...)
								return
							}
						case <-ctx.Done():
							return
						}
					}
				}()
			}
			time.Sleep(150 * time.Millisecond) // longer than ResolveAfter
			return 0, nil
		},
	})
	if err := r.wait(t); err != nil {
		t.Fatalf("the read failed after %d looks: %v", looks.Load(), err)
	}
	if got := r.offsets(); got != fmt.Sprint([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("fn saw %s, want 0..9", got)
	}
}

// Without a stall deadline (the plain mode) a read that makes no progress
// waits on, but says so every WarnEvery with its diagnosis: a truncated log
// (the high watermark re-read below the target) waited forever without a
// word (found by a review).
func TestReadToTargetWithoutStallTimeoutWarnsWithItsDiagnosis(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	// Captured at 10, and still 10 at the re-read: an open transaction
	// holds the read_committed position, and the read waits it out.
	l := newScriptedLog(endsResult{hwm: 10, lso: 3}, endsResult{hwm: 10, lso: 3})
	l.give(recs(0, 3)...)
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[0]", WarnEvery: 50 * time.Millisecond, Logger: zap.New(core)})
	testkitEventually(t, func() bool { return logs.FilterMessageSnippet("makes no progress; waiting on").Len() >= 2 })
	e := logs.FilterMessageSnippet("makes no progress; waiting on").All()[0]
	if msg, _ := e.ContextMap()["error"].(string); !strings.Contains(msg, "snaps[0]") || !strings.Contains(msg, "open transaction") {
		t.Fatalf("the warning's diagnosis %q, want one naming the partition and the open transaction", msg)
	}
	select {
	case err := <-r.done:
		t.Fatalf("the read returned (%v): without a stall deadline it waits", err)
	default:
	}
	l.give(recs(4, 9)...)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
}

// Without a stall deadline (the plain mode) a read whose log was truncated
// below its target fails with the truncation's diagnosis: it waited for
// ever for records no one would write again (the partition's only writer
// starts after its recovery; found by a review).
func TestReadToTargetWithoutStallTimeoutFailsOnATruncatedLog(t *testing.T) {
	// Captured at 10; re-read at 4, then 10 (one low answer: a stale
	// leader's, say), then at 4 twice: the log was truncated below the
	// target.
	l := newScriptedLog(endsResult{hwm: 10, lso: 10}, endsResult{hwm: 4, lso: 4}, endsResult{hwm: 10, lso: 10},
		endsResult{hwm: 4, lso: 4}, endsResult{hwm: 4, lso: 4})
	l.give(recs(0, 3)...)
	r := startRead(context.Background(), l, snapshotstore.ReadOptions{Partition: "snaps[0]", WarnEvery: 50 * time.Millisecond})
	err := r.wait(t)
	var se *snapshotstore.RecoveryReadStalledError
	if !errors.As(err, &se) || se.Cause != snapshotstore.StallTruncation || se.LogEnd != 4 || se.Target != 10 || !strings.Contains(err.Error(), "snaps[0]") {
		t.Fatalf("read = %v, want a RecoveryReadStalledError naming snaps[0], the truncation, the log end 4 and the target 10", err)
	}
	if n := l.endsCalls(); n != 5 {
		t.Fatalf("the read failed after %d reads of the log end, want 5: the capture and four diagnoses, the last two in a row truncated", n)
	}
}

// testkitEventually polls cond every 10 ms until it holds, for up to
// testTimeout.
func testkitEventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testTimeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
	}
}

// A transient error of the read's first request (its ends) is retried as a
// fetch's is: CI's chaos run failed a partition at its recovery's first
// request ("lookup kafka: no such host" while the workers' containers
// restarted). Anything else still fails the read at once; a transient one
// fails it at the stall timeout.
func TestReadToTargetRetriesATransientErrorOfItsEnds(t *testing.T) {
	dns := &net.DNSError{Err: "no such host", Name: "kafka", IsNotFound: true}
	t.Run("transient", func(t *testing.T) {
		l := newScriptedLog(endsResult{err: fmt.Errorf("unable to dial: %w", dns)}, endsResult{hwm: 2, lso: 2})
		l.give(dataRec(0), dataRec(1))
		r := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: time.Minute})
		if err := r.wait(t); err != nil {
			t.Fatalf("read after a transient error of its ends: %v", err)
		}
		if got := r.offsets(); got != "[0 1]" || l.endsCalls() != 2 {
			t.Fatalf("fn saw %s after %d reads of the ends, want [0 1] after 2", got, l.endsCalls())
		}
	})
	t.Run("not transient", func(t *testing.T) {
		boom := errors.New("boom")
		l := newScriptedLog(endsResult{err: boom}, endsResult{hwm: 2, lso: 2})
		err := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: time.Minute}).wait(t)
		if !errors.Is(err, boom) || l.endsCalls() != 1 {
			t.Fatalf("%v after %d reads of the ends, want boom after 1", err, l.endsCalls())
		}
	})
	t.Run("a partition the broker does not know", func(t *testing.T) {
		// Retriable for Kafka, but no wait heals a snapshot topic with
		// fewer partitions than the input.
		l := newScriptedLog(endsResult{err: kerr.UnknownTopicOrPartition}, endsResult{hwm: 2, lso: 2})
		err := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: time.Minute}).wait(t)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || l.endsCalls() != 1 {
			t.Fatalf("%v after %d reads of the ends, want UNKNOWN_TOPIC_OR_PARTITION after 1", err, l.endsCalls())
		}
	})
	t.Run("transient when the read is stopped", func(t *testing.T) {
		l := newScriptedLog(endsResult{err: dns})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := startRead(ctx, l, snapshotstore.ReadOptions{}).wait(t)
		if !errors.Is(err, context.Canceled) || l.endsCalls() != 1 {
			t.Fatalf("%v after %d reads of the ends, want it to match the stop (context.Canceled) after 1", err, l.endsCalls())
		}
	})
	t.Run("transient past the stall timeout", func(t *testing.T) {
		l := newScriptedLog(endsResult{err: dns})
		err := startRead(context.Background(), l, snapshotstore.ReadOptions{StallTimeout: 300 * time.Millisecond}).wait(t)
		var de *net.DNSError
		if !errors.As(err, &de) || l.endsCalls() < 2 {
			t.Fatalf("%v after %d reads of the ends, want the DNS error after retries", err, l.endsCalls())
		}
	})
}
