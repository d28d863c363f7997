// Package recbytes sizes records, in one place for its two uses: the
// in-flight byte bound (coordinator.FlowControl: the consumer adds what a
// fetch delivers and the key actors release what they processed, with the
// same function, so the count returns to zero), and the producer's record
// batch limit (ProducerBatchMaxBytes), which outputs, dead letters and
// snapshot records are checked against before they go into a transaction
// that would otherwise fail at every attempt.
package recbytes

import "github.com/twmb/franz-go/pkg/kgo"

// Of is the size a record counts for: its key, value and headers,
// uncompressed, as they sit in memory once fetched. kgo's Record struct
// itself (~200 bytes) is not counted: the record bound covers it.
func Of(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// Framing is the most a record batch of one record with headers headers
// adds to the record's key, value and headers (KIP-98's format, v2): the
// batch header (61 bytes: base offset, length, leader epoch, magic, CRC,
// attributes, last offset delta, first and max timestamps, producer id and
// epoch, base sequence, record count), the record's own varints (length,
// attributes, timestamp and offset deltas, key and value lengths, header
// count: at most 36) and two length varints per header (at most 10). kgo
// compares the whole batch with ProducerBatchMaxBytes.
func Framing(headers int) int { return 61 + 36 + HeaderFraming*headers }

// HeaderFraming is the most one header adds to a record's framing: its
// key's and value's length varints.
const HeaderFraming = 10

// FitsBatch reports whether a record batch of r alone fits max bytes.
func FitsBatch(r *kgo.Record, max int) bool { return Of(r)+Framing(len(r.Headers)) <= max }

// ProducerLimit is the largest record batch cl sends to a topic (nil: cl
// is nil or has no ProducerBatchMaxBytesFn): its ProducerBatchMaxBytes, or
// less when its BrokerMaxWriteBytes leaves less room in a produce request
// of one partition, as kgo itself bounds a batch
// (maxRecordBatchBytesForTopic, sink.go). Read it once, when the producer
// is set up: kgo's OptValue finds an option by its function's name, far
// too slow per record.
func ProducerLimit(cl *kgo.Client) func(topic string) int {
	if cl == nil {
		return nil
	}
	fn, _ := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)
	if fn == nil {
		return nil
	}
	wire, _ := cl.OptValue(kgo.BrokerMaxWriteBytes).(int32)
	id, _ := cl.OptValue(kgo.ClientID).(string)
	txnID, _ := cl.OptValue(kgo.TransactionalID).(string)
	// A produce request's fixed fields (27), its optional ids, and one
	// topic (2 + its name or ID) with one partition (12): kgo's
	// baseProduceRequestLength and minOnePartitionBatchLength.
	request := 27 + len(id) + len(txnID) + 2 + 12
	return func(topic string) int {
		limit := int(fn(topic))
		if wire > 0 {
			if room := int(wire) - request - max(16, len(topic)); room < limit {
				limit = room
			}
		}
		return limit
	}
}
