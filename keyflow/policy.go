package keyflow

import (
	"fmt"

	"github.com/actorflow/actorflow/internal/keyactor"
)

// Policy says what to do with a record that cannot be processed: Fail,
// Skip or DeadLetter. New panics on a policy option given any other value.
type Policy int

const (
	// Fail fails the partition (the default): nothing is committed past the
	// record, and the error names topic, partition, offset and key.
	Fail Policy = iota
	// Skip logs the record's position and the error at warn, and goes on
	// (the undone call leaves no trace in the state, timers or outputs).
	Skip
	// DeadLetter writes the record to the flow's dead-letter topic
	// (WithDeadLetterTopic, default "<input topic>.dlq") with headers naming
	// its source and the error (DeadLetterRecord), logs it, and goes on; the
	// record leaves no other effect. The input offset passes the record only
	// once its dead letter is persisted: in the transactional mode it is
	// produced in the transaction of the key's snapshot (exactly-once for a
	// read_committed consumer), in the plain mode through the worker's
	// producer, acknowledged before the key's snapshot and offset pass it
	// (at-least-once). A dead letter that cannot be written fails the
	// partition like an output does.
	DeadLetter
)

// String returns "fail", "skip" or "dead-letter"; "Policy(n)" for any
// other value (which the policy options refuse: New panics).
func (p Policy) String() string {
	if !p.known() {
		return fmt.Sprintf("Policy(%d)", int(p))
	}
	return keyactor.Policy(p).String()
}

// known reports whether p is Fail, Skip or DeadLetter.
func (p Policy) known() bool { return p == Fail || p == Skip || p == DeadLetter }

// ParsePolicy parses "fail", "skip" or "dead-letter" (Policy.String).
func ParsePolicy(s string) (Policy, error) {
	for _, p := range []Policy{Fail, Skip, DeadLetter} {
		if p.String() == s {
			return p, nil
		}
	}
	return Fail, fmt.Errorf("keyflow: unknown policy %q (want fail, skip or dead-letter)", s)
}
