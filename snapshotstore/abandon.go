package snapshotstore

// InFlightAbandoner is implemented by a Partition whose Close makes a
// Commit still in flight return at once: the transactional Kafka store,
// whose producer closes under the Commit, failing the requests a broker has
// not answered (a produce kgo has sent is not cancelled with its context: it
// waits out its 10 s timeout plus kgo's 10 s overhead; nor is a
// re-initialisation's InitProducerID, on purpose, which Close waits for
// until its context ends), while the
// partition's next owner's InitProducerID aborts or completes what it had
// sent. A stopping transaction actor closes such a partition under a
// transaction that did not end within a short grace after its cancellation,
// rather than wait for the broker: a broker frozen with its connections
// open held a lost partition's stop for those 20 s, and with it the
// rebalance callback and the member's rejoin (deploy/chaos.py's
// node_pause). A wrapper should forward it (actorflow's metrics wrapper
// does); without it the actor waits for the Commit as for the plain mode's,
// whose shared producer Close leaves alone.
type InFlightAbandoner interface {
	// AbandonsInFlight reports whether Close makes a Commit in flight
	// return at once.
	AbandonsInFlight() bool
}

// AbandonsInFlight reports whether p implements InFlightAbandoner and
// says so.
func AbandonsInFlight(p Partition) bool {
	a, ok := p.(InFlightAbandoner)
	return ok && a.AbandonsInFlight()
}

// AbandonsInFlight: Close closes the producer a Commit runs on
// (InFlightAbandoner).
func (t *txnPartition) AbandonsInFlight() bool { return true }
