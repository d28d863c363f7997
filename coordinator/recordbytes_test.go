package coordinator

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecordBytesCountsKeyValueAndHeaders(t *testing.T) {
	r := &kgo.Record{Key: []byte("key"), Value: make([]byte, 100), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("vv")}}}
	if got := RecordBytes(r); got != 3+100+1+2 {
		t.Fatalf("RecordBytes = %d, want 106", got)
	}
}

// Control records (transaction markers) are never processed, so never
// released: they must not be added either, or the budget never drains.
func TestRecordsLoadLeavesOutControlRecords(t *testing.T) {
	ctrl := &kgo.Record{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0},
		Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})}
	if !ctrl.Attrs.IsControl() {
		t.Fatal("kgo.NewRecordAttrs does not build the control bit")
	}
	recs := []*kgo.Record{{Key: []byte("a"), Value: []byte("12")}, ctrl, {Value: []byte("xyz")}}
	n, bytes := recordsLoad(recs)
	if n != 2 || bytes != 3+3 {
		t.Fatalf("recordsLoad = %d records, %d bytes, want 2, 6", n, bytes)
	}
}
