// Package partitionflow is the partition actor: it recovers a partition's
// snapshots, routes each poll batch to one actor per key, tracks the
// committable offset (offsets.go), and owns the partition's transaction
// actor, whose mailbox is the group-commit queue (groupcommit.go,
// txnactor.go). A revoke flushes, commits and stops within a budget
// (revoke.go).
//
// It does not know which persistence mode it runs in: the
// snapshotstore.Partition it is given decides what a commit is.
package partitionflow
