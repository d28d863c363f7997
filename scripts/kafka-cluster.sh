#!/usr/bin/env bash
# kafka-cluster.sh — a 3-node Apache Kafka KRaft cluster on loopback, as the smallest production shape:
# three combined broker+controller JVMs, replication factor 3, min.insync.replicas=2, the offsets and
# transaction-state logs replicated 3 with min ISR 2. No container engine: the broker runs from the
# Maven Central jars that scripts/kafka-image.sh caches (resolved here with the same pom when missing).
#
#   scripts/kafka-cluster.sh start [--fresh]    # start the nodes not running; --fresh wipes the data first.
#                                               # Waits until all 3 are listed and a topic replicated 3 can
#                                               # be created; prints the bootstrap list as the LAST stdout line
#   scripts/kafka-cluster.sh stop               # SIGTERM every node started here (pid files), SIGKILL after 30 s
#   scripts/kafka-cluster.sh status             # per node: pid, alive, listening; then the cluster's metadata
#   scripts/kafka-cluster.sh brokers            # the bootstrap list: 127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   scripts/kafka-cluster.sh kill-node N        # SIGKILL node N (1..3) and wait until it is gone
#   scripts/kafka-cluster.sh restart-node N     # (stop N if alive, then) start N; wait until it is listed again
#                                               # (with another KAFKA_VERSION: one step of a rolling upgrade)
#   scripts/kafka-cluster.sh leader-of TOPIC P  # node id leading TOPIC[P]
#   scripts/kafka-cluster.sh leader-of --txn ID # node id of the transaction coordinator of transactional.id ID
#   scripts/kafka-cluster.sh leader-of --group G   # node id of group G's coordinator
#   scripts/kafka-cluster.sh leaders TOPIC      # "node: partitions" it leads
#   scripts/kafka-cluster.sh wait-isr [TOPIC..] # until no partition (of TOPICs, default all) is under-replicated
#   scripts/kafka-cluster.sh logs N             # tail -f node N's log
#
# Knobs (environment):
#   KAFKA_VERSION                     default 4.4.0 (scripts/kafka-versions.env's newest when present); 4.1.2 works too
#   ACTORFLOW_CACHE                   cache root, default ~/.cache/actorflow; state in $ACTORFLOW_CACHE/cluster3
#   ACTORFLOW_CLUSTER3_PORT_BASE      default 29090: node N listens on base+N (clients), base+100+N (controller);
#                                     below the kernel's ephemeral range (32768-60999), where a client socket
#                                     could hold the port
#   ACTORFLOW_CLUSTER3_HEAP           default "-Xms256m -Xmx640m" per node
#   ACTORFLOW_CLUSTER3_LOGLEVEL       root log level of the nodes, default WARN (coordinator moves are logged at INFO)
#   ACTORFLOW_CLUSTER3_READY_TIMEOUT  seconds, default 120
#   CLUSTER3_KAFKA_<NAME>=v           any broker property, named like the images' KAFKA_<NAME> (drop the prefix,
#                                     lower-case, '___' -> '-', '__' -> '_', '_' -> '.'):
#                                     CLUSTER3_KAFKA_TRANSACTION_MAX_TIMEOUT_MS=60000
#   JAVA                              the java binary, default `java` on PATH (Java 17)
# A start of an existing cluster with another version or port base refuses: use --fresh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
if [[ -f "$HERE/kafka-versions.env" ]]; then
  # shellcheck source=/dev/null
  . "$HERE/kafka-versions.env"
fi
VERSION="${KAFKA_VERSION:-${KAFKA_VERSION_NEWEST:-4.4.0}}"
SCALA="${KAFKA_SCALA_VERSION:-2.13}"
CACHE="${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}"
KDIR="$CACHE/kafka"
STATE="$CACHE/cluster3"
BASE="${ACTORFLOW_CLUSTER3_PORT_BASE:-29090}"
HEAP="${ACTORFLOW_CLUSTER3_HEAP:--Xms256m -Xmx640m}"
LOGLEVEL="${ACTORFLOW_CLUSTER3_LOGLEVEL:-WARN}"
READY_TIMEOUT="${ACTORFLOW_CLUSTER3_READY_TIMEOUT:-120}"
JAVA="${JAVA:-java}"
NODES=(1 2 3)
TOOL="$STATE/bin/kcluster"

log() { echo "kafka-cluster: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

port() { echo $((BASE + $1)); }
cport() { echo $((BASE + 100 + $1)); }
brokers() {
  local n out=""
  for n in "${NODES[@]}"; do out+="${out:+,}127.0.0.1:$(port "$n")"; done
  echo "$out"
}
node_dir() { echo "$STATE/node-$1"; }
check_node() { [[ "${1:-}" =~ ^[123]$ ]] || die "node must be 1, 2 or 3 (got '${1:-}')"; }

# The pid of node N if that process is alive and is the node's JVM (a pid file outlives its process; a
# SIGKILLed node whose parent does not reap it stays a zombie: both count as dead).
node_pid() {
  local f pid state
  f="$(node_dir "$1")/pid"
  [[ -f "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ -n "$pid" && -d "/proc/$pid" ]] || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)"
  [[ "$state" != Z && "$state" != X ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$(node_dir "$1")/server.properties" || return 1
  echo "$pid"
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------------------------------------------
# The broker's classpath: the same cache and layout as scripts/kafka-image.sh's build_jars (jars/<v>/libs
# + .complete), under the same lock, so either script can fill it for the other. This is that
# function's pom and mvn calls, kept in step with it.
ensure_jars() {
  # One recipe for the broker's classpath: kafka-image.sh's (same cache, lock and .complete marker).
  [[ -f "$KDIR/jars/$VERSION/.complete" ]] && return
  KAFKA_VERSION="$VERSION" KAFKA_SCALA_VERSION="$SCALA" "$HERE/kafka-image.sh" --jars-only >/dev/null ||
    die "could not get the Kafka $VERSION jars (scripts/kafka-image.sh --jars-only)"
}

# The lookup tool (kadm): built once, rebuilt when its sources change.
ensure_tool() {
  local src="$ROOT/internal/kcluster"
  if [[ -x "$TOOL" ]] && [[ -z "$(find "$src" -name '*.go' -newer "$TOOL" -print -quit)" ]]; then return; fi
  command -v go >/dev/null 2>&1 || die "go is needed to build the lookup tool ($src)"
  mkdir -p "$(dirname "$TOOL")"
  (cd "$ROOT" && go build -o "$TOOL.tmp" ./internal/kcluster/cmd/kcluster) || die "go build ./internal/kcluster/cmd/kcluster failed"
  mv "$TOOL.tmp" "$TOOL"
}
tool() { ensure_tool; "$TOOL" -brokers "$(brokers)" "$@"; }

# ---------------------------------------------------------------------------------------------------
write_log4j() {
  cat >"$STATE/log4j2.properties" <<'EOF'
# kafka-cluster.sh: WARN and above, plus the lines that say where leadership and coordinators went.
status = warn
name = actorflow-cluster3
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{ISO8601}] %p %m (%c)%n
rootLogger.level = ${sys:kafka.root.loglevel:-WARN}
rootLogger.appenderRef.out.ref = OUT
logger.raftserver.name = kafka.server.KafkaRaftServer
logger.raftserver.level = INFO
# Transaction coordinator: partitions of __transaction_state loaded / unloaded (coordinator moves).
logger.txn.name = kafka.coordinator.transaction
logger.txn.level = INFO
# Group coordinator: loads and rebalances.
logger.group.name = org.apache.kafka.coordinator.group
logger.group.level = INFO
logger.runtime.name = org.apache.kafka.coordinator.common.runtime
logger.runtime.level = INFO
EOF
}

# One node's server.properties: the single-node image's settings (scripts/kafka-image/entrypoint.sh) with
# the replication of a production cluster.
write_properties() {
  local n="$1" d voters="" m
  d="$(node_dir "$n")"
  for m in "${NODES[@]}"; do voters+="${voters:+,}$m@127.0.0.1:$(cport "$m")"; done
  # shellcheck disable=SC2054 # commas are inside values
  declare -A props=(
    [node.id]="$n"
    [process.roles]=broker,controller
    [listeners]="PLAINTEXT://127.0.0.1:$(port "$n"),CONTROLLER://127.0.0.1:$(cport "$n")"
    [advertised.listeners]="PLAINTEXT://127.0.0.1:$(port "$n")"
    [listener.security.protocol.map]="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    [inter.broker.listener.name]=PLAINTEXT
    [controller.listener.names]=CONTROLLER
    # Static quorum: every node formatted with the same cluster id, without --standalone.
    [controller.quorum.voters]="$voters"
    [log.dirs]="$d/data"
    [default.replication.factor]=3
    [min.insync.replicas]=2
    [offsets.topic.replication.factor]=3
    [transaction.state.log.replication.factor]=3
    [transaction.state.log.min.isr]=2
    [share.coordinator.state.topic.replication.factor]=3
    [share.coordinator.state.topic.min.isr]=2
    [group.initial.rebalance.delay.ms]=0
    [group.coordinator.rebalance.protocols]=classic,consumer
    [group.consumer.min.session.timeout.ms]=2000
    [group.consumer.min.heartbeat.interval.ms]=100
    # Kafka's defaults, listed so that it is visible they are meant to be overridden.
    [transaction.abort.timed.out.transaction.cleanup.interval.ms]=10000
    [transaction.max.timeout.ms]=900000
  )
  local name key
  for name in $(compgen -e); do
    [[ "$name" == CLUSTER3_KAFKA_* ]] || continue
    key="${name#CLUSTER3_KAFKA_}"
    key="$(echo "$key" | tr '[:upper:]' '[:lower:]' | sed -e 's/___/-/g' -e 's/__/\x01/g' -e 's/_/./g' -e 's/\x01/_/g')"
    props[$key]="${!name}"
  done
  mkdir -p "$d"
  : >"$d/server.properties.tmp"
  for key in $(printf '%s\n' "${!props[@]}" | sort); do
    printf '%s=%s\n' "$key" "${props[$key]}" >>"$d/server.properties.tmp"
  done
  mv "$d/server.properties.tmp" "$d/server.properties"
}

java_opts() {
  # shellcheck disable=SC2206 # word lists on purpose
  local heap=($HEAP)
  printf '%s\n' "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$STATE/log4j2.properties" "-Dkafka.root.loglevel=$LOGLEVEL" \
    -Dlog4j2.shutdownHookEnabled=false # a stopped node logs its whole shutdown (see scripts/kafka-image/entrypoint.sh)
}

format_node() {
  local n="$1" d id="$2"
  d="$(node_dir "$n")"
  local opts; mapfile -t opts < <(java_opts)
  # kafka.tools.StorageTool is what bin/kafka-storage.sh runs; --ignore-formatted keeps a restart working.
  "$JAVA" "${opts[@]}" -cp "$KDIR/jars/$VERSION/libs/*" kafka.tools.StorageTool format \
    --ignore-formatted --cluster-id="$id" --config "$d/server.properties" >"$d/format.log" 2>&1 ||
    { cat "$d/format.log" >&2; die "formatting node $n failed"; }
}

launch_node() {
  local n="$1" d
  d="$(node_dir "$n")"
  local p; p="$(port "$n")"
  if listening "$p" || listening "$(cport "$n")"; then
    die "port $p or $(cport "$n") of node $n is in use by another process (ACTORFLOW_CLUSTER3_PORT_BASE moves them)"
  fi
  local opts; mapfile -t opts < <(java_opts)
  echo "==== $(date -Is) node $n starting (Kafka $VERSION)" >>"$d/kafka.log"
  # A session of its own: the node outlives this script and the caller's process group (a Ctrl-C of a
  # test); `stop` ends it through its pid file. The pid written is the one exec'd into java.
  # shellcheck disable=SC2016 # expanded by the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$d/pid" \
    "$JAVA" "${opts[@]}" -cp "$KDIR/jars/$VERSION/libs/*" kafka.Kafka "$d/server.properties" \
    >>"$d/kafka.log" 2>&1 </dev/null &
  local i
  for i in $(seq 1 50); do [[ -s "$d/pid" ]] && break; sleep 0.1; done
}

wait_listening() {
  local n="$1" deadline=$((SECONDS + READY_TIMEOUT))
  until listening "$(port "$n")"; do
    node_pid "$n" >/dev/null || { tail -n 40 "$(node_dir "$n")/kafka.log" >&2; die "node $n exited during start (log: $(node_dir "$n")/kafka.log)"; }
    ((SECONDS < deadline)) || die "node $n not listening on $(port "$n") within ${READY_TIMEOUT}s"
    sleep 0.2
  done
}

save_state() {
  cat >"$STATE/cluster.env" <<EOF
VERSION=$VERSION
BASE=$BASE
CLUSTER_ID=$1
EOF
}

cluster_id() {
  local id=-
  while [[ "$id" == -* ]]; do id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"; done
  echo "$id"
}

cmd_start() {
  local fresh=0
  [[ "${1:-}" == --fresh ]] && fresh=1
  if ! command -v "$JAVA" >/dev/null 2>&1; then
    # A new machine: install the JRE the nodes run on (as kafka-image.sh installs Maven).
    [[ "$JAVA" == java && $(id -u) -eq 0 ]] || die "no java ($JAVA): apt-get install openjdk-17-jre-headless"
    log "no java on PATH: installing openjdk-17-jre-headless (apt-get)"
    mkdir -p "$CACHE"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \
        >"$CACHE/apt-java.log" 2>&1 || { tail -n 30 "$CACHE/apt-java.log" >&2; die "apt-get install openjdk-17-jre-headless failed"; }
  fi
  mkdir -p "$STATE"
  local t0 n running=()
  t0=$(now)
  for n in "${NODES[@]}"; do node_pid "$n" >/dev/null && running+=("$n"); done
  if ((fresh)); then
    ((${#running[@]} == 0)) || cmd_stop
    running=()
    for n in "${NODES[@]}"; do
      rm -rf "$(node_dir "$n")/data"
      [[ -f "$(node_dir "$n")/kafka.log" ]] && mv "$(node_dir "$n")/kafka.log" "$(node_dir "$n")/kafka.log.1"
    done
    rm -f "$STATE/cluster.env"
  fi
  local id
  if [[ -f "$STATE/cluster.env" ]]; then
    local sv sb
    sv="$(sed -n 's/^VERSION=//p' "$STATE/cluster.env")"
    sb="$(sed -n 's/^BASE=//p' "$STATE/cluster.env")"
    [[ "$sv" == "$VERSION" && "$sb" == "$BASE" ]] ||
      die "the cluster in $STATE is Kafka $sv on port base $sb (asked: $VERSION, $BASE): use start --fresh (wipes its data), or KAFKA_VERSION=$VERSION restart-node N for each node to roll it to $VERSION"
    id="$(sed -n 's/^CLUSTER_ID=//p' "$STATE/cluster.env")"
  else
    id="$(cluster_id)"
  fi
  ensure_jars
  ensure_tool
  write_log4j
  for n in "${NODES[@]}"; do write_properties "$n"; done
  save_state "$id"
  local pids=()
  for n in "${NODES[@]}"; do
    [[ " ${running[*]} " == *" $n "* ]] && continue
    format_node "$n" "$id" &
    pids+=($!)
  done
  for n in "${pids[@]}"; do wait "$n" || die "format failed"; done
  for n in "${NODES[@]}"; do
    [[ " ${running[*]} " == *" $n "* ]] && { log "node $n already running (pid $(node_pid "$n"))"; continue; }
    launch_node "$n"
  done
  for n in "${NODES[@]}"; do wait_listening "$n"; done
  tool ready -n 3 -probe-topic actorflow-cluster3-ready -timeout "${READY_TIMEOUT}s" ||
    die "the cluster did not become ready (logs: $STATE/node-*/kafka.log)"
  log "3 nodes of Kafka $VERSION ready in $(since "$t0")s: $(brokers) (state: $STATE)"
  brokers
}

stop_node() {
  local n="$1" pid i
  pid="$(node_pid "$n")" || { rm -f "$(node_dir "$n")/pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 150); do node_pid "$n" >/dev/null || break; sleep 0.2; done
  if pid="$(node_pid "$n")"; then
    log "node $n (pid $pid) still running 30 s after SIGTERM: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do node_pid "$n" >/dev/null || break; sleep 0.1; done
  fi
  rm -f "$(node_dir "$n")/pid"
}

cmd_stop() {
  local n pids=()
  # Concurrently: a controlled shutdown of one node waits for the others to take its leaderships.
  for n in "${NODES[@]}"; do
    if node_pid "$n" >/dev/null; then
      stop_node "$n" &
      pids+=($!)
    fi
  done
  for n in "${pids[@]}"; do wait "$n" || true; done
  log "stopped (data and logs kept in $STATE; start --fresh wipes the data)"
}

cmd_kill() {
  check_node "${1:-}"
  local n="$1" pid i
  pid="$(node_pid "$n")" || die "node $n is not running"
  kill -KILL "$pid"
  for i in $(seq 1 100); do node_pid "$n" >/dev/null || break; sleep 0.05; done
  node_pid "$n" >/dev/null && die "node $n (pid $pid) still alive after SIGKILL"
  echo "==== $(date -Is) node $n SIGKILLed by kafka-cluster.sh" >>"$(node_dir "$n")/kafka.log"
  rm -f "$(node_dir "$n")/pid"
  log "node $n (pid $pid) killed"
}

cmd_restart() {
  check_node "${1:-}"
  local n="$1" t0
  [[ -f "$STATE/cluster.env" ]] || die "no cluster in $STATE: start it first"
  t0=$(now)
  if node_pid "$n" >/dev/null; then stop_node "$n"; fi
  ensure_jars
  ensure_tool
  launch_node "$n"
  wait_listening "$n"
  tool ready -n 3 -node "$n" -timeout "${READY_TIMEOUT}s" || die "node $n did not rejoin the cluster"
  log "node $n restarted and listed again in $(since "$t0")s"
  local sv
  sv="$(sed -n 's/^VERSION=//p' "$STATE/cluster.env")"
  if [[ "$sv" != "$VERSION" ]]; then
    # A rolling upgrade (or downgrade), one node at a time: the cluster is
    # recorded at the version its nodes move to, so that a later start,
    # status or restart goes on with it (a trial's start refused the
    # upgraded cluster, and --fresh wipes the data).
    sed -i "s/^VERSION=.*/VERSION=$VERSION/" "$STATE/cluster.env"
    log "node $n now runs Kafka $VERSION (the cluster was $sv): restart the other nodes with the same KAFKA_VERSION to finish the roll"
  fi
}

cmd_status() {
  local n pid any=0
  for n in "${NODES[@]}"; do
    if pid="$(node_pid "$n")"; then
      any=1
      printf 'node %d: pid %s, %s on 127.0.0.1:%d\n' "$n" "$pid" \
        "$(listening "$(port "$n")" && echo listening || echo 'not listening')" "$(port "$n")"
    else
      printf 'node %d: not running\n' "$n"
    fi
  done
  [[ -f "$STATE/cluster.env" ]] && sed 's/^/  /' "$STATE/cluster.env"
  ((any)) && tool describe
  return 0
}

cmd_leader_of() {
  case "${1:-}" in
    --txn) [[ -n "${2:-}" ]] || die "leader-of --txn ID"; tool leader-of -txn "$2" ;;
    --group) [[ -n "${2:-}" ]] || die "leader-of --group G"; tool leader-of -group "$2" ;;
    *) [[ -n "${1:-}" && -n "${2:-}" ]] || die "leader-of TOPIC PARTITION | --txn ID | --group G"; tool leader-of "$1" "$2" ;;
  esac
}

main() {
  local cmd="${1:-status}"
  shift || true
  case "$cmd" in
    start) cmd_start "$@" ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    brokers) brokers ;;
    kill-node) cmd_kill "$@" ;;
    restart-node) cmd_restart "$@" ;;
    leader-of) cmd_leader_of "$@" ;;
    leaders) [[ -n "${1:-}" ]] || die "leaders TOPIC"; tool leaders "$1" ;;
    wait-isr) tool wait-isr -timeout "${READY_TIMEOUT}s" "$@" ;;
    logs) check_node "${1:-}"; tail -n 100 -f "$(node_dir "$1")/kafka.log" ;;
    *) die "unknown command '$cmd' (start [--fresh] | stop | status | brokers | kill-node N | restart-node N | leader-of ... | leaders T | wait-isr | logs N)" ;;
  esac
}

main "$@"
