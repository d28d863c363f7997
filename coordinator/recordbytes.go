package coordinator

import "github.com/twmb/franz-go/pkg/kgo"

// RecordBytes is the size a record counts for in the in-flight byte bound
// (Config.MaxInFlightBytes): its key, value and headers, uncompressed, as
// they sit in memory once fetched. kgo's Record struct itself (~200 bytes)
// is not counted: the record bound covers it.
func RecordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// recordsLoad is what recs weigh in the in-flight budget: how many are
// not control records (transaction markers, which are never processed and
// never released), and their bytes.
func recordsLoad(recs []*kgo.Record) (n, bytes int) {
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			n++
			bytes += RecordBytes(r)
		}
	}
	return n, bytes
}
