// Package actorflow runs stateful per-key flows on Kafka as an actor tree.
//
// Define a flow over typed state with package keyflow, then run it with a
// Worker: one member of a consumer group, whose partitions become partition
// actors, whose keys become key actors, and whose snapshots and offsets are
// committed by one transaction actor per partition. See ARCHITECTURE.md.
package actorflow
