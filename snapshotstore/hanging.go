package snapshotstore

import (
	"fmt"
	"unicode/utf16"
)

// Hanging transactions (KIP-664) on the group's offsets partition.
//
// A transactional offset commit stays "unstable" (UNSTABLE_OFFSET_COMMIT
// to a require_stable fetch, KIP-447) until its transaction's marker lands
// on the __consumer_offsets partition. If the transaction coordinator never
// writes that marker, the partition's committed offset can never be read
// and the partition can never start: a hanging transaction. Kafka 4.4.0 was
// seen leaving one behind when it is restarted while a transactional offset
// commit is open (scripts/chaos.sh, broker_restart; DescribeProducers shows
// the producer's transaction open at an epoch the coordinator has long
// moved past). The transaction coordinator's log shows why: the
// transaction reached CompleteCommit, yet the commit marker for the offsets
// partition never landed (the broker stopped while writing it).
//
// The cure is KIP-664's: a marker written straight to the partition
// (WriteTxnMarkers) — but with the transaction's real outcome. An abort
// marker, which is what `kafka-transactions.sh abort` writes, rolls back
// the offset commit of a transaction whose snapshots and outputs were
// committed: the partition replays from an older offset and emits outputs
// a read_committed consumer already saw (seen: 4–5 duplicates per broker
// restart). A transaction may also hang on its data partitions (its
// snapshots and outputs: seen too, with no marker written anywhere). So
// the markers are written to every partition where the transaction is still
// open, with the outcome of the markers that did land (DecideOutcome).
//
// This file is the decision, free of I/O; hanging_kafka.go gathers the
// facts and writes the marker.

// OpenTxn is a transaction a partition's leader reports open
// (DescribeProducers: the producer has a current transaction start offset).
type OpenTxn struct {
	ProducerID       int64
	Epoch            int16
	CoordinatorEpoch int32
	StartOffset      int64
}

// CoordinatorView is what the transaction coordinator reports for the
// open transaction's producer id (ListTransactions by producer id, then
// DescribeTransactions), read after the partition's first report and before
// its confirming second one.
type CoordinatorView struct {
	// Known: some transactional id is bound to the producer id.
	Known         bool
	TxnID         string
	ProducerID    int64
	Epoch         int16
	State         string
	HasPartition  bool // the partition is in the coordinator's transaction
	DescribeError error
}

// HangingVerdict is the decision for one open transaction.
type HangingVerdict struct {
	Hanging bool
	// Reason says why, for the log line.
	Reason string
}

// DecideHanging says whether an open transaction on a partition is
// hanging: its coordinator will never write its marker there. It must be
// called only with a coordinator view read after the partition first
// reported the transaction open, and acted on only if the partition still
// reports the same transaction open after that view was read (then a marker
// the coordinator was about to write would have landed: the coordinator
// completes a transaction only after all its markers are written).
//
// Conservative where unsure: a transaction whose markers may be in flight
// (Prepare* states) or that the coordinator still runs with this partition
// is never hanging; an unreadable coordinator view is not evidence.
func DecideHanging(open OpenTxn, co CoordinatorView) HangingVerdict {
	switch {
	case co.DescribeError != nil:
		return HangingVerdict{Reason: fmt.Sprintf("transaction coordinator unreadable: %v", co.DescribeError)}
	case !co.Known:
		// No transactional id holds the producer id any more (expired,
		// transactional.id.expiration.ms): nobody will ever end it.
		return HangingVerdict{Hanging: true, Reason: "no transactional id holds the producer id"}
	case co.ProducerID != open.ProducerID:
		return HangingVerdict{Hanging: true, Reason: fmt.Sprintf("transactional id %q moved to producer id %d", co.TxnID, co.ProducerID)}
	}
	switch co.State {
	case "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		// Markers may be in flight (under transaction version 2 with the
		// bumped epoch already).
		return HangingVerdict{Reason: "coordinator is writing markers (" + co.State + ")"}
	case "Ongoing":
		if co.Epoch == open.Epoch && co.HasPartition {
			return HangingVerdict{Reason: "transaction still running on its coordinator"}
		}
		if co.Epoch < open.Epoch {
			return HangingVerdict{Reason: fmt.Sprintf("coordinator epoch %d behind the partition's %d", co.Epoch, open.Epoch)}
		}
		if co.Epoch == open.Epoch {
			return HangingVerdict{Hanging: true, Reason: fmt.Sprintf("transaction %q epoch %d runs without this partition", co.TxnID, co.Epoch)}
		}
		return HangingVerdict{Hanging: true, Reason: fmt.Sprintf("transaction %q runs at epoch %d, the partition's is %d", co.TxnID, co.Epoch, open.Epoch)}
	case "Empty", "CompleteCommit", "CompleteAbort", "Dead":
		if co.Epoch < open.Epoch {
			return HangingVerdict{Reason: fmt.Sprintf("coordinator epoch %d behind the partition's %d", co.Epoch, open.Epoch)}
		}
		return HangingVerdict{Hanging: true, Reason: fmt.Sprintf("transaction %q is %s at epoch %d with no transaction open here", co.TxnID, co.State, co.Epoch)}
	default:
		return HangingVerdict{Reason: "unknown coordinator state " + co.State}
	}
}

// DataScan is what a scan of one partition the transaction may have ended
// on found, from before the hanging record's time to the partition's end.
type DataScan struct {
	// SawData: a data record of the producer id at the open epoch.
	SawData bool
	// Err is why the read did not complete (Complete false): for the
	// logs and errors of an outcome that stays unknown.
	Err error
	// Closed: a control record of the producer id after that data (with
	// the same or a later epoch: transaction version 2 writes markers with
	// the bumped epoch, a fence aborts with a later one); Committed is its type.
	Closed    bool
	Committed bool
	// SameEpochMarker: that control record carries the data's own epoch.
	// Under transaction version 2 (KIP-890) the coordinator writes its
	// markers with the epoch its EndTxn bumped, so a marker with the data's
	// epoch is a KIP-664 one (this resolver's, ending the same transaction
	// elsewhere) and tells the outcome. Under version 1 the epoch lasts the
	// producer's whole session: the marker may be an earlier transaction's
	// of the same epoch, and tells nothing about this one.
	SameEpochMarker bool
	// Complete: the scan reached the partition's end (not cut short).
	Complete bool
	// Bumped: the partition's leader lists the producer at the epoch
	// after the open one (exactly: a later transaction's partitions show
	// two or more past it) with no transaction open. Under transaction
	// version 2 a marker of this transaction, written with the bumped
	// epoch, landed there, so its data is there: a scan that saw none
	// started after it (records carrying older timestamps than the
	// hanging one's: event times, a redo's first attempt), and the outcome
	// is not known — nor when the version could not be read.
	Bumped bool
}

// TxnOutcome is the marker to write for a hanging transaction.
type TxnOutcome int

const (
	// OutcomeUnknown: no marker may be written (the outcome is not known).
	OutcomeUnknown TxnOutcome = iota
	OutcomeCommit             // write commit markers: the markers that landed say it committed
	OutcomeAbort              // write abort markers: none landed, or those that did say it aborted
)

func (o TxnOutcome) String() string {
	switch o {
	case OutcomeCommit:
		return "commit"
	case OutcomeAbort:
		return "abort"
	default:
		return "unknown"
	}
}

// DecideOutcome says which marker ends a hanging transaction on every
// partition where it is still open, from scans of the partitions where it
// may already have ended (the producer is there at the open epoch or a
// later one, with no transaction open). What matters is atomicity: the
// markers still missing must match the ones that landed, whatever the
// coordinator's log says (Kafka 4.4.0 was seen completing commits whose
// markers landed on some partitions or on none). If none landed, no
// read_committed reader saw any of the transaction, and an abort is safe
// (the partition replays its records). Unknown when a scan was cut short,
// when the landed markers disagree, when a partition shows the data but
// no marker although its leader reported no open transaction, or when a
// marker carries the data's own epoch and the cluster's transaction
// version, tv (the finalized transaction.version feature; -1: unknown), is
// not 2 or more (see DataScan.SameEpochMarker): under version 1 every
// marker carries its data's epoch, so there a landed marker is never used
// and the hanging transaction is left to the manual command. The version
// is the cluster's, not the transaction's: a transaction written before
// the cluster's upgrade to version 2, or by a client that caps EndTxn
// below v5 (transaction version 1 on a version-2 cluster), could still be
// misread; this store's producers use version 2 wherever the cluster
// finalizes it.
func DecideOutcome(scans []DataScan, tv int16) (TxnOutcome, string) {
	commits, aborts := 0, 0
	for _, sc := range scans {
		switch {
		case !sc.Complete:
			return OutcomeUnknown, "a partition of the transaction could not be read to its end"
		case sc.SawData && !sc.Closed:
			return OutcomeUnknown, "a partition shows the transaction's data without a marker but no open transaction"
		case sc.Closed && sc.SameEpochMarker && tv < 2:
			return OutcomeUnknown, fmt.Sprintf("a marker carries the data's own epoch under transaction version %d: it may close an earlier transaction of the same producer epoch", tv)
		case sc.Bumped && !sc.SawData && (tv >= 2 || tv < 0):
			// Read as "nothing of it visible", an abort there duplicated
			// the outputs its commit made visible (found by a review).
			return OutcomeUnknown, "a partition's producer epoch shows a marker of the transaction, but the scan found none of its data (it starts by timestamp, and the data carries older ones)"
		case sc.Closed && sc.Committed:
			commits++
		case sc.Closed:
			aborts++
		}
	}
	switch {
	case commits > 0 && aborts > 0:
		return OutcomeUnknown, fmt.Sprintf("its markers disagree (%d commits, %d aborts)", commits, aborts)
	case commits > 0:
		return OutcomeCommit, fmt.Sprintf("%d of its partitions committed it", commits)
	case aborts > 0:
		return OutcomeAbort, fmt.Sprintf("%d of its partitions aborted it", aborts)
	default:
		return OutcomeAbort, "no partition shows it ended: nothing of it was visible"
	}
}

// OffsetsPartition is the __consumer_offsets partition holding group's
// offsets: abs(javaHashCode(group)) % partitions, the group coordinator's
// own placement (GroupCoordinatorService.partitionFor; Utils.abs maps
// MinInt32 to 0).
func OffsetsPartition(group string, partitions int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}
