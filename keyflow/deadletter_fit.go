package keyflow

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderErrorOmitted is actorflow's own header on a dead letter that had to
// shrink to fit a record batch of the producer that writes it (its
// ProducerBatchMaxBytes, kgo's default 1 000 012 bytes). A record near the
// limit fails its fold, and its dead letter (the record plus the KIP-1034
// headers) would be refused at every attempt: the partition would stop on
// it for ever. So the dead letter drops, in this order and only as far as
// it must, the source record's value (left empty, not nil: a nil value is a
// tombstone to a compacted topic), its headers, the error message beyond
// maxOmittedMessage bytes, and its key (left empty). The header lists what
// was dropped, comma-separated: the value's, message's and key's sizes in
// bytes, the headers' count ("value=999900",
// "value=2000000,headers=3,message=5000,key=1048576"); an empty part is
// never listed. The source topic, partition and offset headers always
// stay: the dropped parts are read back from the source record while its
// topic retains it. Absent: nothing was dropped.
const HeaderErrorOmitted = "actorflow.errors.omitted"

// maxOmittedMessage is how much of the error message a dead letter keeps
// once its value and headers are dropped and it still does not fit: the
// message names the key (%q), which may be what is too large.
const maxOmittedMessage = 1024

// fitDeadLetter shrinks dl, a dead letter from DeadLetterRecord whose
// first nsrc headers are the source record's, until its record batch fits
// max bytes (0 or less: unchecked). It returns the HeaderErrorOmitted value
// ("": dl fits as it is). A dead letter that cannot shrink enough (a limit
// below its KIP-1034 headers) is returned as small as it gets: its produce
// then fails naming it.
func fitDeadLetter(dl *kgo.Record, nsrc, max int) (omitted string) {
	if max <= 0 || recbytes.FitsBatch(dl, max) {
		return ""
	}
	var parts []string
	// The header goes in first (its value grows below), so that each check
	// counts it.
	dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderErrorOmitted})
	omit := func(part string, n int) bool {
		parts = append(parts, part+"="+strconv.Itoa(n))
		dl.Headers[len(dl.Headers)-1].Value = []byte(strings.Join(parts, ","))
		return recbytes.FitsBatch(dl, max)
	}
	if n := len(dl.Value); n > 0 {
		// Empty, not nil: a nil value is a tombstone to a compacted topic.
		if dl.Value = []byte{}; omit("value", n) {
			return strings.Join(parts, ",")
		}
	}
	if nsrc > 0 {
		dl.Headers = dl.Headers[nsrc:]
		if omit("headers", nsrc) {
			return strings.Join(parts, ",")
		}
	}
	// The message is DeadLetterRecord's, after the source's headers (which
	// may carry one of the same name): dropped above, or none.
	for i := range dl.Headers {
		msg := &dl.Headers[i]
		if msg.Key != HeaderErrorMessage || len(msg.Value) <= maxOmittedMessage {
			continue
		}
		m, cut := msg.Value, maxOmittedMessage
		for cut > 0 && !utf8.RuneStart(m[cut]) {
			cut-- // a message cut inside a rune would not be valid UTF-8
		}
		msg.Value = m[:cut:cut]
		if omit("message", len(m)) {
			return strings.Join(parts, ",")
		}
		break
	}
	if n := len(dl.Key); n > 0 {
		// Empty, not nil: a compacted topic refuses a record without key.
		dl.Key = []byte{}
		omit("key", n)
	}
	if len(parts) == 0 {
		dl.Headers = dl.Headers[:len(dl.Headers)-1] // nothing to drop: no header
	}
	return strings.Join(parts, ",")
}
