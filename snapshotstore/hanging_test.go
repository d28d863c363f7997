package snapshotstore

import (
	"errors"
	"testing"
)

func TestOffsetsPartitionMatchesTheGroupCoordinator(t *testing.T) {
	cases := []struct {
		group string
		n     int32
		want  int32
	}{
		{"ledger", 50, 39}, // seen on Apache Kafka 4.4.0: the group's offsets on __consumer_offsets-39
		{"a", 50, 97 % 50},
		{"polygenelubricants", 50, 0}, // Java hashCode is MinInt32: Utils.abs gives 0
		{"ü€😀", 50, 0},                // UTF-16 code units, surrogate pairs included
	}
	// "ü€😀": 0xFC, 0x20AC, 0xD83D, 0xDE00 → h = ((0xFC*31+0x20AC)*31+0xD83D)*31+0xDE00
	h := int32(0)
	for _, u := range []int32{0xFC, 0x20AC, 0xD83D, 0xDE00} {
		h = 31*h + u
	}
	if h < 0 {
		h = -h
	}
	cases[3].want = h % 50
	for _, c := range cases {
		if got := OffsetsPartition(c.group, c.n); got != c.want {
			t.Errorf("OffsetsPartition(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
	}
}

func TestDecideHanging(t *testing.T) {
	open := OpenTxn{ProducerID: 7, Epoch: 15, StartOffset: 185}
	view := func(state string, epoch int16, has bool) CoordinatorView {
		return CoordinatorView{Known: true, TxnID: "ledger-ledger-0", ProducerID: 7, Epoch: epoch, State: state, HasPartition: has}
	}
	cases := []struct {
		name string
		co   CoordinatorView
		want bool
	}{
		// The case seen after a broker restart: the coordinator moved on.
		{"coordinator empty at a later epoch", view("Empty", 19, false), true},
		{"coordinator completed a later transaction", view("CompleteCommit", 16, false), true},
		{"coordinator completed at the same epoch (transaction version 1)", view("CompleteAbort", 15, false), true},
		{"a later transaction runs", view("Ongoing", 17, true), true},
		{"the same transaction runs without this partition", view("Ongoing", 15, false), true},
		{"no transactional id holds the producer id", CoordinatorView{}, true},
		{"the transactional id moved to another producer id", CoordinatorView{Known: true, ProducerID: 8, Epoch: 0, State: "Empty"}, true},
		// Never abort what may still end by itself.
		{"the transaction still runs with this partition", view("Ongoing", 15, true), false},
		{"markers in flight (transaction version 2 bumps the epoch first)", view("PrepareCommit", 16, false), false},
		{"abort markers in flight", view("PrepareAbort", 16, false), false},
		{"epoch fence in flight", view("PrepareEpochFence", 16, false), false},
		{"coordinator behind the partition", view("Empty", 14, false), false},
		{"coordinator unreadable", CoordinatorView{DescribeError: errors.New("COORDINATOR_LOAD_IN_PROGRESS")}, false},
		{"unknown state", view("Frobnicating", 19, false), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := DecideHanging(open, c.co)
			if v.Hanging != c.want {
				t.Fatalf("DecideHanging = %+v, want hanging %v", v, c.want)
			}
			if v.Reason == "" {
				t.Fatalf("no reason given: %+v", v)
			}
		})
	}
}

func TestDecideOutcome(t *testing.T) {
	committed := DataScan{SawData: true, Closed: true, Committed: true, Complete: true}
	aborted := DataScan{SawData: true, Closed: true, Complete: true}
	untouched := DataScan{Complete: true}
	ownEpoch := DataScan{SawData: true, Closed: true, Committed: true, Complete: true, SameEpochMarker: true}
	cases := []struct {
		name  string
		scans []DataScan
		want  TxnOutcome
		tv    int16 // the cluster's transaction version
	}{
		// Seen after a Kafka 4.4.0 restart: the coordinator completed the
		// commit; the offsets partition missed its marker, the snapshot
		// partition got it. Aborting re-emitted committed outputs.
		{"landed commit", []DataScan{committed, untouched}, OutcomeCommit, 2},
		{"landed abort", []DataScan{aborted}, OutcomeAbort, 2},
		// Seen too: no marker anywhere; nothing was visible.
		{"nothing landed", nil, OutcomeAbort, 2},
		{"only untouched partitions", []DataScan{untouched, untouched}, OutcomeAbort, 2},
		{"markers disagree", []DataScan{committed, aborted}, OutcomeUnknown, 2},
		{"a scan cut short", []DataScan{committed, {SawData: true}}, OutcomeUnknown, 2},
		{"data without marker or open transaction", []DataScan{{SawData: true, Complete: true}}, OutcomeUnknown, 0},
		// Under version 2 a marker with the data's epoch is a KIP-664 one,
		// this resolver's on another partition (seen on Kafka 4.4.0: the
		// partition stayed blocked when it was refused).
		{"own-epoch marker, version 2", []DataScan{ownEpoch}, OutcomeCommit, 2},
		// Under version 1 it may close an earlier transaction.
		{"own-epoch marker, version 1", []DataScan{ownEpoch}, OutcomeUnknown, 1},
		{"own-epoch marker, version 0", []DataScan{ownEpoch}, OutcomeUnknown, 0},
		{"own-epoch marker, version unknown", []DataScan{ownEpoch}, OutcomeUnknown, -1},
		{"bumped-epoch marker, version 1", []DataScan{committed}, OutcomeCommit, 1},
		// The leader lists the producer past the open epoch: a marker of
		// the transaction landed there, and a scan that saw none of its
		// data started after it (outputs with older timestamps). Read as
		// "nothing visible", the abort duplicated committed outputs
		// (found by a review).
		{"a landed marker the scan missed", []DataScan{{Complete: true, Bumped: true}, untouched}, OutcomeUnknown, 2},
		{"a landed marker the scan found", []DataScan{{SawData: true, Closed: true, Committed: true, Complete: true, Bumped: true}}, OutcomeCommit, 2},
		{"a landed marker the scan missed, version unknown", []DataScan{{Complete: true, Bumped: true}}, OutcomeUnknown, -1},
		// Under version 1 the epoch does not move at EndTxn: it tells nothing.
		{"an epoch bump under version 1", []DataScan{{Complete: true, Bumped: true}}, OutcomeAbort, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, why := DecideOutcome(c.scans, c.tv); got != c.want || why == "" {
				t.Fatalf("DecideOutcome(%+v) = %v (%q), want %v", c.scans, got, why, c.want)
			}
		})
	}
}
