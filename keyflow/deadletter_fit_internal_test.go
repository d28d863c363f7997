package keyflow

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kgo"
)

func headerOf(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestDeadLetterShrinksToFitTheProducersBatch: a dead letter that would not
// fit a record batch of the producer's limit drops, in order and only as
// far as it must, the value, the source headers, the message's tail and
// the key, says so in HeaderErrorOmitted, and always keeps the source's
// position; the source record is not modified.
func TestDeadLetterShrinksToFitTheProducersBatch(t *testing.T) {
	const max = 10_000
	srcHeaders := []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}, {Key: "blob", Value: make([]byte, 6000)}}
	for _, tc := range []struct {
		name    string
		key     []byte
		value   int
		headers []kgo.RecordHeader
		err     error
		omitted string // "": the dead letter is the full one
	}{
		{name: "fits", key: []byte("k"), value: 8000, headers: srcHeaders[:1], err: errors.New("boom")},
		{name: "value", key: []byte("k"), value: 9990, headers: srcHeaders, err: errors.New("boom"), omitted: "value=9990"},
		{name: "headers", key: []byte("k"), value: 9990, headers: append(srcHeaders, kgo.RecordHeader{Key: "blob2", Value: make([]byte, 6000)}), err: errors.New("boom"),
			omitted: "value=9990,headers=3"},
		{name: "message", key: bytes.Repeat([]byte("é"), 3000), value: 10, err: fmt.Errorf("fold of key %q: boom", strings.Repeat("é", 3000)),
			omitted: "value=10,message=6020"},
		{name: "key", key: bytes.Repeat([]byte("é"), 4600), value: 10, err: fmt.Errorf("fold of key %q: boom", strings.Repeat("é", 4600)),
			omitted: "value=10,message=9220,key=9200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &kgo.Record{Topic: "in", Partition: 2, Offset: 77, Key: tc.key, Value: make([]byte, tc.value), Headers: tc.headers}
			dl, omitted := runtimeDeadLetter("in.dlq", src, keyactor.KindFoldError, tc.err, time.Now(), max)
			if omitted != tc.omitted {
				t.Fatalf("omitted %q, want %q", omitted, tc.omitted)
			}
			if got, _ := headerOf(dl, HeaderErrorOmitted); got != omitted {
				t.Errorf("header %s = %q, want %q", HeaderErrorOmitted, got, omitted)
			}
			if !recbytes.FitsBatch(dl, max) {
				t.Errorf("dead letter of %d bytes (with its batch) does not fit %d", len(dl.Value)+len(dl.Key), max)
			}
			for k, v := range map[string]string{HeaderErrorTopic: "in", HeaderErrorPartition: "2", HeaderErrorOffset: "77"} {
				if got, ok := headerOf(dl, k); !ok || got != v {
					t.Errorf("header %s = %q (present %v), want %q", k, got, ok, v)
				}
			}
			if msg, _ := headerOf(dl, HeaderErrorMessage); !utf8.ValidString(msg) || !strings.HasPrefix(tc.err.Error(), msg) || msg == "" {
				t.Errorf("message %.40q…: want a valid prefix of the error", msg)
			}
			if len(src.Value) != tc.value || len(src.Headers) != len(tc.headers) {
				t.Errorf("the source record was modified")
			}
			switch {
			case omitted == "":
				if len(dl.Value) != tc.value || len(dl.Headers) != len(tc.headers)+6 {
					t.Errorf("a dead letter that fits lost its value or headers")
				}
			default:
				if dl.Value == nil || len(dl.Value) != 0 {
					t.Errorf("value %v: want empty, not nil (a tombstone to a compacted topic)", dl.Value)
				}
				if len(tc.headers) > 0 {
					_, kept := headerOf(dl, "trace")
					if dropped := strings.Contains(omitted, "headers="); kept == dropped {
						t.Errorf("source header kept %v, omitted %q", kept, omitted)
					}
				}
				if dropped := strings.Contains(omitted, "key="); dropped != (len(dl.Key) == 0) || dl.Key == nil {
					t.Errorf("key of %d bytes (nil %v), omitted %q: want it empty, not nil, when dropped", len(dl.Key), dl.Key == nil, omitted)
				}
			}
		})
	}
}

// TestDeadLetterBelowItsHeaders: a limit below the KIP-1034 headers leaves
// the dead letter as small as it gets, every part listed as omitted (its
// produce then fails naming it).
func TestDeadLetterBelowItsHeaders(t *testing.T) {
	src := &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "h"}}}
	dl, omitted := runtimeDeadLetter("in.dlq", src, keyactor.KindFoldError, errors.New("boom"), time.Now(), 100)
	if omitted != "value=1,headers=1,key=1" || len(dl.Key) != 0 {
		t.Fatalf("omitted %q, key %q: want value, headers and key dropped", omitted, dl.Key)
	}
}

// TestDeadLetterOmitsNoEmptyPart: a tombstone without key keeps its nil
// value (still a tombstone) and lists no empty part; a source header named
// like the message header is dropped with the source's headers, not cut as
// the message.
func TestDeadLetterOmitsNoEmptyPart(t *testing.T) {
	long := strings.Repeat("x", 3000)
	src := &kgo.Record{Topic: "in", Headers: []kgo.RecordHeader{{Key: HeaderErrorMessage, Value: []byte(long)}}}
	dl, omitted := runtimeDeadLetter("in.dlq", src, keyactor.KindNilKey, errors.New(long), time.Now(), 2000)
	if omitted != "headers=1,message=3000" {
		t.Fatalf("omitted %q, want the source's header and the message's tail only", omitted)
	}
	if dl.Value != nil {
		t.Errorf("value %q: a tombstone's dead letter keeps its nil value", dl.Value)
	}
	if msg, _ := headerOf(dl, HeaderErrorMessage); len(msg) != maxOmittedMessage {
		t.Errorf("message of %d bytes, want it cut to %d", len(msg), maxOmittedMessage)
	}
	// Nothing to drop: no omitted header at all.
	small := &kgo.Record{Topic: "in"}
	dl, omitted = runtimeDeadLetter("in.dlq", small, keyactor.KindNilKey, errors.New("e"), time.Now(), 10)
	if _, ok := headerOf(dl, HeaderErrorOmitted); ok || omitted != "" {
		t.Errorf("omitted %q, header present %v: want neither when nothing could be dropped", omitted, ok)
	}
}
