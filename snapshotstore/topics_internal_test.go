package snapshotstore

import "testing"

func TestCleanupPolicyCompacts(t *testing.T) {
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
		if got := cleanupPolicyCompacts(policy); got != want {
			t.Errorf("cleanupPolicyCompacts(%q) = %v, want %v", policy, got, want)
		}
	}
}
