package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	args := os.Args[1:]
	cmd := ""
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "":
		os.Exit(runInProcess(args))
	case "worker":
		os.Exit(runWorker(args))
	case "produce":
		os.Exit(runProduce(args))
	case "verify":
		os.Exit(runVerify(args))
	case "latency":
		os.Exit(runLatency(args))
	case "poison":
		os.Exit(runPoison(args))
	default:
		fmt.Fprintf(os.Stderr, "demo: unknown subcommand %q (want worker, produce, verify, latency, poison, or none)\n", cmd)
		os.Exit(2)
	}
}

// env returns the environment variable's value, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(env(name, "")); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(env(name, "")); err == nil {
		return v
	}
	return def
}
