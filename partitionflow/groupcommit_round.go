package partitionflow

// A persist round — the partition's Flush to each dirty key at a persist
// tick, and its tick evictions — reaches the transaction actor one key's
// write at a time, over milliseconds. Started with the first write, a round
// took two or three transactions, the first with one or two writes (the
// kgo debug log of the 10k-key E2E run: 41 of 65 produce requests carried
// at most two records). Each transaction costs the broker a few ms of CPU
// whatever its size (AddPartitionsToTxn, TxnOffsetCommit, EndTxn, the
// markers), on a host it may share with the worker. So the partition tells
// the transaction actor how many writes a round brings, and the group
// commit holds the next transaction until they are queued.
//
// The count is a hint, not a promise: a key that was dirty when flushed may
// have nothing left to write (its outputs' write already carried its
// state). So the hold ends at whichever comes first:
//   - every write of the round is queued;
//   - a write with outputs is queued (outputs are visible only when their
//     transaction commits: they never wait for a round);
//   - the queued writes fill a transaction (the caps);
//   - the transaction actor's deadline for the round (ReleaseRound).
//
// Writes of no round (an eviction for the budget, TxnHandle.Write) and
// offset commits join a held transaction.

// roundHold is the round a GroupCommit holds for; the zero value holds
// nothing.
type roundHold struct {
	id      uint64
	pending int // writes of round id not yet queued; > 0: holding
}

func (r *roundHold) holds() bool { return r.pending > 0 }

// add notes a queued write.
func (r *roundHold) add(w *Write) {
	switch {
	case r.pending == 0:
	case len(w.Outputs) > 0:
		r.pending = 0
	case w.Round == r.id:
		r.pending--
	}
}

// ExpectRound holds the next transaction until writes writes of round id
// are queued (see above); writes ≤ 0 holds nothing. A new round replaces
// the one held for.
func (g *GroupCommit) ExpectRound(id uint64, writes int) {
	g.round = roundHold{id: id, pending: max(writes, 0)}
}

// ReleaseRound ends the hold for round id, if still held: its deadline
// passed. It reports whether a hold ended.
func (g *GroupCommit) ReleaseRound(id uint64) bool {
	if !g.round.holds() || g.round.id != id {
		return false
	}
	g.round = roundHold{}
	return true
}
