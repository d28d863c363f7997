//go:build amd64 || arm64

package prefetch

import "unsafe"

// line prefetches the cache line holding p (PREFETCHT0, PRFM PLDL1KEEP): a
// hint, which never faults.
//
//go:noescape
func line(p unsafe.Pointer)
