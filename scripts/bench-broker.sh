#!/usr/bin/env bash
# bench-broker.sh — one long-lived single-node Kafka broker for benchmarking (cmd/bench), started with
# the podman CLI (no Docker API service needed) from the same image and the same broker settings as
# the integration suite (itest/broker_test.go, brokerEnv), so numbers measured against it and against
# `make bench-real` compare.
#
#   scripts/bench-broker.sh start    # prints BROKERS=127.0.0.1:P on stdout (last line); idempotent
#   scripts/bench-broker.sh brokers  # re-prints the address of the running broker
#   scripts/bench-broker.sh stop     # removes the container
#   scripts/bench-broker.sh status
#
#   go run ./cmd/bench --brokers "$(scripts/bench-broker.sh brokers)" --experiment A
#   make bench-real BROKERS="$(scripts/bench-broker.sh brokers)"
#
# BENCH_KAFKA_<NAME>=v adds/overrides broker property <name> (KAFKA_<NAME>=v inside, e.g.
# BENCH_KAFKA_ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MS=1). A start with other settings than the running
# broker's replaces it. BENCH_BROKER_PORT picks the host port (default: a free one).
# The container carries the label org.actorflow.bench; `stop` is the only thing that removes it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
CACHE="${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}"
NAME="${BENCH_BROKER_NAME:-actorflow-bench-broker}"
STATE="$CACHE/bench-broker"
log() { echo "bench-broker: $*" >&2; }

# The podman CLI with the engine's containers.conf (runc, cgroupfs, no ulimits: see
# ../shared/notes/containers.md); it does not need the Docker API service to be running.
export CONTAINERS_CONF="${CONTAINERS_CONF:-$CACHE/engine/containers.conf}"
pm() { podman "$@"; }

running() { [[ "$(pm inspect -f '{{.State.Running}}' "$NAME" 2>/dev/null)" == true ]]; }

# The broker settings of itest/broker_test.go's brokerEnv (keep the two in step).
broker_env() {
  local port=$1 ctrl=localhost:9093
  cat <<EOF
KAFKA_NODE_ID=1
KAFKA_PROCESS_ROLES=broker,controller
KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:$port,CONTROLLER://$ctrl
KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:$port
KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
KAFKA_INTER_BROKER_LISTENER_NAME=PLAINTEXT
KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER
KAFKA_CONTROLLER_QUORUM_VOTERS=1@$ctrl
KAFKA_LOG_DIRS=/tmp/kraft-combined-logs
KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1
KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1
KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1
KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR=1
KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR=1
KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0
KAFKA_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS=1000
KAFKA_TRANSACTION_MAX_TIMEOUT_MS=900000
KAFKA_GROUP_COORDINATOR_REBALANCE_PROTOCOLS=classic,consumer
KAFKA_GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS=2000
KAFKA_GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS=100
KAFKA_HEAP_OPTS=-Xms256m -Xmx768m
KAFKA_LOG4J_ROOT_LOGLEVEL=WARN
EOF
  local kv
  while IFS= read -r kv; do
    if [[ $kv == BENCH_KAFKA_?*=* ]]; then echo "KAFKA_${kv#BENCH_KAFKA_}"; fi
  done < <(env | sort)
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_ready() {
  local addr=$1 deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    running || { pm logs --tail 50 "$NAME" >&2 || true; log "container exited"; return 1; }
    if pm logs "$NAME" 2>&1 | grep -q 'Kafka Server started'; then
      # The listener is up; the port forward (netavark/iptables) answers from now on.
      if (exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}") 2>/dev/null; then return 0; fi
    fi
    sleep 0.3
  done
  log "broker not ready within 120s"; return 1
}

start() {
  mkdir -p "$STATE"
  # On a fresh machine: podman and runc installed and the containers.conf above written (the
  # engine's own start does both; its Docker API service is not used here).
  [[ -f "$CONTAINERS_CONF" ]] || scripts/container-engine.sh start >/dev/null
  local want; want="$(broker_env PORT | grep -v '^KAFKA_\(LISTENERS\|ADVERTISED_LISTENERS\)=' | sha256sum | cut -c1-16)"
  if running && [[ -f "$STATE/addr" && "$(cat "$STATE/settings" 2>/dev/null)" == "$want" ]]; then
    log "already running ($NAME)"
    echo "$(cat "$STATE/addr")"
    return 0
  fi
  if pm container exists "$NAME"; then
    log "replacing $NAME (stopped, or started with other settings)"
    pm rm -f "$NAME" >/dev/null
  fi
  local image port
  image="${KAFKA_IMAGE:-$(scripts/kafka-image.sh | tail -n1)}"
  port="${BENCH_BROKER_PORT:-$(free_port)}"
  local envs=()
  while IFS= read -r kv; do envs+=(-e "$kv"); done < <(broker_env "$port")
  envs+=(-e "CLUSTER_ID=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' | sed 's/^-/A/')")
  log "starting $image on 127.0.0.1:$port"
  pm run -d --name "$NAME" --label org.actorflow.bench=1 -p "127.0.0.1:$port:$port" "${envs[@]}" "$image" >/dev/null
  wait_ready "127.0.0.1:$port"
  echo "127.0.0.1:$port" >"$STATE/addr"
  echo "$want" >"$STATE/settings"
  log "ready"
  echo "127.0.0.1:$port"
}

case "${1:-start}" in
  start) start ;;
  brokers) running && cat "$STATE/addr" || { log "not running"; exit 1; } ;;
  stop) pm rm -f "$NAME" >/dev/null 2>&1 || true; rm -f "$STATE/addr" "$STATE/settings"; log "removed $NAME" ;;
  status) if running; then log "running at $(cat "$STATE/addr")"; else log "not running"; exit 1; fi ;;
  *) echo "usage: $0 [start|brokers|stop|status]" >&2; exit 2 ;;
esac
