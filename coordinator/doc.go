// Package coordinator is the franz-go group consumer that drives a worker:
// it polls the input topic, turns assigned / revoked / lost partitions into
// calls on a Handler (the supervisor), tracks the consumer's group metadata
// (the transactional mode's fencing token), and applies per-partition
// backpressure by pausing fetches.
//
// Auto-commit is always off: offsets are committed by the partitions'
// transaction actors (through the consumer in the plain mode, inside a
// transaction in the transactional mode).
package coordinator
