// Package recbytes sizes records for the in-flight byte bound
// (coordinator.FlowControl): the consumer adds what a fetch delivers and
// the key actors release what they processed, with the same function, so
// the count returns to zero.
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
