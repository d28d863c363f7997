package partitionflow

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func lruKeys(l *lruList, byPtr map[*keyEntry]string) []string {
	var out []string
	for e := l.head; e != nil; e = e.next {
		out = append(out, byPtr[e])
	}
	return out
}

// The recency list: most recent first; remove and re-push are O(1) and
// idempotent; pushBack puts an idle key where the next eviction looks.
func TestLRUListOrder(t *testing.T) {
	var l lruList
	names := map[*keyEntry]string{}
	e := map[string]*keyEntry{}
	for _, k := range []string{"a", "b", "c", "d"} {
		e[k] = &keyEntry{}
		names[e[k]] = k
		l.pushFront(e[k])
	}
	check := func(want string) {
		t.Helper()
		if got := fmt.Sprint(lruKeys(&l, names)); got != want || l.n != len(lruKeys(&l, names)) {
			t.Fatalf("list %s (n=%d), want %s", got, l.n, want)
		}
		if l.tail != nil && l.tail.next != nil || l.head != nil && l.head.prev != nil {
			t.Fatal("head or tail not at an end")
		}
	}
	check("[d c b a]")
	l.moveToFront(e["a"])
	check("[a d c b]")
	l.remove(e["c"])
	l.remove(e["c"]) // idempotent
	check("[a d b]")
	l.moveToFront(e["c"]) // not linked: stays out
	check("[a d b]")
	l.pushBack(e["c"])
	check("[a d b c]")
	l.remove(e["a"])
	l.remove(e["c"])
	check("[d b]")
	l.remove(e["d"])
	l.remove(e["b"])
	check("[]")
	if l.head != nil || l.tail != nil {
		t.Fatal("empty list keeps an end")
	}
}

// Held keys come out oldest first, each with all its records in arrival
// order, and the queue's consumed prefix is released.
func TestHeldKeysFIFO(t *testing.T) {
	var h heldKeys
	r := func(o int64) *kgo.Record { return &kgo.Record{Offset: o} }
	h.add("a", []*kgo.Record{r(1)})
	h.add("b", []*kgo.Record{r(2)})
	h.add("a", []*kgo.Record{r(3), r(4)})
	if h.len() != 2 || !h.has("a") || h.has("c") {
		t.Fatalf("len %d", h.len())
	}
	if k, rs := h.pop(); k != "a" || len(rs) != 3 || rs[0].Offset != 1 || rs[2].Offset != 4 {
		t.Fatalf("pop %q with %v, want a with offsets 1, 3, 4", k, rs)
	}
	if k, _ := h.pop(); k != "b" {
		t.Fatalf("pop %q, want b", k)
	}
	if h.len() != 0 || len(h.order) != 0 {
		t.Fatalf("drained queue keeps %d keys, %d slots", h.len(), len(h.order))
	}
	for i := range 5000 {
		h.add(fmt.Sprint(i), []*kgo.Record{r(int64(i))})
	}
	for i := range 4000 {
		if k, _ := h.pop(); k != fmt.Sprint(i) {
			t.Fatalf("pop %q, want %d", k, i)
		}
	}
	if len(h.order)-h.head != 1000 || h.head > 1024+1 {
		t.Fatalf("after 4000 pops of 5000: %d slots, head %d (the consumed prefix is not released)", len(h.order), h.head)
	}
}
