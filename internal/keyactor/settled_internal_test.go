package keyactor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func newSettledCore(lastSeen int64) *Core {
	return &Core{lastSeen: lastSeen, lastFolded: -1, cur: -1, firstDirty: -1, inflightFirst: -1, failedAt: -1}
}

// settled is the lowest of: the persist in flight, the dirty state, every
// output not yet acknowledged (emitted by a fold, at its input offset; a
// timer's outputs, at -1, hold nothing) and the first stashed delivery —
// minus one; else the last offset seen.
func TestKeySettledIsBelowTheLowestUnfinishedEffect(t *testing.T) {
	k := newSettledCore(20)
	check := func(what string, want int64) {
		t.Helper()
		if got := k.settled(); got != want {
			t.Fatalf("%s: settled() = %d, want %d", what, got, want)
		}
	}
	check("nothing pending", 20)
	k.addOutput(-1)
	check("a timer's output holds nothing", 20)
	k.addOutput(12)
	k.addOutput(12)
	k.addOutput(15)
	k.addOutput(17)
	check("outputs at 12 (x2), 15, 17", 11)
	k.ackOutput(15)
	check("15 acked out of order", 11)
	k.ackOutput(12)
	check("one of two outputs at 12 acked", 11)
	k.ackOutput(99)
	check("an ack of an offset with nothing pending", 11)
	k.ackOutput(12)
	check("both at 12 acked: 17 is the lowest", 16)
	k.firstDirty = 14
	check("dirty from 14", 13)
	k.persisting, k.inflightFirst = true, 9
	check("a persist in flight from 9", 8)
	k.persisting = false
	check("the in-flight mark counts only while persisting", 13)
	k.firstDirty = -1
	k.stash = []*Deliver{{}, {Records: []*kgo.Record{{Offset: 16}, {Offset: 18}}}, {Records: []*kgo.Record{{Offset: 19}}}}
	check("stashed deliveries from 16", 15)
	k.stash = nil
	k.ackOutput(17)
	check("only the timer's output pending", 20)
	if !k.outputsPending() {
		t.Fatal("outputsPending() = false with a timer's output unacknowledged: a flush would not wait for it")
	}
	k.ackOutput(-1)
	k.ackOutput(-1) // stray
	check("everything acked", 20)
	if k.outputsPending() {
		t.Fatal("outputsPending() = true with every output acknowledged")
	}
	k.addOutput(20)
	check("an output re-added after the key was clear", 19)
}

// A failed write leaves its records held: the key's Settled stays below the
// first offset the write covered (before the fix it jumped to the last
// offset seen, so a partition that went on after the failure could commit
// past state that was never persisted), and a success moves it on.
func TestKeySettledStaysBelowAFailedWrite(t *testing.T) {
	k := newSettledCore(30)
	k.persisting, k.inflightFirst, k.persistingOffset = true, 21, 25
	k.markDirty(27) // folded while the write was in flight
	if got := k.settled(); got != 20 {
		t.Fatalf("write in flight from 21: settled() = %d, want 20", got)
	}
	k.persistEnded(errors.New("fenced"))
	if got := k.settled(); got != 20 || !k.dirty || k.persisting {
		t.Fatalf("after the failed write: settled() = %d, dirty %v, persisting %v; want 20, dirty, not persisting", got, k.dirty, k.persisting)
	}
	k.persisting, k.inflightFirst, k.firstDirty, k.dirty, k.persistingOffset = true, 21, -1, false, 30
	k.persistEnded(nil)
	if got := k.settled(); got != 30 || k.persistedOffset != 30 {
		t.Fatalf("after a successful write: settled() = %d, persisted %d; want 30, 30", got, k.persistedOffset)
	}
}

// settled equals the minimum over a model of what is pending under random
// emits (non-decreasing input offsets, as folds run in offset order; some by
// timers), acknowledgements in any order (and stray ones), dirty marks and
// persists.
func TestKeySettledMatchesModel(t *testing.T) {
	var seed uint64 = 0x853c49e6748fea9b
	rnd := func(n int) int {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int(seed % uint64(n))
	}
	for round := range 100 {
		k := newSettledCore(-1)
		var pending []int64 // one entry per output not yet acknowledged
		next := int64(0)
		for step := range 500 {
			switch rnd(6) {
			case 0, 1: // a fold at the next offset emits 0..3 outputs
				k.lastSeen = next
				for range rnd(4) {
					k.addOutput(next)
					pending = append(pending, next)
				}
				next++
			case 2: // a timer emits
				k.addOutput(-1)
				pending = append(pending, -1)
			case 3, 4: // one output is acknowledged, any of them
				if len(pending) == 0 || rnd(10) == 0 {
					k.ackOutput(next + 5) // stray
					continue
				}
				i := rnd(len(pending))
				k.ackOutput(pending[i])
				pending = append(pending[:i], pending[i+1:]...)
			default: // dirty / persist marks
				k.firstDirty = -1
				if rnd(2) == 0 && next > 0 {
					k.firstDirty = int64(rnd(int(next)))
				}
				k.persisting = rnd(2) == 0
				k.inflightFirst = -1
				if k.persisting && next > 0 {
					k.inflightFirst = int64(rnd(int(next)))
				}
			}
			hold, inflight := int64(-1), int64(-1)
			if k.persisting {
				inflight = k.inflightFirst
			}
			for _, o := range append([]int64{k.firstDirty, inflight}, pending...) {
				if o >= 0 && (hold < 0 || o < hold) {
					hold = o
				}
			}
			want := k.lastSeen
			if hold >= 0 {
				want = hold - 1
			}
			if got := k.settled(); got != want {
				t.Fatalf("round %d step %d: settled() = %d, want %d (pending %v, dirty %d, persisting %v@%d)",
					round, step, got, want, pending, k.firstDirty, k.persisting, k.inflightFirst)
			}
		}
	}
}

// BenchmarkKeySettled: one fold's output emitted, the oldest acknowledged,
// then settled (what report runs per delivery and per ack), with n outputs
// pending at distinct input offsets.
//
//	go test ./keyflow -run '^$' -bench KeySettled -benchmem
func BenchmarkKeySettled(b *testing.B) {
	for _, n := range []int{1, 16, 1024} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			k := newSettledCore(-1)
			for o := range n {
				k.addOutput(int64(o))
			}
			next := int64(n)
			b.ResetTimer()
			for range b.N {
				k.addOutput(next)
				k.ackOutput(next - int64(n))
				next++
				if got := k.settled(); got != next-int64(n)-1 {
					b.Fatalf("settled() = %d, want %d", got, next-int64(n)-1)
				}
			}
		})
	}
}
