package logkey

import (
	"strings"
	"testing"
)

func TestClip(t *testing.T) {
	if got := Clip("acct-1"); got != "acct-1" {
		t.Fatalf("a short key: %q", got)
	}
	long := strings.Repeat("k", 1000)
	if got := Clip(long); got != `"`+strings.Repeat("k", 64)+`"… (1000 bytes)` {
		t.Fatalf("a long key: %q", got)
	}
}
