// Package keyflow is the user API of actorflow: a Flow folds the records of
// one key into a typed state S, inside one actor per key.
//
// A Flow is defined once — New for a fold of raw records, NewTyped for a
// fold of values decoded by the flow's Decoder — and run by a worker
// (package actorflow). Options (Option) need no type argument, except
// WithCodec, WithTimers and WithOnLoad, which take it from theirs. Each
// key's fold, timers and outputs run on that key's actor, one message at a
// time, so user code needs no locks. The state is persisted as a snapshot
// (Codec, JSON by default) and recovered when the key's partition is
// assigned; each snapshot records the offset of the last record folded into
// it, and replayed records at or below it are skipped, so each record's
// effect on the state is applied exactly once. Outputs emitted with
// Context.Emit are exactly-once in the transactional mode (produced in the
// transaction of the snapshot that covers the fold that emitted them) and
// at-least-once in the plain mode (through the application's producer,
// bounded by a delivery timeout: WithOutputTimeout). Timers are persisted
// with the snapshot and re-armed on load. A fold or timer that returns an error has no effect:
// its outputs and timer changes are dropped, and under a Skip or DeadLetter
// policy its in-place changes to the state are undone.
package keyflow
