package snapshotstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFailedRecordErrorNamesTheRecord(t *testing.T) {
	for _, c := range []struct {
		rec  *kgo.Record
		want string
	}{
		{&kgo.Record{Topic: "out", Key: []byte("k"), Value: []byte("vv")}, `record to out with key "k", 3 bytes`},
		{&kgo.Record{Topic: "out", Key: []byte{}, Value: []byte("vv")}, `record to out with key "", 2 bytes`},
		{&kgo.Record{Topic: "out", Value: []byte("vv")}, `record to out without key, 2 bytes`},
		{&kgo.Record{Topic: "out", Key: []byte(strings.Repeat("k", 70))}, `… (70 bytes), 70 bytes`},
	} {
		err := failedRecordError(c.rec, kerr.InvalidRecord)
		if !strings.Contains(err.Error(), c.want) || !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("failedRecordError = %v; want it to say %s and wrap INVALID_RECORD", err, c.want)
		}
	}
}
