package snapshotstore

import (
	"context"
	"time"
)

// AwaitNewerGeneration polls meta every 20 ms until its generation is above
// gen, for at most within, and returns the newer generation. A member that
// keeps its partitions through a rebalance learns the new generation a
// moment after the broker moved on, and a write sent in between is refused
// for the old one (ILLEGAL_GENERATION, STALE_MEMBER_EPOCH): the writer waits
// here, then writes again. It fails with meta's error (the membership is
// gone: a fence), or the context's when within passes.
func AwaitNewerGeneration(ctx context.Context, meta func() (GroupMetadata, error), gen int32, within time.Duration) (int32, error) {
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if m, err := meta(); err != nil {
			return 0, err
		} else if m.Generation > gen {
			return m.Generation, nil
		}
		select {
		case <-wctx.Done():
			return 0, wctx.Err()
		case <-tick.C:
		}
	}
}
