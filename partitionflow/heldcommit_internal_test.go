package partitionflow

import (
	"testing"
	"time"
)

// The watch warns once the committable offset has been held warnAfter,
// then at twice the last warning's age, and reports a warned hold's end;
// a moving offset or one nothing holds starts it over.
func TestHeldWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	w := heldWatch{warnAfter: 30 * time.Second}
	type obs struct {
		c       int64
		holding bool
		sec     int
		held    int // seconds
		warn    bool
		was     int // seconds
	}
	for i, o := range []obs{
		{c: 5, holding: true, sec: 0},                        // found held: the clock starts
		{c: 5, holding: true, sec: 29, held: 29},             // not yet
		{c: 5, holding: true, sec: 31, held: 31, warn: true}, // the first warning
		{c: 5, holding: true, sec: 50, held: 50},             // the next at 62
		{c: 5, holding: true, sec: 63, held: 63, warn: true},
		{c: 5, holding: true, sec: 100, held: 100},
		{c: 9, holding: true, sec: 101, was: 101}, // moved: the warned hold's end, a new one starts
		{c: 9, holding: true, sec: 125, held: 24},
		{c: 10, holding: false, sec: 126}, // moved, never warned: no end reported
		{c: 10, holding: false, sec: 200}, // nothing waits: not held
		{c: 10, holding: true, sec: 201},  // held from here
		{c: 10, holding: true, sec: 232, held: 31, warn: true},
		{c: 10, holding: false, sec: 233, was: 32}, // the hold ended at the same offset (the input's end persisted)
	} {
		held, warn, was := w.observe(o.c, o.holding, at(o.sec))
		if held != time.Duration(o.held)*time.Second || warn != o.warn || was != time.Duration(o.was)*time.Second {
			t.Fatalf("observation %d (%+v): held %s, warn %v, was %s", i, o, held, warn, was)
		}
	}
	off := heldWatch{}
	off.observe(1, true, at(0))
	if held, warn, _ := off.observe(1, true, at(1000)); warn || held != 1000*time.Second {
		t.Fatalf("a watch without warnings: held %s, warn %v; want the time held and no warning", held, warn)
	}
}

// The first warning never comes within what a healthy hold lasts: a
// persist tick, its write, and the next commit tick.
func TestHeldWarnAfter(t *testing.T) {
	for _, c := range []struct {
		warn, persist, commit, want time.Duration
	}{
		{30 * time.Second, 5 * time.Second, 5 * time.Second, 30 * time.Second},
		{30 * time.Second, 20 * time.Second, 5 * time.Second, 45 * time.Second},
		{-1, 5 * time.Second, 5 * time.Second, 0},
	} {
		if got := heldWarnAfter(Config{CommitHeldWarning: c.warn, PersistEvery: c.persist, CommitOffsetsInterval: c.commit}); got != c.want {
			t.Errorf("warning %s, persist every %s, commit every %s: first warning after %s, want %s", c.warn, c.persist, c.commit, got, c.want)
		}
	}
}
