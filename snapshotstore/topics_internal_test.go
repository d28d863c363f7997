package snapshotstore

import "testing"

func TestCleanupPolicyHas(t *testing.T) {
	for policy, want := range map[string]bool{
		"compact":         true,
		"compact,delete":  true,
		"delete,compact":  true,
		"delete, compact": true,
		"delete":          false,
		"":                false, // Kafka 4.x: neither; nothing ever cleans the log
		"compaction":      false,
		"uncompact":       false,
	} {
		if got := cleanupPolicyHas(policy, "compact"); got != want {
			t.Errorf("cleanupPolicyHas(%q, compact) = %v, want %v", policy, got, want)
		}
	}
}

// Under a policy with delete, retention deletes old segments unless both
// retention.ms and retention.bytes are -1; an absent retention.ms is
// Kafka's default of 7 days.
func TestRetentionDeleting(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		ms, bytes *string
		want      string
	}{
		{nil, nil, "retention.ms=604800000 (the default)"},
		{s("604800000"), s("-1"), "retention.ms=604800000"},
		{s("-1"), nil, ""},
		{s("-1"), s("-1"), ""},
		{s("-1"), s("1073741824"), "retention.bytes=1073741824"},
	} {
		if got := retentionDeleting(tc.ms, tc.bytes); got != tc.want {
			t.Errorf("retentionDeleting(%v, %v) = %q, want %q", tc.ms, tc.bytes, got, tc.want)
		}
	}
}
