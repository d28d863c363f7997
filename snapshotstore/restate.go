package snapshotstore

// Restater is implemented by a Partition whose recovery started past a
// finding that an option accepted: an input partition count other than its
// latest offset marker records (WithAcceptInputRepartition, or
// WithResetLostState for it), missing snapshot history
// (WithResetLostState), or keys whose latest snapshot record does not
// decode (WithDropUndecodableSnapshots). The topic still holds what was
// found — the old marker, the undecodable records — and only a commit
// rewrites it, which a partition that gets no input (or no record of those
// keys) never made: removing the option refused the partition again. The
// partition therefore commits once as soon as it runs, with nothing new:
// tombstones of the dropped keys, then a marker of the input's count now
// at its assigned offset (KIP-447's generation check gates it like any
// commit). The Kafka partitions of both modes implement it; a wrapper
// should forward it (actorflow's metrics wrapper does): without it the
// option must stay until every partition has committed on its own.
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

// restatement is what a Kafka partition's first commit after its recovery
// restates (Restater): its marker, which every commit writes, and
// tombstones of the keys the recovery dropped. Set by Recover, cleared by
// the first Commit that succeeds (a failed one is retried by the
// partition's restart, which recovers again).
type restatement struct {
	marker  bool
	dropped []string
}

// NeedsRestate implements Restater.
func (r *restatement) NeedsRestate() bool { return r.marker || len(r.dropped) > 0 }

// restated returns b with the dropped keys' tombstones before its writes (a
// write of such a key in b then supersedes its tombstone). Offset -1: a
// tombstone that covers no input record, as the recovery applied it.
func (r *restatement) restated(b Batch) Batch {
	if len(r.dropped) == 0 {
		return b
	}
	ws := make([]Snapshot, 0, len(r.dropped)+len(b.Writes))
	for _, k := range r.dropped {
		ws = append(ws, Snapshot{Key: k, Offset: -1})
	}
	b.Writes = append(ws, b.Writes...)
	return b
}
