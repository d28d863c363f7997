//go:build unix

package itest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// reaperEnv, when set, turns the test binary into the reaper of the container it names.
const reaperEnv = "ACTORFLOW_ITEST_REAPER_CONTAINER"

// reaper is a copy of the test binary that removes the broker container once the test process is
// gone, however it went: a panic in a test, os.Exit, go test's -timeout kill, SIGKILL. It reads
// a pipe whose only writer is the test process; the kernel closes that end when the process
// exits, the reaper sees EOF and removes the container.
type reaper struct {
	w   *os.File
	cmd *exec.Cmd
}

func startReaper(containerID string) (*reaper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe() // close-on-exec: no other child inherits the write end
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), reaperEnv+"="+containerID)
	cmd.Stdin = r
	// Stdout/stderr stay unset (/dev/null): go test waits for EOF on the test binary's output,
	// which a reaper outliving the binary would otherwise hold open.
	// Own process group: a Ctrl-C sent to the terminal's group must not kill the reaper too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	r.Close()
	return &reaper{w: w, cmd: cmd}, nil
}

// release ends the reaper after a normal cleanup (it then finds the container already gone).
func (rp *reaper) release() {
	if rp == nil {
		return
	}
	rp.w.Close()
	done := make(chan struct{})
	go func() { _ = rp.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = rp.cmd.Process.Kill()
	}
}

func runReaper(containerID string) int {
	_, _ = io.Copy(io.Discard, os.Stdin) // returns when the test process exits or releases us
	pool, err := dockertest.NewPool("")
	if err != nil {
		return 1
	}
	err = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: containerID, Force: true, RemoveVolumes: true})
	var noSuch *dc.NoSuchContainer
	if err != nil && !errors.As(err, &noSuch) {
		return 1
	}
	return 0
}
