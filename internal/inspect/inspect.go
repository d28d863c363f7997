// Package inspect reaches the internals of a running *actorflow.Worker for
// the project's tests and scenarios (internal/scenarios, itest): its
// supervisor and its group consumer, which are not part of the public API.
// Package actorflow registers the accessors in its init (it imports this
// package; the reverse would be a cycle), so the functions take the worker
// as any.
package inspect

import (
	"fmt"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/coordinator"
)

var (
	supervisorOf func(worker any) *actors.Supervisor
	consumerOf   func(worker any) *coordinator.Consumer
)

// Register is called by package actorflow's init.
func Register(supervisor func(worker any) *actors.Supervisor, consumer func(worker any) *coordinator.Consumer) {
	supervisorOf, consumerOf = supervisor, consumer
}

// Supervisor returns the supervisor of worker (an *actorflow.Worker) once
// its Run has started: it waits for that. It panics when worker is not one.
func Supervisor(worker any) *actors.Supervisor {
	must(worker)
	return supervisorOf(worker)
}

// Consumer returns the group consumer of worker (an *actorflow.Worker) once
// its Run has started: it waits for that. It panics when worker is not one.
func Consumer(worker any) *coordinator.Consumer {
	must(worker)
	return consumerOf(worker)
}

func must(worker any) {
	if supervisorOf == nil {
		panic(fmt.Sprintf("inspect: %T: package actorflow registered no accessors", worker))
	}
}
