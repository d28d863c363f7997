package scenarios

import (
	"testing"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/snapshotstore"
)

// Case is one integration scenario.
type Case struct {
	Name string
	// Parallel cases mostly wait on group heartbeats.
	Parallel bool
	Run      func(t *testing.T, brokers []string)
}

// Suite lists every scenario, so that the embedded broker (root package) and
// the real broker (itest/) run the same list under the same names.
func Suite() []Case {
	cases := []Case{
		{Name: "Corruption732Plain", Run: func(t *testing.T, b []string) { Corruption732(t, b, snapshotstore.Plain) }},
		{Name: "Corruption732Transactional", Run: func(t *testing.T, b []string) { Corruption732(t, b, snapshotstore.Transactional) }},
		{Name: "StaleOwnerFencedOnNextFlush", Run: StaleOwnerFencedOnNextFlush},
		{Name: "FirstFlushGatedBySeededOffset", Run: FirstFlushGatedBySeededOffset},
		{Name: "StaleOffsetCommitRejected", Run: StaleOffsetCommitRejected},
		{Name: "StaleGenerationRetriedWhileMember", Run: StaleGenerationRetriedWhileMember},
		{Name: "NoGroupMetadataFailsLoudly", Run: NoGroupMetadataFailsLoudly},
		{Name: "ConcurrentWritesCap256", Run: func(t *testing.T, b []string) { ConcurrentWrites(t, b, 256) }},
		{Name: "ConcurrentWritesCap1", Run: func(t *testing.T, b []string) { ConcurrentWrites(t, b, 1) }},
		{Name: "TakeoverAbortsOpenTransaction", Run: TakeoverAbortsOpenTransaction},
		{Name: "ForeignTransactionWaitedOut", Run: ForeignTransactionWaitedOut},
		{Name: "StallDeadlineHangingTransaction", Run: StallDeadlineHangingTransaction},
		{Name: "BackpressureBound", Run: BackpressureBound},
		{Name: "BackpressureByteBound", Run: BackpressureByteBound},
		{Name: "FencedPartitionFailsWorker", Run: FencedPartitionFailsWorker},
		{Name: "PoisonRecordFailFast", Parallel: true, Run: PoisonRecordFailFast},
		{Name: "OversizeOutputFailsItsKey", Parallel: true, Run: OversizeOutputFailsItsKey},
		{Name: "OversizeOutputSkipped", Parallel: true, Run: OversizeOutputSkipped},
		{Name: "OversizeOutputDeadLettered", Parallel: true, Run: OversizeOutputDeadLettered},
		{Name: "DeadLetterTopicChecked", Parallel: true, Run: DeadLetterTopicChecked},
		{Name: "DeadLettersWithinTheTopicLimit", Parallel: true, Run: DeadLettersWithinTheTopicLimit},
		{Name: "DeadLetterRulesChangedReadAgain", Parallel: true, Run: DeadLetterRulesChangedReadAgain},
		{Name: "SupersededForeignSnapshotSkipped", Parallel: true, Run: SupersededForeignSnapshotSkipped},
		{Name: "AbortedOutputsReemittedOnce", Parallel: true, Run: AbortedOutputsReemittedOnce},
		{Name: "InactivityAcrossRestart", Parallel: true, Run: InactivityAcrossRestart},
		{Name: "SessionsAcrossABacklog", Parallel: true, Run: SessionsAcrossABacklog},
		{Name: "TicksAcrossABacklog", Parallel: true, Run: TicksAcrossABacklog},
		{Name: "DeletedKeyTimerKept/format3", Parallel: true, Run: func(t *testing.T, b []string) { DeletedKeyTimerKept(t, b, 3) }},
		{Name: "DeletedKeyTimerKept/format2", Parallel: true, Run: func(t *testing.T, b []string) { DeletedKeyTimerKept(t, b, 2) }},
	}
	modes := []snapshotstore.Mode{snapshotstore.Plain, snapshotstore.Transactional}
	for _, mode := range modes {
		cases = append(cases, Case{Name: "LostStateRefused/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { LostStateRefused(t, b, mode) }})
		cases = append(cases, Case{Name: "SnapshotsAheadRefused/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { SnapshotsAheadRefused(t, b, mode) }})
		cases = append(cases, Case{Name: "ForeignGroupRefused/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { ForeignGroupRefused(t, b, mode) }})
		cases = append(cases, Case{Name: "DeletedSnapshotsRefused/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { DeletedSnapshotsRefused(t, b, mode) }})
		cases = append(cases, Case{Name: "EmptiedSnapshotsStartAFreshGroup/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { EmptiedSnapshotsStartAFreshGroup(t, b, mode) }})
		cases = append(cases, Case{Name: "InputRepartitionedRefused/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { InputRepartitionedRefused(t, b, mode) }})
		cases = append(cases, Case{Name: "InputPartitionAddedWhileRunning/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { InputPartitionAddedWhileRunning(t, b, mode) }})
		cases = append(cases, Case{Name: "InputPartitionAddedMovesKeysIntoRunning/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { InputPartitionAddedMovesKeysIntoRunning(t, b, mode) }})
		cases = append(cases, Case{Name: "UndecodableStateDeadLettered/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { UndecodableStateDeadLettered(t, b, mode) }})
	}
	for _, mode := range modes {
		cases = append(cases, Case{Name: "PoisonRecordIsolated/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { PoisonRecordIsolated(t, b, mode) }})
	}
	for _, mode := range modes {
		for _, bad := range []BadInput{BadFold, BadUndecodable, BadNilKey} {
			cases = append(cases, Case{Name: "DeadLetters/" + mode.String() + "/" + string(bad), Parallel: true,
				Run: func(t *testing.T, b []string) { DeadLetters(t, b, mode, bad) }})
		}
		// The bad-input and output-rule scenarios, one case per mode each.
		for _, sc := range []struct {
			name string
			run  func(*testing.T, []string, snapshotstore.Mode)
		}{
			{"DeadLetterOfALargeRecord", DeadLetterOfALargeRecord},
			{"OutputTopicRulesChecked", OutputTopicRulesChecked},
			{"HeldCommitNamed", HeldCommitNamed},
			{"PausedPartitionLagFollowsTheInput", PausedPartitionLagFollowsTheInput},
			{"OutputTimestampChecked", OutputTimestampChecked},
			{"OutputToAMissingTopic", OutputToAMissingTopic},
			{"OutputRulesChangedReadAgain", OutputRulesChangedReadAgain},
			{"SnapshotRulesChangedReadAgain", SnapshotRulesChangedReadAgain},
			{"GetUnavailableWhileCatchingUp", GetUnavailableWhileCatchingUp},
			{"SnapshotTooLargeSkipped", SnapshotTooLargeSkipped},
		} {
			cases = append(cases, Case{Name: sc.name + "/" + mode.String(), Parallel: true,
				Run: func(t *testing.T, b []string) { sc.run(t, b, mode) }})
		}
	}
	for _, mode := range modes {
		cases = append(cases, Case{Name: "LiveKeyBudgetThroughRebalance/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { LiveKeyBudgetThroughRebalance(t, b, mode) }})
	}
	for _, mode := range modes {
		cases = append(cases, Case{Name: "IdleInputPersistedWithoutTicks/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { IdleInputPersistedWithoutTicks(t, b, mode) }})
	}
	for _, mode := range modes {
		cases = append(cases, Case{Name: "LedgerRestart/" + mode.String(),
			Run: func(t *testing.T, b []string) { LedgerRestart(t, b, mode) }})
	}
	for _, mode := range modes {
		for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.Eager, coordinator.ConsumerProtocol} {
			cases = append(cases, Case{Name: "RevokeStopsSubtreeFirst/" + mode.String() + "/" + proto.String(), Parallel: true,
				Run: func(t *testing.T, b []string) { RevokeStopsSubtreeFirst(t, b, mode, proto) }})
		}
	}
	// The ownership fence (issue 8): the new owner uses another
	// transactional.id prefix, so only the consumer-side fences can stop
	// the stale owner.
	for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.Eager, coordinator.ConsumerProtocol} {
		for _, mode := range modes {
			cases = append(cases, Case{Name: "RejoinAsNewMember/" + mode.String() + "/" + proto.String(), Parallel: true,
				Run: func(t *testing.T, b []string) { RejoinAsNewMember(t, b, mode, proto) }})
		}
	}
	// kgo keeps a partition across a cooperative rejoin as a new member: the
	// re-acquired partition is sought back to its committed offset.
	for _, mode := range modes {
		cases = append(cases, Case{Name: "ReacquiredAfterRejoin/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { ReacquiredAfterRejoinReplaysFromCommitted(t, b, mode) }})
	}
	// An evicted member rejoins instead of exiting (the long chaos run's
	// node kill).
	for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.ConsumerProtocol} {
		for _, mode := range modes {
			cases = append(cases, Case{Name: "EvictedMemberRejoins/" + mode.String() + "/" + proto.String(), Parallel: true,
				Run: func(t *testing.T, b []string) { EvictedMemberRejoins(t, b, mode, proto) }})
		}
		cases = append(cases, Case{Name: "EvictionEndsEveryPartition/" + proto.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { EvictionEndsEveryPartition(t, b, proto) }})
	}
	for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.Eager, coordinator.ConsumerProtocol} {
		for _, mode := range modes {
			cases = append(cases, Case{Name: "RevokeFlushOutlivesTeardownBound/" + mode.String() + "/" + proto.String(), Parallel: true,
				Run: func(t *testing.T, b []string) { RevokeFlushOutlivesTeardownBound(t, b, mode, proto) }})
		}
	}
	// The same flush released after the partition came back to its worker:
	// refused by the binding of the copy's own assignment.
	for _, mode := range modes {
		cases = append(cases, Case{Name: "RevokeFlushOutlivesReassignment/" + mode.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { RevokeFlushOutlivesReassignment(t, b, mode) }})
	}
	// Interactive queries (issue 12): the owner's advertised endpoint read
	// back under both protocols the worker's Get looks owners up with.
	for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.ConsumerProtocol} {
		cases = append(cases, Case{Name: "QueryOwnerEndpoint/" + proto.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { QueryOwnerEndpoint(t, b, proto) }})
	}
	// The owner named while a classic rebalance hides the assignment.
	cases = append(cases, Case{Name: "OwnerNamedThroughARebalance", Parallel: true, Run: OwnerNamedThroughARebalance})
	// WaitCaughtUp returns at rest, not in the middle of a member's join.
	for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.ConsumerProtocol} {
		cases = append(cases, Case{Name: "WaitCaughtUpIsARestPoint/" + proto.String(), Parallel: true,
			Run: func(t *testing.T, b []string) { WaitCaughtUpIsARestPoint(t, b, proto) }})
	}
	return cases
}

// RunSuite runs every case of Suite as a subtest of t; brokers gives each
// case its broker (a fresh kfake cluster, or the suite's shared broker).
func RunSuite(t *testing.T, brokers func(t testing.TB) []string) {
	for _, c := range Suite() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Parallel {
				t.Parallel()
			}
			c.Run(t, brokers(t))
		})
	}
}
