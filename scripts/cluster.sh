#!/usr/bin/env bash
# cluster.sh — the demo cluster of deploy/docker-compose.yml: one Kafka broker (three with --brokers 3), a
# ledger producer and three workers of one consumer group (transactional mode by default).
#
#   scripts/cluster.sh up [--mode transactional|plain] [--brokers 1|3] [--fresh]   # make cluster-up
#   scripts/cluster.sh down                                        # make cluster-down
#   scripts/cluster.sh status                                      # containers + each worker's /status
#   scripts/cluster.sh env                                         # export lines for compose by hand,
#                                                                  # and the host's bootstrap list
#   scripts/cluster.sh compose ARGS...                             # compose on the project: logs -f worker1, ps, ...
#   scripts/cluster.sh verify                                      # run the verifier service once
#
# up:   1. a container engine (scripts/container-engine.sh: an answering Docker engine, else podman
#          behind the Docker API, installed from Debian's packages when missing);
#       2. the Kafka image of KAFKA_VERSION (default the newest supported, scripts/kafka-versions.env)
#          (scripts/kafka-image.sh: $KAFKA_IMAGE, apache/kafka:$KAFKA_VERSION when pullable, else
#          localhost/actorflow-kafka:$KAFKA_VERSION built from Maven Central's jars);
#       3. compose: `docker compose` (v2) when it answers, else `docker-compose` (installed with apt-get
#          when missing: Debian's 1.29.2); COMPOSE="docker-compose" forces one;
#       4. the demo image: a static binary (CGO_ENABLED=0 go build ./cmd/demo) + deploy/Dockerfile
#          (FROM scratch, no pull) -> $DEMO_IMAGE (localhost/actorflow-demo:dev);
#       5. `up -d kafka` (with --brokers 3: kafka kafka2 kafka3) and waits for each broker's "Kafka Server
#          started" line, then `up -d worker1 worker2 worker3`, waits for every worker's /readyz (joined the
#          group, which also means the brokers are up and the topics exist), then starts the producer and
#          waits until the workers fold its events.
#       --brokers 3: a 3-node KRaft cluster (combined broker+controller nodes kafka, kafka2, kafka3, static
#       quorum, replication factor 3, min.insync.replicas 2): compose runs with deploy/docker-compose.yml
#       AND the override deploy/docker-compose.brokers3.yml (see there). The choice is remembered
#       (ACTORFLOW_BROKER_COUNT in the saved state), so status, env, down, compose and verify use the same
#       files; default 1 (the base file alone).
#       A cluster already up in the same mode and shape on the same broker image is kept (compose recreates
#       only what changed, e.g. after a rebuilt demo image); in another mode, with another broker count, on
#       another broker image (another KAFKA_VERSION), or with --fresh, it is removed first (fresh brokers,
#       fresh topics).
# down: removes the project's containers (all profiles), its network and volumes and the demo image, and
#       stops the podman service if `up` started it and no other container is left on it. The Kafka
#       image and the caches stay (shared with scripts/itest.sh).
#
# Knobs (environment, remembered by `up` for the later commands): ACTORFLOW_MODE, ACTORFLOW_RATE (500/s),
# ACTORFLOW_ACCOUNTS (1000), ACTORFLOW_PARTITIONS (6), ACTORFLOW_SESSION_TIMEOUT (6s),
# ACTORFLOW_PERSIST_EVERY (1s), ACTORFLOW_WORKER<N>_PORT (1808N), ACTORFLOW_KAFKA_HOST_PORT (19092),
# ACTORFLOW_KAFKA2_HOST_PORT (19192) and ACTORFLOW_KAFKA3_HOST_PORT (19292) with --brokers 3,
# ACTORFLOW_BROKER_COUNT (1; what --brokers sets),
# KAFKA_IMAGE, DEMO_IMAGE, ACTORFLOW_PROJECT (compose project name, default actorflow),
# ACTORFLOW_READY_TIMEOUT (seconds, default 240), ACTORFLOW_CACHE, KAFKA_VERSION, ACTORFLOW_LOG_LEVEL (the
# workers' log level, info; debug adds every request of their Kafka clients), ACTORFLOW_KAFKA_LOGGERS (the brokers'
# single loggers raised, e.g. kafka.coordinator.transaction=DEBUG; empty by default).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}"
IMAGE_CHANGED=1
STATE="$CACHE/cluster"
ENVFILE="$STATE/cluster.env"
PROJECT="${ACTORFLOW_PROJECT:-actorflow}"
COMPOSE_YML="$ROOT/deploy/docker-compose.yml"
COMPOSE_YML3="$ROOT/deploy/docker-compose.brokers3.yml"
export DEMO_IMAGE="${DEMO_IMAGE:-localhost/actorflow-demo:dev}"

log() { echo "cluster: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# The remembered settings of the last `up` (engine, images, knobs), unless the caller overrides them.
load_state() {
  if [[ -f "$ENVFILE" ]]; then
    local line name
    while IFS= read -r line; do
      name="${line#export }"; name="${name%%=*}"
      # The caller's environment wins over the remembered value.
      [[ -n "${!name+x}" ]] && continue
      eval "$line"
    done <"$ENVFILE"
  fi
}

save_state() {
  mkdir -p "$STATE"
  local v
  {
    for v in $(compgen -e | sort); do
      case "$v" in
        ACTORFLOW_CACHE | ACTORFLOW_SKIP_ITEST | ACTORFLOW_BROKERS | ACTORFLOW_BOOTSTRAP) continue ;;
        ACTORFLOW_* | KAFKA_IMAGE | KAFKA_VERSION | DEMO_IMAGE | KAFKA_CLUSTER_ID | DOCKER_HOST | CONTAINERS_CONF | COMPOSE)
          printf 'export %s=%q\n' "$v" "${!v}" ;;
      esac
    done
  } >"$ENVFILE.tmp"
  mv "$ENVFILE.tmp" "$ENVFILE"
}

# docker, or podman when there is no docker client at all.
dk() {
  if command -v docker >/dev/null 2>&1; then docker "$@"; else podman "$@"; fi
}

engine() {
  # Remember whether the podman service was already running: `down` stops only what `up` started.
  local was=1
  "$ROOT/scripts/container-engine.sh" status >/dev/null 2>&1 || was=0
  local out
  out="$("$ROOT/scripts/container-engine.sh" start)" || die "no container engine"
  eval "$out"
  if [[ $was == 0 ]] && grep -q DOCKER_HOST <<<"$out" && ! grep -q 'existing Docker engine' <<<"$out"; then
    mkdir -p "$STATE"; touch "$STATE/engine-started-by-cluster"
  fi
}

# The engine without starting anything (status, down, compose): the running podman service, if any.
engine_env() {
  local out
  if out="$("$ROOT/scripts/container-engine.sh" env 2>/dev/null)"; then eval "$out"; fi
}

pick_compose() {
  if [[ -n "${COMPOSE:-}" ]]; then
    read -r -a COMPOSE_CMD <<<"$COMPOSE"
  elif docker compose version >/dev/null 2>&1; then
    COMPOSE_CMD=(docker compose)
  elif command -v docker-compose >/dev/null 2>&1; then
    COMPOSE_CMD=(docker-compose)
  else
    [[ $(id -u) -eq 0 ]] || die "no compose: install docker compose (v2) or docker-compose"
    log "installing docker-compose (apt-get)"
    mkdir -p "$STATE"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose \
      >"$STATE/apt.log" 2>&1 || { tail -n 30 "$STATE/apt.log" >&2; die "apt-get install docker-compose failed"; }
    COMPOSE_CMD=(docker-compose)
  fi
}

# The broker count of this cluster (the saved state's, or up's --brokers): 1 or 3.
broker_count() { echo "${ACTORFLOW_BROKER_COUNT:-1}"; }

# The compose files of that shape: the base file, plus the 3-broker override.
compose_files() {
  echo "$COMPOSE_YML"
  if [[ "$(broker_count)" == 3 ]]; then echo "$COMPOSE_YML3"; fi
}

# The broker services of that shape.
broker_services() {
  if [[ "$(broker_count)" == 3 ]]; then echo kafka kafka2 kafka3; else echo kafka; fi
}

# The host's bootstrap list: every broker's EXTERNAL listener.
bootstrap() {
  local list="127.0.0.1:${ACTORFLOW_KAFKA_HOST_PORT:-19092}"
  if [[ "$(broker_count)" == 3 ]]; then
    list+=",127.0.0.1:${ACTORFLOW_KAFKA2_HOST_PORT:-19192},127.0.0.1:${ACTORFLOW_KAFKA3_HOST_PORT:-19292}"
  fi
  echo "$list"
}

compose() {
  local f args=()
  while IFS= read -r f; do args+=(-f "$f"); done < <(compose_files)
  "${COMPOSE_CMD[@]}" -p "$PROJECT" "${args[@]}" "$@"
}

# Compose over both files whatever the shape: removing a cluster must reach kafka2 and kafka3 when the
# running one has them, and removes nothing more when it has not.
compose_all() {
  "${COMPOSE_CMD[@]}" -p "$PROJECT" -f "$COMPOSE_YML" -f "$COMPOSE_YML3" "$@"
}

# Container id of a compose service (both compose versions set these labels).
cid() {
  dk ps -aq --filter "label=com.docker.compose.project=$PROJECT" \
    --filter "label=com.docker.compose.service=$1" | head -n1
}

project_containers() {
  dk ps -aq --filter "label=com.docker.compose.project=$PROJECT"
}

worker_port() {
  local n="${1#worker}" v="ACTORFLOW_WORKER${1#worker}_PORT"
  echo "${!v:-$((18080 + n))}"
}

# The image the running broker was started from, or nothing.
running_kafka_image() {
  local id; id="$(cid kafka)"
  [[ -n "$id" ]] || return 0
  dk inspect -f '{{.Config.Image}}' "$id" 2>/dev/null || true
}

# The broker count of the running cluster (3 when kafka2 exists), or nothing.
running_brokers() {
  if [[ -n "$(cid kafka2)" ]]; then echo 3; elif [[ -n "$(cid kafka)" ]]; then echo 1; fi
}

# The mode the running workers were started with, or nothing.
running_mode() {
  local id; id="$(cid worker1)"
  [[ -n "$id" ]] || return 0
  dk inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$id" 2>/dev/null |
    sed -n 's/^ACTORFLOW_MODE=//p' | head -n1
}

build_demo_image() {
  local t0; t0=$(now)
  local ctx="$STATE/image"
  rm -rf "$ctx"; mkdir -p "$ctx"
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$ctx/demo" ./cmd/demo) || die "go build ./cmd/demo failed"
  # The binary's hash as a label: an unchanged binary keeps the image (and so the running containers,
  # which compose would otherwise recreate for a new image id).
  local sum; sum="$(cat "$ctx/demo" "$ROOT/deploy/Dockerfile" | sha256sum | cut -c1-16)"
  local old; old="$(dk image inspect -f '{{.Id}}' "$DEMO_IMAGE" 2>/dev/null || true)"
  if [[ -n "$old" && "$(dk image inspect -f '{{index .Config.Labels "org.actorflow.demo.binary"}}' "$DEMO_IMAGE")" == "$sum" ]]; then
    log "demo image $DEMO_IMAGE up to date (binary $sum) in $(since "$t0")s"
    IMAGE_CHANGED=0
    return
  fi
  # Docker 23+ without buildx prints a deprecation note for the legacy builder: harmless here.
  dk build -q --label "org.actorflow.demo.binary=$sum" -t "$DEMO_IMAGE" -f "$ROOT/deploy/Dockerfile" "$ctx" \
    >"$STATE/build.log" 2>&1 || { cat "$STATE/build.log" >&2; die "building $DEMO_IMAGE failed"; }
  local new; new="$(dk image inspect -f '{{.Id}}' "$DEMO_IMAGE")"
  # The replaced image stays behind untagged; removing it fails harmlessly while a container uses it.
  if [[ -n "$old" && "$old" != "$new" ]]; then dk rmi "$old" >/dev/null 2>&1 || true; fi
  log "demo image $DEMO_IMAGE ($(du -h "$ctx/demo" | cut -f1) binary $sum) built in $(since "$t0")s"
  IMAGE_CHANGED=1
}

http_ok() { curl -sf --max-time 2 "$1" >/dev/null 2>&1; }

# wait_ready SECONDS worker...: every worker answers /readyz (joined its group).
wait_ready() {
  local timeout="$1"; shift
  local deadline; deadline=$(($(date +%s) + timeout))
  local w pending
  while :; do
    pending=()
    for w in "$@"; do http_ok "http://127.0.0.1:$(worker_port "$w")/readyz" || pending+=("$w"); done
    ((${#pending[@]} == 0)) && return 0
    if (($(date +%s) > deadline)); then
      log "not ready after ${timeout}s: ${pending[*]}"
      # shellcheck disable=SC2046 # word list on purpose
      for w in "${pending[@]}" $(broker_services); do
        log "---- last lines of $w ----"; compose logs --tail=25 "$w" >&2 || true
      done
      return 1
    fi
    sleep 0.5
  done
}

# Every broker's "Kafka Server started" log line (both images log it at INFO, ours with a WARN root logger
# too; a KRaft broker logs it once it has caught up with the quorum and is unfenced, so with three brokers
# all three lines mean a topic replicated 3 can be created). Only to spare the workers a crash loop while
# the JVMs start: they exit when they cannot create their topics and `restart: on-failure` brings them
# back, so a timeout here is not fatal.
wait_broker() {
  local deadline; deadline=$(($(date +%s) + $1))
  local svc id pending
  while :; do
    pending=()
    for svc in $(broker_services); do
      id="$(cid "$svc")"
      dk logs --tail 200 "$id" 2>&1 | grep -q 'Kafka Server started' && continue
      [[ "$(dk inspect -f '{{.State.Running}}' "$id" 2>/dev/null)" == true ]] ||
        { dk logs --tail 40 "$id" >&2 || true; die "the broker container $svc exited"; }
      pending+=("$svc")
    done
    ((${#pending[@]} == 0)) && return 0
    (($(date +%s) < deadline)) || break
    sleep 0.5
  done
  log "no 'Kafka Server started' line from ${pending[*]} within $1s: starting the workers anyway"
}

# Sum of processed_total over the given workers.
processed() {
  local total=0 w n
  for w in "$@"; do
    n="$(curl -sf --max-time 2 "http://127.0.0.1:$(worker_port "$w")/status" | jq -r '.processed_total // 0' 2>/dev/null || echo 0)"
    total=$((total + ${n:-0}))
  done
  echo "$total"
}

need_tools() {
  local need=()
  command -v curl >/dev/null 2>&1 || need+=(curl)
  command -v jq >/dev/null 2>&1 || need+=(jq)
  if ((${#need[@]})); then
    [[ $(id -u) -eq 0 ]] || die "need ${need[*]}"
    log "installing ${need[*]} (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  fi
}

cmd_up() {
  local mode="${ACTORFLOW_MODE:-transactional}" fresh=0 brokers="${ACTORFLOW_BROKER_COUNT:-1}"
  while (($#)); do
    case "$1" in
      --mode) mode="$2"; shift 2 ;;
      --mode=*) mode="${1#--mode=}"; shift ;;
      --brokers) brokers="$2"; shift 2 ;;
      --brokers=*) brokers="${1#--brokers=}"; shift ;;
      --fresh) fresh=1; shift ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [[ "$mode" == transactional || "$mode" == plain ]] || die "--mode $mode: want transactional or plain"
  [[ "$brokers" == 1 || "$brokers" == 3 ]] || die "--brokers $brokers: want 1 or 3"
  export ACTORFLOW_MODE="$mode" ACTORFLOW_BROKER_COUNT="$brokers"
  local t0; t0=$(now)
  need_tools
  engine
  log "engine ready in $(since "$t0")s (DOCKER_HOST=${DOCKER_HOST:-default})"
  local t1; t1=$(now)
  # shellcheck source=kafka-versions.env
  . "$ROOT/scripts/kafka-versions.env"
  export KAFKA_VERSION="${KAFKA_VERSION:-$KAFKA_VERSION_NEWEST}"
  local kimg; kimg="$("$ROOT/scripts/kafka-image.sh" | tail -n1)" || die "no Kafka image"
  export KAFKA_IMAGE="$kimg"
  log "Kafka $KAFKA_VERSION: image $KAFKA_IMAGE ready in $(since "$t1")s"
  pick_compose
  log "compose: ${COMPOSE_CMD[*]} ($("${COMPOSE_CMD[@]}" version --short 2>/dev/null || echo '?'))"
  build_demo_image

  local running running_image running_brokers
  running="$(running_mode)" running_image="$(running_kafka_image)" running_brokers="$(running_brokers)"
  if [[ -n "$running" && ($fresh == 1 || "$running" != "$mode") ]]; then
    log "removing the running cluster (it runs in mode $running; wanted $mode$( ((fresh)) && echo ", --fresh"))"
    remove_project
  elif [[ -n "$running_brokers" && "$running_brokers" != "$brokers" ]]; then
    log "removing the running cluster (it has $running_brokers broker(s); wanted $brokers)"
    remove_project
  elif [[ -n "$running_image" && "$running_image" != "$KAFKA_IMAGE" ]]; then
    # compose would keep the old broker (up --no-recreate below): a version switch needs a fresh one.
    log "removing the running cluster (its broker runs $running_image; wanted $KAFKA_IMAGE)"
    remove_project
  fi
  save_state

  local t3; t3=$(now)
  # --no-recreate / --no-deps: an `up` of a running cluster never recreates the broker (which would lose
  # every topic). Compose v2 over podman 4.3 would recreate every container on each `up` otherwise:
  # podman reports a container's NetworkID as the network's name, which v2 takes for a changed network.
  # Workers and producer are recreated only when the demo image changed.
  local recreate=--no-recreate
  ((IMAGE_CHANGED)) && recreate=--force-recreate
  # shellcheck disable=SC2046 # word list on purpose
  compose up -d --no-recreate $(broker_services) >&2
  wait_broker "${ACTORFLOW_BROKER_TIMEOUT:-$((brokers == 3 ? 240 : 120))}"
  log "$(broker_services | wc -w) broker(s) up $(since "$t3")s after compose up (bootstrap $(bootstrap))"
  compose up -d --no-deps "$recreate" worker1 worker2 worker3 >&2
  log "waiting for worker1..3 to join the group (broker start, topic creation)"
  wait_ready "${ACTORFLOW_READY_TIMEOUT:-240}" worker1 worker2 worker3 || die "cluster not ready"
  log "workers ready $(since "$t3")s after compose up"
  compose up -d --no-deps "$recreate" producer >&2
  local deadline=$(($(date +%s) + 60)) n=0
  while (($(date +%s) < deadline)); do
    n="$(processed worker1 worker2 worker3)"
    ((n > 0)) && break
    sleep 0.5
  done
  ((n > 0)) || { compose logs --tail=30 producer >&2 || true; die "no event folded 60s after the producer started"; }
  log "events flowing ($n folded); cluster up in $(since "$t0")s (mode $mode, $brokers broker(s))"
  cmd_status
}

remove_project() {
  # Producer and workers first, while the broker still answers: a worker's clean stop flushes and
  # commits (seconds); with the broker stopping at the same time it would wait out the 30 s grace.
  # All profiles, so that worker4/worker5 and a verifier left by `run` go too.
  COMPOSE_PROFILES=scale,verify compose_all stop -t 30 producer worker1 worker2 worker3 worker4 worker5 >&2 || true
  COMPOSE_PROFILES=scale,verify compose_all down -v --remove-orphans -t 30 >&2 || true
  # Whatever compose left (a container of an older compose file, a `run` one-off): only this project's.
  local ids; ids="$(project_containers)"
  if [[ -n "$ids" ]]; then
    # shellcheck disable=SC2086
    dk rm -f -v $ids >/dev/null 2>&1 || true
  fi
  dk network rm "${PROJECT}_default" >/dev/null 2>&1 || true
}

cmd_down() {
  local t0; t0=$(now)
  if ! dk info >/dev/null 2>&1; then
    log "no container engine answers: nothing to remove"
  else
    pick_compose
    remove_project
    if dk rmi "$DEMO_IMAGE" >/dev/null 2>&1; then log "removed image $DEMO_IMAGE"; fi
  fi
  rm -rf "$STATE/image"
  if [[ -f "$STATE/engine-started-by-cluster" ]]; then
    local others; others="$(dk ps -aq 2>/dev/null | wc -l || echo 0)"
    if ((others == 0)); then
      "$ROOT/scripts/container-engine.sh" stop || true
    else
      log "leaving the podman service running: $others other container(s) use it"
    fi
    rm -f "$STATE/engine-started-by-cluster"
  fi
  rm -f "$ENVFILE"
  log "down in $(since "$t0")s"
}

cmd_status() {
  echo "brokers: $(broker_count) ($(broker_services | tr ' ' ',')), bootstrap from the host $(bootstrap)"
  dk ps -a --filter "label=com.docker.compose.project=$PROJECT" \
    --format 'table {{.Names}}\t{{.Status}}\t{{.Ports}}' || true
  local w port st
  for w in worker1 worker2 worker3 worker4 worker5; do
    [[ -n "$(cid "$w")" ]] || continue
    port="$(worker_port "$w")"
    if st="$(curl -sf --max-time 2 "http://127.0.0.1:$port/status")"; then
      jq -r --arg w "$w" '"\($w): generation \(.generation) processed \(.processed_total) partitions " +
        ([.partitions[]? | "\(.partition)(\(.phase) @\(.committable_offset))"] | join(" "))' <<<"$st"
    else
      echo "$w: no answer on 127.0.0.1:$port"
    fi
  done
}

main() {
  local cmd="${1:-}"; shift || true
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) load_state; engine_env; cmd_down ;;
    status) load_state; engine_env; cmd_status ;;
    env)
      load_state; engine_env; pick_compose
      echo "export DOCKER_HOST=${DOCKER_HOST:-}"
      [[ -n "${CONTAINERS_CONF:-}" ]] && echo "export CONTAINERS_CONF=$CONTAINERS_CONF"
      echo "export COMPOSE_PROJECT_NAME=$PROJECT"
      # COMPOSE_FILE takes a ':'-separated list (compose 1.29 and v2).
      echo "export COMPOSE_FILE=$(compose_files | paste -sd:)"
      echo "export ACTORFLOW_BROKER_COUNT=$(broker_count)"
      # The brokers' EXTERNAL listeners, for clients on the host (kcat -b, kcluster -brokers, go test).
      echo "export ACTORFLOW_BOOTSTRAP=$(bootstrap)"
      echo "export KAFKA_IMAGE=${KAFKA_IMAGE:-}"
      echo "export DEMO_IMAGE=$DEMO_IMAGE"
      echo "# compose: ${COMPOSE_CMD[*]}"
      ;;
    compose) load_state; engine_env; pick_compose; compose "$@" ;;
    # --no-deps: compose v2 over podman would otherwise recreate the broker (see cmd_up).
    verify) load_state; engine_env; pick_compose; compose run --rm -T --no-deps verifier ;;
    *) echo "usage: $0 up [--mode transactional|plain] [--brokers 1|3] [--fresh] | down | status | env | compose ARGS... | verify" >&2; exit 2 ;;
  esac
}

main "$@"
