package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A local broker's CPU during a drain: with the broker on the benchmark's
// own cores, a system that makes the broker work harder (transactions,
// more requests) is slowed by it, and the process's own CPU does not show
// it. The brokers are found by their main class in /proc/*/cmdline (a
// podman container's processes are visible from the host); none found (a
// remote broker, not Linux) leaves the figure 0.

// brokerMainClass is the Java main class of an Apache Kafka broker.
const brokerMainClass = "kafka.Kafka"

// findBrokerPIDs lists the local processes running a Kafka broker.
func findBrokerPIDs() []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if string(arg) == brokerMainClass {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}

// procsCPU is the user + system CPU time of the processes (/proc/<pid>/stat
// fields 14 and 15), and false if one is unreadable.
func procsCPU(pids []int) (time.Duration, bool) {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, false
		}
		// The command name (field 2) may hold spaces: count fields after
		// its closing parenthesis, where field 3 starts.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			return 0, false
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			return 0, false
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		total += time.Duration(utime+stime) * time.Second / 100 // USER_HZ
	}
	return total, len(pids) > 0
}

// parsePIDs reads a comma-separated pid list ("" is none); a field that is
// not a positive integer is an error, not a broker silently left unmeasured.
func parsePIDs(s string) ([]int, error) {
	var pids []int
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("broker pid %q: not a positive integer", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

func joinPIDs(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}
