package main

import (
	"strings"
	"testing"
)

// The audit tells each broker anomaly apart: a transaction committed on one
// partition and aborted on another, an aborted record visible to
// read_committed, a committed one hidden, a record still open; a
// transaction committed everywhere and visible is none of them.
func TestAuditRecordsFindsEachAnomaly(t *testing.T) {
	data := func(topic string, off, pid int64, epoch int16) auditRec {
		return auditRec{Topic: topic, Offset: off, ProducerID: pid, ProducerEpoch: epoch, Transactional: true}
	}
	marker := func(topic string, off, pid int64, epoch int16, commit bool) auditRec {
		return auditRec{Topic: topic, Offset: off, ProducerID: pid, ProducerEpoch: epoch, Transactional: true, Control: true, Commit: commit}
	}
	all := []auditRec{
		// snaps[0]: A (pid 1 epoch 5) committed, B (pid 1 epoch 6) committed, C's data then its commit, D open.
		data("snaps", 0, 1, 5), marker("snaps", 1, 1, 6, true),
		data("snaps", 2, 1, 6), marker("snaps", 3, 1, 7, true),
		data("snaps", 4, 2, 1), marker("snaps", 5, 2, 2, true),
		data("snaps", 6, 3, 1),
		// out[0]: A committed, B aborted (disagrees with snaps), a plain record.
		data("out", 0, 1, 5), marker("out", 1, 1, 6, true),
		data("out", 2, 1, 6), marker("out", 3, 1, 7, false),
		{Topic: "out", Offset: 4, ProducerID: 9},
	}
	visible := []auditRec{
		data("snaps", 0, 1, 5), data("snaps", 2, 1, 6), // C's snaps[0]@4 hidden
		data("out", 0, 1, 5), data("out", 2, 1, 6), // B's aborted out[0]@2 visible
		{Topic: "out", Offset: 4, ProducerID: 9},
	}
	a := auditRecords(all, visible)
	if !a.PerTransaction || a.Transactions != 4 || a.Disagreements != 1 || a.VisibleAborted != 1 || a.HiddenCommitted != 1 || a.Open != 1 || a.clean() {
		t.Fatalf("audit %+v: want 4 transactions, 1 disagreement (B), 1 visible aborted (out@2), 1 hidden committed (snaps@4), 1 open (snaps@6)", a)
	}
	ex := strings.Join(a.Examples, "\n")
	for _, w := range []string{
		"out[0]@2 (producer 1 epoch 6) is visible to read_committed, but its transaction aborted",
		"snaps[0]@4 (producer 2 epoch 1) is hidden from read_committed",
		"transaction of producer 1 epoch 6 committed on snaps[0] and aborted on out[0]",
	} {
		if !strings.Contains(ex, w) {
			t.Errorf("examples lack %q:\n%s", w, ex)
		}
	}

	// A transaction whose marker never landed on one partition (epoch 5 on
	// snaps) takes the outcome of the producer's next transaction there:
	// one abort marker closes epochs 5 and 6, and epoch 5, committed on
	// out, disagrees.
	m := auditRecords([]auditRec{
		data("snaps", 0, 1, 5), data("snaps", 1, 1, 6), marker("snaps", 2, 1, 7, false),
		data("out", 0, 1, 5), marker("out", 1, 1, 6, true),
	}, []auditRec{data("out", 0, 1, 5)})
	if m.Merged != 1 || m.Disagreements != 1 {
		t.Fatalf("merged audit %+v: want 1 merged marker and 1 disagreement", m)
	}
	if ex := strings.Join(m.Examples, "\n"); !strings.Contains(ex, "snaps[0]@2: one abort marker (producer 1 epoch 7) closed the data of epochs [5 6] from offset 0") {
		t.Errorf("examples lack the merged marker:\n%s", ex)
	}
	if a.Merged != 0 {
		t.Errorf("audit %+v: no marker closes two transactions there", a)
	}

	// Transaction version 1 (a control record keeps its data's epoch): an
	// epoch spans transactions, so no agreement check.
	v1 := auditRecords([]auditRec{
		data("snaps", 0, 1, 5), marker("snaps", 1, 1, 5, true),
		data("out", 0, 1, 5), marker("out", 1, 1, 5, false),
	}, []auditRec{data("snaps", 0, 1, 5)})
	if v1.PerTransaction || v1.Disagreements != 0 || !v1.clean() {
		t.Fatalf("version-1 audit %+v: want no agreement check and nothing else", v1)
	}
}
