//go:build !unix

package kcluster

import "os/exec"

// detach: no process groups here; the reaper shares the test's fate.
func detach(*exec.Cmd) {}
