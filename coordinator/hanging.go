package coordinator

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
// restart). The outcome is read from the partition every committed
// transaction of that transactional id writes to (actorflow: its snapshot
// partition, which carries each transaction's marker record): the first
// control record of the producer after its data at that epoch (TxnOutcome).
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

// DataScan is what a scan of the transaction's data partition found, from
// before the hanging record's time to the partition's end.
type DataScan struct {
	// SawData: a data record of the producer id at the open epoch.
	SawData bool
	// Closed: a control record of the producer id after that data (with
	// the same or a later epoch: transaction version 2 writes markers with
	// the bumped epoch, a fence aborts with a later one); Committed is its type.
	Closed    bool
	Committed bool
	// Complete: the scan reached the partition's end (not cut short).
	Complete bool
}

// TxnOutcome is the marker to write for a hanging transaction.
type TxnOutcome int

const (
	// OutcomeUnknown: no marker may be written (the outcome is not known).
	OutcomeUnknown TxnOutcome = iota
	OutcomeCommit
	OutcomeAbort
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

// DecideOutcome says which marker ends a hanging transaction on the offsets
// partition, from a scan of the data partition that every committed
// transaction of its transactional id writes to. A transaction with no data
// there never committed (nothing commits without it), so it is aborted; one
// whose data was closed gets the same marker; one whose data is still open
// there is hanging on that partition too, and its outcome is not known.
func DecideOutcome(sc DataScan) (TxnOutcome, string) {
	switch {
	case sc.SawData && sc.Closed && sc.Committed:
		return OutcomeCommit, "its data partition committed it"
	case sc.SawData && sc.Closed:
		return OutcomeAbort, "its data partition aborted it"
	case sc.SawData:
		return OutcomeUnknown, "its data is still open on the data partition"
	case !sc.Complete:
		return OutcomeUnknown, "the data partition could not be read to its end"
	default:
		return OutcomeAbort, "it wrote nothing to its data partition, so it never committed"
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
