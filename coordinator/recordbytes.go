package coordinator

import (
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RecordBytes is the size a record counts for in the in-flight byte bound
// (Config.MaxInFlightBytes): its key, value and headers, uncompressed, as
// they sit in memory once fetched. kgo's Record struct itself (~200 bytes)
// is not counted: the record bound covers it.
func RecordBytes(r *kgo.Record) int { return recbytes.Of(r) }

// recordsLoad is what recs weigh in the in-flight budget: how many are
// not control records (transaction markers, which are never processed and
// never released), and their bytes.
func recordsLoad(recs []*kgo.Record) (n, bytes int) {
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			n++
			bytes += recbytes.Of(r)
		}
	}
	return n, bytes
}
