package snapshotstore

// Restater is implemented by a Partition whose recovery started past a
// finding that an option accepted: an input partition count other than its
// latest offset marker records (WithAcceptInputRepartition, or
// WithResetLostState for it), missing snapshot history
// (WithResetLostState), or keys whose latest snapshot record does not
// decode (WithDropUndecodableSnapshots). The topic still holds what was
// found — the old marker, the undecodable records — and only commits
// rewrite it, which a partition that gets no input (or no record of those
// keys) never made: removing the option refused the partition again. The
// partition therefore commits as soon as it runs, with nothing new: the
// dropped keys' tombstones, queued as any write (the transaction caps split
// them), and a marker of the input's count now at its assigned offset
// (KIP-447's generation check gates it like any commit); once all have
// committed it logs so at info, and the option can go. The Kafka partitions
// of both modes implement it; a wrapper should forward it (actorflow's
// metrics wrapper does): without it the option must stay until every
// partition has committed on its own and every dropped key was written
// again.
type Restater interface {
	// NeedsRestate reports, after Recover, whether the partition's first
	// commit is due at once.
	NeedsRestate() bool
	// RestateTombstones lists, after Recover, the keys whose tombstones
	// that commit writes (covering no input record: Offset -1).
	RestateTombstones() []string
}

// NeedsRestate reports whether p implements Restater and says so, and the
// tombstones it asks for.
func NeedsRestate(p Partition) (tombstones []string, due bool) {
	r, ok := p.(Restater)
	if !ok || !r.NeedsRestate() {
		return nil, false
	}
	return r.RestateTombstones(), true
}

// restatement is what a Kafka partition's recovery asks its first commit to
// restate (Restater): its marker, which every commit writes, and the keys
// the recovery dropped.
type restatement struct {
	marker  bool
	dropped []string
}

// NeedsRestate implements Restater.
func (r *restatement) NeedsRestate() bool { return r.marker || len(r.dropped) > 0 }

// RestateTombstones implements Restater.
func (r *restatement) RestateTombstones() []string { return r.dropped }
