// App 2 tested without a broker: the same flow (inactivity in inactivity_test.go) under
// keyflowtest's driver, the clock moved by hand instead of waited for.
package review_test

import (
	"fmt"
	"time"

	"github.com/actorflow/actorflow/keyflowtest"
)

func Example_inactivityDriver() {
	d := keyflowtest.New(inactivity(30 * time.Minute))
	defer d.Close()
	for _, user := range []string{"ann", "ann", "bob"} {
		if err := d.Pipe(user, "click"); err != nil {
			panic(err)
		}
	}
	if err := d.Advance(30 * time.Minute); err != nil { // fires the due timers
		panic(err)
	}
	for _, o := range d.Outputs() {
		fmt.Printf("%s %s %s\n", o.Topic, o.Key, o.Value)
	}
	// Output:
	// sessions-closed ann {"user":"ann","events":2}
	// sessions-closed bob {"user":"bob","events":1}
}
