package kcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cluster is a cluster started by scripts/kafka-cluster.sh, driven through
// the script itself (every command a test runs is one an operator can type).
type Cluster struct {
	// Brokers is the bootstrap list, one address per node.
	Brokers []string
	script  string
	env     []string
	// reaper runs `stop` when its stdin closes: when this process is gone
	// for any reason (a panic, go test's timeout, a signal), no JVM stays.
	reaper   *exec.Cmd
	reaperIn io.WriteCloser
}

// RepoRoot returns the module root above dir (the directory holding go.mod).
func RepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("kcluster: no go.mod above %s", dir)
		}
		d = up
	}
}

// Start runs `scripts/kafka-cluster.sh start --fresh` from the module root
// root with env added to this process's environment (KAFKA_VERSION, the
// ACTORFLOW_CLUSTER3_* knobs), and starts the reaper. The script's stderr
// (progress) goes to progress.
func Start(ctx context.Context, root string, env []string, progress io.Writer) (*Cluster, error) {
	c := &Cluster{script: filepath.Join(root, "scripts", "kafka-cluster.sh"), env: env}
	if err := c.startReaper(); err != nil {
		return nil, err
	}
	out, err := c.Run(ctx, progress, "start", "--fresh")
	if err != nil {
		c.Stop(context.Background(), progress)
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	c.Brokers = strings.Split(strings.TrimSpace(lines[len(lines)-1]), ",")
	if len(c.Brokers) != 3 {
		c.Stop(context.Background(), progress)
		return nil, fmt.Errorf("kcluster: start printed %q, want 3 brokers on the last line", out)
	}
	return c, nil
}

func (c *Cluster) startReaper() error {
	cmd := exec.Command("bash", "-c", `cat >/dev/null; exec "$0" stop`, c.script)
	cmd.Env = append(os.Environ(), c.env...)
	detach(cmd) // not in this process's group: a Ctrl-C of the test must not kill it first
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kcluster: reaper: %w", err)
	}
	c.reaper, c.reaperIn = cmd, in
	return nil
}

// Run runs the script with args and returns its stdout; stderr goes to
// progress (nil: discarded) and, on failure, into the error.
func (c *Cluster) Run(ctx context.Context, progress io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.script, args...)
	cmd.Env = append(os.Environ(), c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if progress != nil {
		cmd.Stderr = io.MultiWriter(&stderr, progress)
	} else {
		cmd.Stderr = &stderr
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kcluster: %s %s: %w: %s", filepath.Base(c.script), strings.Join(args, " "),
			err, lastLines(stderr.String(), 20))
	}
	return stdout.String(), nil
}

// Kill SIGKILLs node n (1..3).
func (c *Cluster) Kill(ctx context.Context, n int32, progress io.Writer) error {
	_, err := c.Run(ctx, progress, "kill-node", strconv.Itoa(int(n)))
	return err
}

// Restart starts node n again and waits until the cluster lists it.
func (c *Cluster) Restart(ctx context.Context, n int32, progress io.Writer) error {
	_, err := c.Run(ctx, progress, "restart-node", strconv.Itoa(int(n)))
	return err
}

// Stop stops every node (`stop`) and releases the reaper.
func (c *Cluster) Stop(ctx context.Context, progress io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := c.Run(ctx, progress, "stop")
	if c.reaper != nil {
		c.reaperIn.Close() // its own `stop` finds nothing left to stop
		done := make(chan error, 1)
		go func() { done <- c.reaper.Wait() }()
		select {
		case werr := <-done:
			err = errors.Join(err, werr)
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("kcluster: reaper still running: %w", ctx.Err()))
		}
		c.reaper = nil
	}
	return err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
