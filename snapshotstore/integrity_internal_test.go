package snapshotstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

func snapRec(key string, offset int64, value string) *kgo.Record {
	r := EncodeRecord("snaps", 0, Snapshot{Key: key, Value: []byte(value), Offset: offset})
	return r
}

func foreignRec(key string) *kgo.Record { // no actorflow headers: another client wrote it
	return &kgo.Record{Topic: "snaps", Key: []byte(key), Value: []byte("{}")}
}

func run(t *testing.T, opts IntegrityOptions, a *Assignment, recs ...*kgo.Record) (map[string]Snapshot, []string, error) {
	t.Helper()
	c := newRecoveryCheck("snaps[0]", opts, zap.NewNop())
	got := map[string]Snapshot{}
	for i, r := range recs {
		r.Offset = int64(i)
		if s, ok := c.add(r); ok {
			got[s.Key] = s
		}
	}
	drop, err := c.finish("in[0]", a)
	return got, drop, err
}

func TestRecoveryCheckUndecodableRecords(t *testing.T) {
	// Superseded by a later valid record of its key: skipped.
	got, _, err := run(t, IntegrityOptions{}, nil, foreignRec("a"), snapRec("a", 5, "v"))
	if err != nil || got["a"].Offset != 5 {
		t.Fatalf("superseded undecodable record: err %v, state %+v", err, got)
	}
	// The latest record of a key is undecodable: the partition fails, naming
	// the key and the record's position.
	_, _, err = run(t, IntegrityOptions{}, nil, snapRec("a", 5, "v"), foreignRec("a"), snapRec("b", 6, "w"))
	var ue *UndecodableSnapshotError
	if !errors.Is(err, ErrUndecodableSnapshot) || !errors.As(err, &ue) || len(ue.Keys) != 1 || ue.Keys["a"] == nil ||
		!strings.Contains(err.Error(), `key "a"`) || !strings.Contains(err.Error(), "snaps[0]@1") {
		t.Fatalf("undecodable latest record: %v", err)
	}
	// The way out: drop that key's state. It had an earlier valid snapshot,
	// which the caller must forget.
	_, drop, err := run(t, IntegrityOptions{DropUndecodable: true}, nil, snapRec("a", 5, "v"), foreignRec("a"), foreignRec("c"))
	if err != nil || len(drop) != 1 || drop[0] != "a" {
		t.Fatalf("drop option: err %v, drop %v (want [a]: c never had state)", err, drop)
	}
}

func TestRecoveryCheckLostState(t *testing.T) {
	committed := func(off, start int64) *Assignment { return &Assignment{Offset: off, Committed: true, LogStart: start} }
	marker := func(off int64) *kgo.Record { return markerRecord("snaps", 0, off) }
	for _, tc := range []struct {
		name string
		a    *Assignment
		recs []*kgo.Record
		lost bool
	}{
		{"fresh partition, nothing committed", &Assignment{Offset: 0, LogStart: 0}, nil, false},
		{"no assignment known", nil, nil, false},
		{"committed, no history at all (topic deleted and re-created)", committed(500, 0), nil, true},
		{"committed at the log start: nothing to lose", committed(300, 300), nil, false},
		{"committed, marker equal", committed(500, 0), []*kgo.Record{snapRec("a", 499, "v"), marker(500)}, false},
		{"committed above the latest marker (truncated)", committed(900, 0), []*kgo.Record{snapRec("a", 499, "v"), marker(500)}, true},
		{"marker above committed (plain: marker written, commit failed)", committed(400, 0), []*kgo.Record{marker(500)}, false},
		{"legacy snapshots without markers", committed(500, 0), []*kgo.Record{snapRec("a", 499, "v")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, IntegrityOptions{}, tc.a, tc.recs...)
			if tc.lost != errors.Is(err, ErrLostState) {
				t.Fatalf("err = %v, want lost=%v", err, tc.lost)
			}
			if tc.lost {
				for _, want := range []string{"in[0]", "snaps[0]", "committed input offset"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not name %q", err, want)
					}
				}
				if _, _, err := run(t, IntegrityOptions{ResetLostState: true}, tc.a, tc.recs...); err != nil {
					t.Fatalf("with ResetLostState: %v", err)
				}
			}
		})
	}
}
