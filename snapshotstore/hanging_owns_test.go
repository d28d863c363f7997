package snapshotstore

import "testing"

// Only this store's transactional ids may have their hanging transactions
// ended by it.
func TestOwnsTransactionalID(t *testing.T) {
	k, err := NewKafka([]string{"127.0.0.1:1"}, "snaps", KafkaConfig{TransactionalIDPrefix: "app-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for id, want := range map[string]bool{
		"app-1-in-2-0":  true,
		"app-1-in-2-17": true,
		"app-1-in-0":    true,
		"app-1-in-2-x":  false,
		"app-1-in-2-":   false,
		"app-1-in-2-01": false, // not what TransactionalID prints
		"app-1-":        false,
		"app-2-in-2-0":  false,
		"other-in-2-0":  false,
	} {
		if got := k.ownsTransactionalID(id); got != want {
			t.Errorf("ownsTransactionalID(%q) = %v, want %v", id, got, want)
		}
	}
}
