// Package keyactor is the runtime of a key: the actor that folds one key's
// records into its state, fires its timers, buffers its outputs and
// persists its snapshots, and the messages it exchanges with its partition
// actor (package partitionflow). Package keyflow, the user API, builds a
// Flow of this package from its options and wraps the user's functions;
// the runtime reaches it through Of. Nothing here is part of the public API.
package keyactor
