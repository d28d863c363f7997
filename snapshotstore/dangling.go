package snapshotstore

import "fmt"

// A committed transaction left open on one of its partitions.
//
// Kafka 4.4.0, restarted while it writes a transaction's markers, was seen
// to complete the transaction (CompleteCommit in its log, the coordinator
// answering with the bumped epoch) with the commit marker missing on some
// of its partitions (scripts/chaos.sh --kinds broker_restart; the
// verifier's transaction audit counts the markers that closed more than
// one transaction). The partition's leader still holds the transaction
// open, and it stays open until the producer's next marker there: the
// producer's next transaction writes into it (no KIP-890 verification is
// needed for a producer with a transaction already open there), and
// whatever ends that transaction ends both. When the next transaction
// commits, nothing shows; when it aborts — a broker restart makes that
// likely — the earlier transaction's records there are aborted too, while
// its markers elsewhere committed it: its outputs visible, its snapshots
// and offsets not, and the partition's restart replays and emits those
// outputs again (the chaos runs' duplicates: "committed on ledger-outputs[1]
// and aborted on ledger-snapshots[1]").
//
// So whenever the producer's clients saw a broker connection close since
// the previous check (or the producer was re-initialised), before the next
// write of the next transaction — its first step, a retried offset commit,
// its produce, the record an abort needs — the partitions the previous
// transaction wrote are asked whether
// it is still open there (DescribeProducers), and one that is, while its
// coordinator reports it complete, gets the marker the coordinator should
// have written: the previous transaction's own outcome (this producer
// committed it, and its in-memory state went on from it), written with
// KIP-664's WriteTxnMarkers as the hanging-transaction repair does.
//
// Not covered: a write of the next transaction already in flight when the
// connection closed, which kgo re-sends by itself after the restart (seen:
// kgo retrying a produce on NOT_ENOUGH_REPLICAS while the restarted broker
// loads), and a previous owner's transaction (the recovery read and the
// committed-offset fetch repair those, hanging.go).
//
// This file is the decision, free of I/O; dangling_kafka.go asks and
// writes.

// DanglingAction is what the check does about one partition.
type DanglingAction int

const (
	// DanglingNone: the previous transaction is closed there.
	DanglingNone DanglingAction = iota
	// DanglingWait: its markers may still be in flight (the coordinator
	// is writing them, or could not be read): ask again.
	DanglingWait
	// DanglingRepair: the coordinator completed the transaction and the
	// partition still holds it open: write the marker.
	DanglingRepair
	// DanglingLeave: open, but not this producer's to end (another writer
	// re-initialised the transactional id, or the open transaction is not
	// the previous one): leave it, and log it.
	DanglingLeave
)

func (a DanglingAction) String() string {
	switch a {
	case DanglingWait:
		return "wait"
	case DanglingRepair:
		return "repair"
	case DanglingLeave:
		return "leave"
	}
	return "none"
}

// LastTxn is the previous transaction of a producer — one it committed,
// the only kind recorded — as its client knows it after the commit: the
// epoch its data was written with (under transaction version 2 the commit
// moves the producer one epoch on) and the client's epoch after the commit.
type LastTxn struct {
	ProducerID int64
	DataEpoch  int16
	// EpochAfter is the client's epoch once the commit returned: the
	// coordinator's, unless someone re-initialised the id since.
	EpochAfter int16
}

// DanglingVerdict is the decision for one partition.
type DanglingVerdict struct {
	Action DanglingAction
	Commit bool // the marker's type, for DanglingRepair
	Reason string
}

// DecideDangling decides for one partition the previous transaction wrote.
// lastOffset is the offset of the previous transaction's last record there
// (-1: not known, as on the group's offsets partition, which the
// coordinator writes); open is the partition's report of this producer
// (nil: no transaction of it open there); co is the coordinator's view,
// read after open; stillOpen says whether the partition reported the same
// open transaction again after co was read (DecideHanging's contract: a
// marker the coordinator was about to write would have landed by then,
// since it completes a transaction only after all of its markers are
// written).
func DecideDangling(last LastTxn, lastOffset int64, open *OpenTxn, co CoordinatorView, stillOpen bool) DanglingVerdict {
	if v, previous := openIsPrevious(last, lastOffset, open); !previous {
		return v
	}
	switch {
	case co.DescribeError != nil:
		return DanglingVerdict{Action: DanglingWait, Reason: fmt.Sprintf("transaction coordinator unreadable: %v", co.DescribeError)}
	case !co.Known || co.ProducerID != last.ProducerID:
		return DanglingVerdict{Action: DanglingLeave, Reason: fmt.Sprintf("the transactional id holds producer id %d, not %d", co.ProducerID, last.ProducerID)}
	case co.Epoch != last.EpochAfter:
		// Someone re-initialised the id (a new owner): its transaction
		// may be writing into this one; a marker now could end it.
		return DanglingVerdict{Action: DanglingLeave, Reason: fmt.Sprintf("the coordinator is at epoch %d, this producer at %d: another writer re-initialised the id", co.Epoch, last.EpochAfter)}
	}
	switch co.State {
	case "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return DanglingVerdict{Action: DanglingWait, Reason: "coordinator is writing markers (" + co.State + ")"}
	case "CompleteCommit", "CompleteAbort", "Empty":
	case "Ongoing":
		// This producer's next transaction, at its own epoch (a writer
		// that re-initialised the id would have moved the epoch); the
		// partition holds the previous transaction's records, not its.
	default:
		return DanglingVerdict{Action: DanglingLeave, Reason: "coordinator state " + co.State}
	}
	switch {
	case !stillOpen:
		return DanglingVerdict{Action: DanglingNone, Reason: "its marker landed while the coordinator was read"}
	case co.State == "CompleteAbort":
		return DanglingVerdict{Action: DanglingLeave, Reason: "the coordinator says CompleteAbort, this producer's transaction committed"}
	}
	return DanglingVerdict{Action: DanglingRepair, Commit: true,
		Reason: fmt.Sprintf("coordinator reports %s at epoch %d, the partition still holds epoch %d's transaction open", co.State, co.Epoch, open.Epoch)}
}

// openIsPrevious says from the partition's report alone whether the open
// transaction there holds the previous transaction's records; when it does
// not, the verdict says what it is (nothing to do, or an older one to
// leave). The coordinator need not be read for these.
func openIsPrevious(last LastTxn, lastOffset int64, open *OpenTxn) (DanglingVerdict, bool) {
	switch {
	case open == nil || open.ProducerID != last.ProducerID:
		return DanglingVerdict{Action: DanglingNone}, false
	case lastOffset >= 0 && open.StartOffset > lastOffset:
		return DanglingVerdict{Action: DanglingNone, Reason: "the open transaction began after the previous one's records: the running transaction's"}, false
	case open.Epoch > last.DataEpoch:
		// The running transaction's own write (or one that already joined
		// the previous transaction there: past repair, and not told apart).
		return DanglingVerdict{Action: DanglingNone, Reason: fmt.Sprintf("the open transaction's epoch %d is a later transaction's", open.Epoch)}, false
	case open.Epoch < last.DataEpoch:
		// An older transaction's data: its outcome is not this producer's
		// to know.
		return DanglingVerdict{Action: DanglingLeave, Reason: fmt.Sprintf("the open transaction's epoch %d is older than the previous transaction's %d", open.Epoch, last.DataEpoch)}, false
	case last.DataEpoch == last.EpochAfter:
		// Transaction version 1 keeps the epoch across transactions: the
		// running transaction's own records, or ones a re-sent write
		// already added to the previous transaction there, look the same,
		// and a marker would end them too. Seen only under version 2.
		return DanglingVerdict{Action: DanglingNone, Reason: "transaction version 1: the previous transaction cannot be told from the running one"}, false
	}
	return DanglingVerdict{}, true
}
