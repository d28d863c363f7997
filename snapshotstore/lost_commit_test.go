package snapshotstore

import "testing"

func TestDecideLostCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   DataScan
		want LostCommitVerdict
	}{
		{"commit marker after the marker record", DataScan{SawData: true, Closed: true, Committed: true, Complete: true}, LostCommitCommitted},
		{"abort marker after the marker record", DataScan{SawData: true, Closed: true, Complete: true}, LostCommitAborted},
		{"marker record, no control record yet", DataScan{SawData: true, Complete: true}, LostCommitPending},
		{"scan cut short before any control record", DataScan{SawData: true}, LostCommitUnreadable},
		{"marker record not found at its offset", DataScan{Complete: true}, LostCommitUnreadable},
		{"nothing read", DataScan{}, LostCommitUnreadable},
	} {
		if got := DecideLostCommit(tc.sc); got != tc.want {
			t.Errorf("%s: DecideLostCommit(%+v) = %v, want %v", tc.name, tc.sc, got, tc.want)
		}
	}
}
