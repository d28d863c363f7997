package keyflow_test

import (
	"errors"
	"strconv"
	"strings"
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

// ParseDeadLetter reads back what DeadLetterRecord wrote, the dead
// letter's own headers winning over the source's of the same names, and
// refuses a record without them, naming the header.
func TestParseDeadLetter(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	// A dead letter's, reprocessed: its own headers, one malformed, and
	// optional ones the outer dead letter does not set.
	src := &kgo.Record{Topic: "in", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: keyflow.HeaderErrorTopic, Value: []byte("older")},
			{Key: keyflow.HeaderErrorPartition, Value: []byte("x")}, {Key: keyflow.HeaderErrorOffset, Value: []byte("7")},
			{Key: keyflow.HeaderErrorOmitted, Value: []byte("value=3000")}, {Key: keyflow.HeaderErrorSourceTime, Value: []byte("5")}}}
	dl := keyflow.DeadLetterRecord("in.dlq", src, keyflow.KindUndecodable, errors.New("boom"), at)
	dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: keyflow.HeaderErrorSourceTime, Value: []byte("1000")})
	got, err := keyflow.ParseDeadLetter(dl)
	want := keyflow.DeadLetterInfo{Topic: "in", Partition: 3, Offset: 42, Kind: keyflow.KindUndecodable, Message: "boom",
		Time: at, SourceTime: time.UnixMilli(1000).UTC()}
	if err != nil || got != want {
		t.Fatalf("ParseDeadLetter = %+v, %v; want %+v", got, err, want)
	}
	outer := keyflow.DeadLetterRecord("in.dlq", src, keyflow.KindFoldError, errors.New("again"), at)
	if got, err := keyflow.ParseDeadLetter(outer); err != nil || got.Offset != 42 || got.Omitted != "" || !got.SourceTime.IsZero() {
		t.Fatalf("a dead letter of a dead letter: %+v, %v; want its own headers only (offset 42, nothing omitted, no source time)", got, err)
	}
	if _, err := keyflow.ParseDeadLetter(&kgo.Record{Topic: "in"}); err == nil || !strings.Contains(err.Error(), keyflow.HeaderErrorTopic) {
		t.Fatalf("a record that is no dead letter: %v, want an error naming %s", err, keyflow.HeaderErrorTopic)
	}
	bad := keyflow.DeadLetterRecord("in.dlq", src, keyflow.KindFoldError, nil, at)
	bad.Headers = append(bad.Headers, kgo.RecordHeader{Key: keyflow.HeaderErrorPartition, Value: []byte("x")})
	if _, err := keyflow.ParseDeadLetter(bad); err == nil || !strings.Contains(err.Error(), keyflow.HeaderErrorPartition) {
		t.Fatalf("a malformed partition header: %v, want an error naming it", err)
	}
}
