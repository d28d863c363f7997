package snapshotstore

// A transaction whose EndTxn(commit) got no answer — the connection to the
// transaction coordinator broke, the coordinator moved, the request timed
// out — may have committed: the coordinator writes PrepareCommit to its log
// before it answers, and a new coordinator that loads that log completes the
// commit. Redoing such a batch from memory would write its outputs twice (the
// 3-node cluster's node kills showed it: 30 duplicate outputs, one batch,
// after "commit transaction: … connection refused"). So a lost commit answer
// is settled before anything is redone: a new InitProducerID on the same
// transactional.id returns only once the previous transaction is complete
// (CONCURRENT_TRANSACTIONS while it is prepared; an ongoing one it aborts),
// and the transaction's marker record in the snapshot partition, whose offset
// the produce returned, is then followed by the control record that says how
// it ended.

// LostCommitVerdict is what a scan of the snapshot partition from a
// transaction's marker record says of a commit whose answer was lost.
type LostCommitVerdict int

const (
	// LostCommitUnreadable: the scan did not reach the partition's end, or
	// did not find the marker record at its offset: scan again (bounded by
	// the failover timeout), never guess.
	LostCommitUnreadable LostCommitVerdict = iota
	// LostCommitPending: the marker record is there without a control record
	// after it: the transaction is not complete yet.
	LostCommitPending
	// LostCommitCommitted: a commit marker follows: the batch is committed;
	// it must not be redone.
	LostCommitCommitted
	// LostCommitAborted: an abort marker follows: nothing of the batch is
	// visible; redo it.
	LostCommitAborted
)

func (v LostCommitVerdict) String() string {
	switch v {
	case LostCommitPending:
		return "pending"
	case LostCommitCommitted:
		return "committed"
	case LostCommitAborted:
		return "aborted"
	}
	return "unreadable"
}

// DecideLostCommit reads a scan of the snapshot partition from the marker
// record's offset (the producer's data at the transaction's epoch, then its
// control record; DataScan as the hanging-transaction repair fills it).
func DecideLostCommit(sc DataScan) LostCommitVerdict {
	switch {
	case sc.Closed && sc.Committed:
		return LostCommitCommitted
	case sc.Closed:
		return LostCommitAborted
	case !sc.Complete || !sc.SawData:
		return LostCommitUnreadable
	default:
		return LostCommitPending
	}
}
