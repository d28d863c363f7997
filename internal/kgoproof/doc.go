// Package kgoproof holds a check of one kgo promise the transactional
// store relies on: EndTransaction(TryCommit) returning nil means the
// transaction committed. kgo v1.22.3 breaks it on a client's first
// transaction to a topic when the goroutine that publishes the topic's
// partitions is descheduled (ARCHITECTURE.md, "A commit kgo did not do is
// redone"). scripts/kgo-drop-proof.sh runs it (it skips without
// KGO_PROOF_DELAY) against a copy of kgo that sleeps in the window, where it
// fails while kgo has the bug, and runs the store's tests there too, which
// hold.
package kgoproof
