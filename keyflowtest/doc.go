// Package keyflowtest runs a keyflow.Flow without a broker, for tests: what
// Kafka Streams' TopologyTestDriver and goka's tester are to theirs.
//
// A Driver pipes records into the flow (Pipe, PipeRecord; offsets assigned
// per partition), moves processing time by hand (Advance fires the timers
// due, in due-time order), and shows what a worker would have persisted and
// produced: each key's state (State, decoded with the flow's codec), its
// pending timers (Timer), the outputs (Outputs), the dead letters with their
// KIP-1034 headers (DeadLetters), the skipped calls (Skipped) and a
// partition's failure (ErrPartitionFailed). Restart (and RestartAfter, with
// the partitions down for a while) stops every key and reloads it from its
// snapshot at its next record or due timer, re-arming its persisted timers,
// to test durable timers and WithOnLoad; WithReloads does it to each key
// after every call, as a worker may between any two records.
// WithReplayCheck folds every call a second time from the key's persisted
// snapshot, as a worker's recovery replays it, and fails a call whose
// replay differs (ErrNondeterministic): a fold that reads time.Now, a
// random number or a global counter instead of its state, record and
// Context.Now.
//
// The records go through the flow's real key actors (the runtime's fold,
// undo, timer, load-hook, codec and policy code, as in the transactional
// mode of a worker), so a flow that passes its tests under the driver folds
// the same under a worker. What the driver does not simulate: the broker
// and its transactions, rebalances other than Restart, idle unloading
// (WithMaxIdle) and the live-key budget (WithMaxLiveKeys: every key stays
// loaded, unless WithReloads; Restart unloads and reloads them all), the
// plain mode's producer (WithOutput's producer is never
// used), and the wall clock: a flow must take the time from
// keyflow.Context.Now, which is time.Now under a worker.
//
// Every call returns when its effects are done, so tests need no sleeps:
//
//	d := keyflowtest.New(flow)
//	defer d.Close()
//	if err := d.Pipe("user-1", "click"); err != nil {
//		t.Fatal(err)
//	}
//	if err := d.Advance(30 * time.Minute); err != nil { // fires the idle timer
//		t.Fatal(err)
//	}
//	outs := d.Outputs()
package keyflowtest
