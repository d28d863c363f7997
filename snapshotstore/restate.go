package snapshotstore

// Restater is implemented by a Partition whose recovery started past a
// finding that an option accepted: an input partition count other than its
// latest offset marker records (WithAcceptInputRepartition, or
// WithResetLostState for it), or missing snapshot history
// (WithResetLostState). The marker still records what was found, and only
// a commit rewrites it — which a partition that gets no input never makes,
// so removing the option later refused that partition again. The partition
// therefore commits once as soon as it runs, with nothing new: a marker of
// the input's count now at its assigned offset (KIP-447's generation check
// gates it like any commit). The Kafka partitions of both modes implement
// it; a wrapper should forward it (actorflow's metrics wrapper does),
// without it the option must stay until every partition has committed on
// its own.
type Restater interface {
	// NeedsRestate reports, after Recover, whether the partition's first
	// commit is due at once.
	NeedsRestate() bool
}

// NeedsRestate reports whether p implements Restater and says so.
func NeedsRestate(p Partition) bool {
	r, ok := p.(Restater)
	return ok && r.NeedsRestate()
}
