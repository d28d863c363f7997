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
	c.add("c", t0.Add(3*time.Second), 1)
	c.add("a", t0.Add(1*time.Second), 1)
	c.add("b", t0.Add(2*time.Second), 1)
	c.add("d", t0.Add(4*time.Second), 1)
	c.add("d", t0.Add(500*time.Millisecond), 1) // d's next unload: its entry moves earlier
	if n, _ := c.next(); !n.Equal(t0.Add(500 * time.Millisecond)) {
		t.Fatalf("next = %v, want the earliest", n)
	}
	if d := c.due(t0); len(d) != 0 {
		t.Fatalf("due before any: %v", d)
	}
	if d := fmt.Sprint(c.due(t0.Add(2 * time.Second))); d != fmt.Sprint([]coldTimer{{"d", t0.Add(500 * time.Millisecond), 1}, {"a", t0.Add(time.Second), 1}, {"b", t0.Add(2 * time.Second), 1}}) {
		t.Fatalf("due at +2s = %s", d)
	}
	c.add("a", t0.Add(5*time.Second), 1) // scheduled again after it came due
	c.add("c", t0.Add(6*time.Second), 1) // c's next unload: its entry moves later
	if c.len() != 2 {
		t.Fatalf("%d left, want 2", c.len())
	}
	if d := fmt.Sprint(c.due(t0.Add(time.Hour))); d != fmt.Sprint([]coldTimer{{"a", t0.Add(5 * time.Second), 1}, {"c", t0.Add(6 * time.Second), 1}}) {
		t.Fatalf("due at +1h = %s", d)
	}
}

// A key evicted and loaded again many times within its timer's horizon
// keeps one entry (there were as many as its unloads, until the timer came
// due: memory growing with the evictions), and it still comes due once, at
// the time of its latest unload's snapshot.
func TestColdTimersOneEntryPerKey(t *testing.T) {
	var c coldTimers
	t0 := time.Unix(1000, 0)
	for i := range 10000 {
		c.add("k", t0.Add(time.Hour+time.Duration(i%3)*time.Second), 1)
		c.add(fmt.Sprint("other", i%10), t0.Add(2*time.Hour), 1)
	}
	if c.len() != 11 {
		t.Fatalf("%d entries after 20 000 unloads of 11 keys, want 11", c.len())
	}
	if d := c.due(t0.Add(time.Hour + 30*time.Minute)); len(d) != 1 || d[0].key != "k" || !d[0].at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("due = %v, want k once at its latest time (+1h)", d)
	}
}

// A key's entry is removed when it unloads without timers; the others stay
// in order.
func TestColdTimersRemove(t *testing.T) {
	var c coldTimers
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		c.add(fmt.Sprint("k", i), t0.Add(time.Duration(i)*time.Second), i)
	}
	if c.timers != 0+1+2+3+4 {
		t.Fatalf("%d timers counted, want 10 (k_i has i)", c.timers)
	}
	c.remove("k0")
	c.remove("k3")
	c.remove("absent")
	c.add("k4", t0.Add(4*time.Second), 2) // k4's next unload, with 2 timers now
	if c.timers != 1+2+2 {
		t.Fatalf("%d timers counted after removing k0 and k3 and k4 unloading with 2, want 5", c.timers)
	}
	d := c.due(t0.Add(time.Hour))
	if c.timers != 0 {
		t.Fatalf("%d timers counted with no entry left", c.timers)
	}
	if got := fmt.Sprint(d); c.len() != 0 || len(d) != 3 || d[0].key != "k1" || d[1].key != "k2" || d[2].key != "k4" {
		t.Fatalf("due after removing k0 and k3 = %s, want k1, k2, k4", got)
	}
}
