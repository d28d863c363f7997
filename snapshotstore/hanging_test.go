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
	cases := []struct {
		name  string
		scans []DataScan
		want  TxnOutcome
	}{
		// Seen after a Kafka 4.4.0 restart: the coordinator completed the
		// commit; the offsets partition missed its marker, the snapshot
		// partition got it. Aborting re-emitted committed outputs.
		{"landed commit", []DataScan{committed, untouched}, OutcomeCommit},
		{"landed abort", []DataScan{aborted}, OutcomeAbort},
		// Seen too: no marker anywhere; nothing was visible.
		{"nothing landed", nil, OutcomeAbort},
		{"only untouched partitions", []DataScan{untouched, untouched}, OutcomeAbort},
		{"markers disagree", []DataScan{committed, aborted}, OutcomeUnknown},
		{"a scan cut short", []DataScan{committed, {SawData: true}}, OutcomeUnknown},
		{"data without marker or open transaction", []DataScan{{SawData: true, Complete: true}}, OutcomeUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, why := DecideOutcome(c.scans); got != c.want || why == "" {
				t.Fatalf("DecideOutcome(%+v) = %v (%q), want %v", c.scans, got, why, c.want)
			}
		})
	}
}
