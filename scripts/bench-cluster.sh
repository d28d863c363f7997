#!/usr/bin/env bash
# bench-cluster.sh — issue 16's performance on the 3-node cluster (acks=all across three replicas):
# cmd/bench's E2E drain (the raw franz-go pipe, plain, transactional, each writing an output per event)
# and Experiment L (output latency at a steady rate, the franz-go GroupTransactSession reference beside
# the two modes), with every topic replicated 3 (--rf 3). Starts the loopback cluster of
# scripts/kafka-cluster.sh (--fresh) and stops it at the end.
#
#   scripts/bench-cluster.sh                      # E2E 10k keys (1 run) and L at 2 000 events/s
#   E2E_ARGS="--e2e-keys 10000,1000000 --runs 3" LAT_ARGS="--lat-rate 2000,20000" scripts/bench-cluster.sh
#
# Knobs: E2E_ARGS, LAT_ARGS (extra cmd/bench flags, appended: a later flag wins), KAFKA_VERSION, and the
# cluster's own (ACTORFLOW_CLUSTER3_*, CLUSTER3_KAFKA_<PROP>; scripts/kafka-cluster.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { echo "bench-cluster: $*" >&2; }

bin="$(mktemp -d)/bench"
go build -o "$bin" ./cmd/bench
brokers="$(scripts/kafka-cluster.sh start --fresh | tail -n1)"
trap 'scripts/kafka-cluster.sh stop >/dev/null || true' EXIT
log "cluster: $brokers (Kafka ${KAFKA_VERSION:-newest}, RF 3, min.insync.replicas 2)"
# shellcheck disable=SC2086 # the ARGS are word lists
"$bin" --brokers "$brokers" --rf 3 --experiment E2E --e2e-keys 10000 --runs 1 ${E2E_ARGS:-}
# shellcheck disable=SC2086
"$bin" --brokers "$brokers" --rf 3 --experiment L --lat-rate 2000 --lat-duration 30s --lat-warmup 10s ${LAT_ARGS:-}
