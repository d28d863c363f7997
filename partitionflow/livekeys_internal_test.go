package partitionflow

import (
	"fmt"
	"testing"
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

// Held keys come out oldest first, and the queue's consumed prefix is
// released.
func TestHeldKeysFIFO(t *testing.T) {
	var h heldKeys
	a, b := &keyEntry{key: "a"}, &keyEntry{key: "b"}
	h.push(a)
	h.push(b)
	if h.len() != 2 {
		t.Fatalf("len %d, want 2", h.len())
	}
	if e := h.pop(); e != a {
		t.Fatalf("pop %q, want a", e.key)
	}
	if e := h.pop(); e != b {
		t.Fatalf("pop %q, want b", e.key)
	}
	if h.len() != 0 || len(h.order) != 0 {
		t.Fatalf("drained queue keeps %d keys, %d slots", h.len(), len(h.order))
	}
	for i := range 5000 {
		h.push(&keyEntry{key: fmt.Sprint(i)})
	}
	for i := range 4000 {
		if e := h.pop(); e.key != fmt.Sprint(i) {
			t.Fatalf("pop %q, want %d", e.key, i)
		}
	}
	if len(h.order)-h.head != 1000 || h.head > 1024+1 {
		t.Fatalf("after 4000 pops of 5000: %d slots, head %d (the consumed prefix is not released)", len(h.order), h.head)
	}
}
