package keyflowtest_test

import (
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflowtest"
)

// TestInactivity is README's "Testing a flow", verbatim (inactivity is the
// flow of Example).
func TestInactivity(t *testing.T) {
	d := keyflowtest.New(inactivity()) // SetTimer("idle", kc.Now().Add(30*time.Minute)) per event; the timer emits
	defer d.Close()
	if err := d.Pipe("ann", "click"); err != nil { // offsets assigned per partition, from 0
		t.Fatal(err)
	}
	if s, _ := d.State("ann"); s.Events != 1 { // the persisted state, decoded with the flow's codec
		t.Fatalf("state %+v", s)
	}
	if err := d.Advance(30 * time.Minute); err != nil { // fires the due timers, in due-time order
		t.Fatal(err)
	}
	if outs := d.Outputs(); len(outs) != 1 || string(outs[0].Key) != "ann" {
		t.Fatalf("outputs %v", outs)
	}
}
