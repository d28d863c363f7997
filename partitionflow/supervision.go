package partitionflow

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// ChildFailed tells an actor that one of its children panicked and was
// stopped.
type ChildFailed struct {
	Child  *actor.PID
	Reason any
}

// StopAndReport is a supervisor strategy that never restarts: the failed
// child is stopped and its parent receives ChildFailed. protoactor's default
// (restart) would recreate a partition actor and stop all its key actors,
// silently dropping their unpersisted state.
var StopAndReport actor.SupervisorStrategy = stopAndReport{}

type stopAndReport struct{}

func (stopAndReport) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	sup.StopChildren(child)
	if s, ok := sup.(interface{ Self() *actor.PID }); ok {
		sys.Root.Send(s.Self(), &ChildFailed{Child: child, Reason: reason})
	}
}

func panicError(reason any) error {
	if err, ok := reason.(error); ok {
		return fmt.Errorf("panic: %w", err)
	}
	return fmt.Errorf("panic: %v", reason)
}
