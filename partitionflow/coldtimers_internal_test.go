package partitionflow

import (
	"fmt"
	"testing"
	"time"
)

func TestColdTimersDueInOrder(t *testing.T) {
	var c coldTimers
	t0 := time.Unix(1000, 0)
	if _, ok := c.next(); ok {
		t.Fatal("next of an empty schedule")
	}
	c.add("c", t0.Add(3*time.Second))
	c.add("a", t0.Add(1*time.Second))
	c.add("b", t0.Add(2*time.Second))
	c.add("a", t0.Add(5*time.Second)) // a later entry for a: both kept, checked when due
	if n, _ := c.next(); !n.Equal(t0.Add(time.Second)) {
		t.Fatalf("next = %v, want the earliest", n)
	}
	if d := c.due(t0); len(d) != 0 {
		t.Fatalf("due before any: %v", d)
	}
	if d := fmt.Sprint(c.due(t0.Add(2 * time.Second))); d != fmt.Sprint([]coldTimer{{"a", t0.Add(time.Second)}, {"b", t0.Add(2 * time.Second)}}) {
		t.Fatalf("due at +2s = %s", d)
	}
	if c.len() != 2 {
		t.Fatalf("%d left, want 2", c.len())
	}
	if d := c.due(t0.Add(time.Hour)); len(d) != 2 || d[0].key != "c" || d[1].key != "a" {
		t.Fatalf("due at +1h = %v", d)
	}
}
