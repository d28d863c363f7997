// Package kgoproof holds a check of one kgo promise the transactional
// store relies on: EndTransaction(TryCommit) returning nil means the
// transaction committed. kgo v1.22.3 breaks it on a client's first
// transaction to a topic when the goroutine that publishes the topic's
// partitions is descheduled (ARCHITECTURE.md, "A commit kgo did not do is
// redone"). The test passes on an unpatched kgo, where the window is rare;
// scripts/kgo-drop-proof.sh runs it against a copy of kgo that sleeps in the
// window, where it fails while kgo has the bug, and runs the store's
// transaction tests there too, which hold.
package kgoproof
