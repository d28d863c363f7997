package partitionflow

import (
	"testing"
	"time"
)

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// quietAfter50ms is an idle flush of 50 ms on a clock the test sets.
func quietAfter50ms() (*clock, *idleFlush) {
	c := &clock{t: time.Unix(0, 0)}
	f := newIdleFlush(50 * time.Millisecond)
	f.now = c.now
	return c, &f
}

func armed(f *idleFlush) bool {
	select {
	case <-f.arm:
		return true
	default:
		return false
	}
}

func TestIdleFlushOnlyAfterTheInputWentQuietAtItsEnd(t *testing.T) {
	c, f := quietAfter50ms()

	f.batch(false)
	if armed(f) {
		t.Fatal("a batch short of the end armed the idle flush")
	}
	f.batch(true)
	if !armed(f) {
		t.Fatal("a batch at the end did not arm the idle flush")
	}
	// Another batch came 30 ms later: the wait starts again.
	c.t = c.t.Add(30 * time.Millisecond)
	f.batch(true)
	c.t = c.t.Add(30 * time.Millisecond)
	if f.due(false) {
		t.Fatal("flushed 30 ms after the last batch (want 50)")
	}
	if !armed(f) {
		t.Fatal("the early tick did not ask for another wait")
	}
	c.t = c.t.Add(20 * time.Millisecond)
	if !f.due(false) {
		t.Fatal("no flush 50 ms after the last batch at the end")
	}
	// Spent until the next persist tick: gaps do not cost a transaction each.
	c.t = c.t.Add(time.Second)
	f.batch(true)
	if armed(f) || f.due(false) {
		t.Fatal("a second idle flush before the persist tick")
	}
	f.ticked()
	f.batch(true)
	c.t = c.t.Add(time.Second)
	if !armed(f) || !f.due(false) {
		t.Fatal("no idle flush after the persist tick")
	}
}

func TestIdleFlushWaitsForTheKeysBacklog(t *testing.T) {
	c, f := quietAfter50ms()
	f.batch(true)
	<-f.arm
	c.t = c.t.Add(time.Second)
	if f.due(true) {
		t.Fatal("flushed while the keys had records to fold")
	}
	if d := <-f.arm; d >= 50*time.Millisecond {
		t.Fatalf("a backlog waits %v more (want a short poll)", d)
	}
	// A long backlog: the polls back off, up to the idle wait.
	var last time.Duration
	for range 10 {
		f.due(true)
		last = <-f.arm
	}
	if last != 50*time.Millisecond {
		t.Fatalf("a long backlog polls every %v, want 50ms", last)
	}
	if !f.due(false) {
		t.Fatal("no flush once the backlog was folded")
	}
}

func TestIdleFlushNotWhenTheLastBatchWasShortOfTheEnd(t *testing.T) {
	c, f := quietAfter50ms()
	f.batch(true)
	f.batch(false) // more was there: the consumer is behind, not idle
	c.t = c.t.Add(time.Second)
	if f.due(false) {
		t.Fatal("flushed although the last batch was short of the end")
	}
}

func TestIdleFlushDisabled(t *testing.T) {
	f := newIdleFlush(-1)
	f.batch(true)
	if armed(&f) || f.due(false) {
		t.Fatal("a disabled idle flush armed or fired")
	}
}
