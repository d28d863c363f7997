package keyflow_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
)

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestDeadLetterRecordHeaders: the original key, value, timestamp and
// headers, then the KIP-1034 headers and the time header.
func TestDeadLetterRecordHeaders(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_000)
	src := &kgo.Record{Topic: "in", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("{not json"), Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte("t1")}}}
	at := time.UnixMilli(1_800_000_000_123)
	dl := keyflow.DeadLetterRecord("in.dlq", src, keyflow.KindUndecodable, errors.New("boom"), at)
	if dl.Topic != "in.dlq" || string(dl.Key) != "k" || string(dl.Value) != "{not json" || !dl.Timestamp.Equal(ts) {
		t.Fatalf("dead letter %+v: want topic in.dlq and the source's key, value and timestamp", dl)
	}
	if dl.Headers[0].Key != "trace-id" {
		t.Errorf("the original headers come first: %+v", dl.Headers)
	}
	want := map[string]string{
		"trace-id":                   "t1",
		"__streams.errors.topic":     "in",
		"__streams.errors.partition": "3",
		"__streams.errors.offset":    "42",
		"__streams.errors.exception": "actorflow.UndecodableInput",
		"__streams.errors.message":   "boom",
		"actorflow.errors.time":      strconv.FormatInt(at.UnixMilli(), 10),
	}
	for k, v := range want {
		if got, ok := header(dl, k); !ok || got != v {
			t.Errorf("header %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if len(src.Headers) != 1 {
		t.Errorf("the source record's headers were modified: %+v", src.Headers)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []keyflow.Policy{keyflow.Fail, keyflow.Skip, keyflow.DeadLetter} {
		if got, err := keyflow.ParsePolicy(p.String()); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := keyflow.ParsePolicy("drop"); err == nil {
		t.Error("ParsePolicy(drop) succeeded")
	}
}
