// Package actors bootstraps the actor system and holds the supervisor: the
// root of the actor tree, which turns the consumer's partition events into
// partition actors and stops their subtrees on revoke, synchronously.
//
//	supervisor
//	└── partition actor  (one per owned partition; partitionflow)
//	    ├── txn          (the transaction actor: group-commit queue)
//	    └── key actors   (one per loaded key; internal/keyactor)
package actors
