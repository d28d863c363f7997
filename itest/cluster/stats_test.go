package cluster

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Pure measurement helpers: no I/O, unit-tested in stats_unit_test.go (those tests run in every
// `go test ./...`, the cluster or not).

// quantiles returns the q-quantiles of ds (nearest rank), or zeros when ds is empty.
func quantiles(ds []time.Duration, qs ...float64) []time.Duration {
	out := make([]time.Duration, len(qs))
	if len(ds) == 0 {
		return out
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for i, q := range qs {
		// nearest rank: the smallest value with at least q of the values at or below it
		r := int(q*float64(len(s))+0.999999999) - 1
		out[i] = s[min(max(r, 0), len(s)-1)]
	}
	return out
}

// gap is an interval without events.
type gap struct {
	From time.Time
	Len  time.Duration
}

// longestGap returns the longest interval within [from, to) in which no event of ts happened,
// counting from `from` to the first event and from the last event to `to` (an event stream that
// stopped in the window is a stall up to its end). ts need not be sorted.
func longestGap(ts []time.Time, from, to time.Time) gap {
	in := make([]time.Time, 0, len(ts))
	for _, t := range ts {
		if !t.Before(from) && t.Before(to) {
			in = append(in, t)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].Before(in[j]) })
	best := gap{From: from}
	prev := from
	for _, t := range append(in, to) {
		if d := t.Sub(prev); d > best.Len {
			best = gap{From: prev, Len: d}
		}
		prev = t
	}
	return best
}

// window is one fault's measurement interval: from the kill to the next kill (the last: to the
// end of its settle time).
type window struct {
	Name     string
	From, To time.Time
}

func (w window) contains(t time.Time) bool { return !t.Before(w.From) && t.Before(w.To) }

// ms formats a duration in milliseconds below 10 s, else seconds with one decimal.
func ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
