package prefetch

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// A prefetch is a hint: no address makes it fault, and Bytes reads nothing
// past its slice.
func TestPrefetchNeverFaults(t *testing.T) {
	Line(nil)
	one := make([]byte, 1)
	Line(unsafe.Add(unsafe.Pointer(&one[0]), 1<<30)) // far past its object
	Bytes(nil, 128)
	b := make([]byte, 1000)
	Bytes(b[:0], 128)
	Bytes(b[:1], 128)
	Bytes(b[999:], 128)
	Bytes(b, 0)
	Bytes(b, 4096)
}

type rec struct {
	pad   [128]byte
	value int64
}

// BenchmarkScattered reads records in an order the hardware prefetcher
// cannot guess, as a key actor reads its records in a poll batch: with the
// next ones prefetched, against without. (go test ./internal/prefetch
// -bench Scattered)
func BenchmarkScattered(b *testing.B) {
	const n = 1 << 20 // 136 MiB of records: beyond any cache
	recs := make([]rec, n)
	for i := range recs {
		recs[i].value = int64(i)
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	work := func(v int64) int64 { // a little work per record, as a fold
		for range 50 {
			v = v*31 + 7
		}
		return v
	}
	for _, ahead := range []int{0, 2} {
		name := "plain"
		if ahead > 0 {
			name = "prefetched"
		}
		b.Run(name, func(b *testing.B) {
			var sum int64
			j := 0
			for b.Loop() {
				if ahead > 0 {
					Line(unsafe.Pointer(&recs[order[(j+ahead)%n]].value))
				}
				sum += work(recs[order[j]].value)
				j = (j + 1) % n
			}
			_ = sum
		})
	}
}
