//go:build !unix

package itest

import "errors"

const reaperEnv = "ACTORFLOW_ITEST_REAPER_CONTAINER"

// No reaper process off unix: the container is removed by TestMain and the signal handler only.
type reaper struct{}

func startReaper(string) (*reaper, error) { return nil, errors.New("not supported on this OS") }

func (*reaper) release() {}

func runReaper(string) int { return 0 }
