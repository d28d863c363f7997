package cluster

import (
	"testing"
	"time"
)

func TestQuantiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := quantiles(ds, 0.5, 0.99, 1)
	want := []time.Duration{50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("quantile %d: %v, want %v", i, got[i], want[i])
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("quantiles sorted its input in place")
	}
	if q := quantiles(nil, 0.5); q[0] != 0 {
		t.Errorf("empty: %v", q)
	}
	if q := quantiles([]time.Duration{7}, 0.01, 0.99); q[0] != 7 || q[1] != 7 {
		t.Errorf("one value: %v", q)
	}
}

func TestLongestGap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cases := []struct {
		name     string
		ts       []time.Time
		from, to time.Time
		want     gap
	}{
		{"inside", []time.Time{at(3), at(1), at(2), at(7), at(8)}, at(0), at(9), gap{at(3), 4 * time.Second}},
		{"before the first event", []time.Time{at(5), at(6)}, at(0), at(7), gap{at(0), 5 * time.Second}},
		{"stopped before the end", []time.Time{at(1), at(2)}, at(0), at(10), gap{at(2), 8 * time.Second}},
		{"no event at all", nil, at(0), at(4), gap{at(0), 4 * time.Second}},
		{"events outside are ignored", []time.Time{at(-5), at(1), at(2), at(3), at(20)}, at(1), at(3.5), gap{at(1), time.Second}},
	}
	for _, c := range cases {
		if got := longestGap(c.ts, c.from, c.to); !got.From.Equal(c.want.From) || got.Len != c.want.Len {
			t.Errorf("%s: %v from %v, want %v from %v", c.name, got.Len, got.From.Sub(t0), c.want.Len, c.want.From.Sub(t0))
		}
	}
}
