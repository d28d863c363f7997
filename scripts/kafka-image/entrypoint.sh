#!/bin/bash
# Entrypoint of localhost/actorflow-kafka:<version>: a single-node KRaft broker (broker+controller in
# one process) for tests. Built into the image by scripts/kafka-image.sh; runs inside the container.
#
# Configuration, in increasing priority:
#   1. test-friendly defaults below (replication factor 1, no rebalance delay, ...);
#   2. shortcuts: KAFKA_PORT (listener AND advertised port, default 9092), KAFKA_ADVERTISED_HOST
#      (default localhost), KAFKA_CONTROLLER_PORT (default 9093, never published);
#   3. any KAFKA_<NAME>=value, turned into a property the same way the upstream apache/kafka image
#      does it: drop KAFKA_, lower-case, '___' -> '-', '__' -> '_', '_' -> '.'
#      (KAFKA_TRANSACTION_MAX_TIMEOUT_MS=60000 -> transaction.max.timeout.ms=60000).
#      So a test can pass one env set that works on both this image and apache/kafka.
# CLUSTER_ID (same name as upstream) fixes the cluster id; otherwise a random one is made.
# KAFKA_HEAP_OPTS, KAFKA_OPTS and KAFKA_LOG4J_ROOT_LOGLEVEL (default WARN) are JVM/logging settings;
# KAFKA_LOG4J_LOGGERS="logger=LEVEL,logger=LEVEL" (the upstream images' name) raises single loggers, e.g.
# kafka.coordinator.transaction=DEBUG to see every transaction's state changes and markers.
set -euo pipefail

KAFKA_HOME=/opt/kafka
CONFIG=/var/lib/kafka/server.properties
PORT="${KAFKA_PORT:-9092}"
HOST="${KAFKA_ADVERTISED_HOST:-localhost}"
CPORT="${KAFKA_CONTROLLER_PORT:-9093}"

# shellcheck disable=SC2054 # commas are inside values
declare -A props=(
  [node.id]=1
  [process.roles]=broker,controller
  [listeners]="PLAINTEXT://0.0.0.0:${PORT},CONTROLLER://localhost:${CPORT}"
  [advertised.listeners]="PLAINTEXT://${HOST}:${PORT}"
  [listener.security.protocol.map]="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  [inter.broker.listener.name]=PLAINTEXT
  [controller.listener.names]=CONTROLLER
  # Static quorum: storage is formatted without --standalone/--initial-controllers.
  [controller.quorum.voters]="1@localhost:${CPORT}"
  [log.dirs]=/var/lib/kafka/data
  [offsets.topic.replication.factor]=1
  [transaction.state.log.replication.factor]=1
  [transaction.state.log.min.isr]=1
  [share.coordinator.state.topic.replication.factor]=1
  [share.coordinator.state.topic.min.isr]=1
  [group.initial.rebalance.delay.ms]=0
  # Kafka's own defaults, listed so that it is visible they are meant to be overridden by tests.
  [transaction.abort.timed.out.transaction.cleanup.interval.ms]=10000
  [transaction.max.timeout.ms]=900000
)

# Env vars that are not broker properties (the same list upstream excludes, plus our shortcuts).
is_excluded() {
  case "$1" in
    KAFKA_PORT | KAFKA_ADVERTISED_HOST | KAFKA_CONTROLLER_PORT | KAFKA_VERSION | KAFKA_HOME | \
      KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_LOG4J_OPTS | KAFKA_JMX_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | \
      KAFKA_GC_LOG_OPTS | KAFKA_LOG4J_ROOT_LOGLEVEL | KAFKA_LOG4J_LOGGERS | KAFKA_TOOLS_LOG4J_LOGLEVEL | \
      KAFKA_JMX_HOSTNAME | KAFKA_JMX_PORT) return 0 ;;
  esac
  return 1
}

for name in $(compgen -e); do
  [[ "$name" == KAFKA_* ]] || continue
  is_excluded "$name" && continue
  key="${name#KAFKA_}"
  key="$(echo "$key" | tr '[:upper:]' '[:lower:]' | sed -e 's/___/-/g' -e 's/__/\x01/g' -e 's/_/./g' -e 's/\x01/_/g')"
  props[$key]="${!name}"
done

mkdir -p /var/lib/kafka
: >"$CONFIG"
for k in $(printf '%s\n' "${!props[@]}" | sort); do
  printf '%s=%s\n' "$k" "${props[$k]}" >>"$CONFIG"
done
echo "actorflow-kafka: advertised.listeners=${props[advertised.listeners]} listeners=${props[listeners]}"

if [[ -z "${CLUSTER_ID:-}" ]]; then
  # A Kafka Uuid is 16 random bytes, base64url without padding (22 chars). Avoid a leading '-',
  # which the tool's argument parser would read as an option.
  CLUSTER_ID=-
  while [[ "$CLUSTER_ID" == -* ]]; do
    CLUSTER_ID="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
fi

LOG4J_CONFIG="$KAFKA_HOME/config/log4j2.properties"
if [[ -n "${KAFKA_LOG4J_LOGGERS:-}" ]]; then
  LOG4J_CONFIG=/var/lib/kafka/log4j2.properties
  cp "$KAFKA_HOME/config/log4j2.properties" "$LOG4J_CONFIG"
  i=0
  IFS=',' read -ra loggers <<<"$KAFKA_LOG4J_LOGGERS"
  for entry in "${loggers[@]}"; do
    name="${entry%%=*}" level="${entry#*=}"
    [[ -n "$name" && "$entry" == *=* ]] || { echo "actorflow-kafka: KAFKA_LOG4J_LOGGERS: '$entry' is not logger=LEVEL" >&2; exit 2; }
    i=$((i + 1))
    printf 'logger.extra%d.name = %s\nlogger.extra%d.level = %s\n' "$i" "$name" "$i" "$level" >>"$LOG4J_CONFIG"
  done
  echo "actorflow-kafka: log levels raised: $KAFKA_LOG4J_LOGGERS"
fi

# shellcheck disable=SC2206 # the *_OPTS variables are word lists on purpose
JAVA_OPTS=(
  ${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}
  # The GC flags bin/kafka-run-class.sh uses.
  -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
  -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
  "-Dlog4j2.configurationFile=$LOG4J_CONFIG"
  "-Dkafka.root.loglevel=${KAFKA_LOG4J_ROOT_LOGLEVEL:-WARN}"
  # log4j 2 stops its appenders from a JVM shutdown hook of its own, which races Kafka's: a broker
  # stopped with SIGTERM logged nothing of its shutdown ("Unable to register Log4j shutdown hook
  # because JVM is shutting down"), e.g. the transaction coordinator's last markers. Without the
  # hook the console appender (unbuffered) keeps writing until the JVM exits.
  -Dlog4j2.shutdownHookEnabled=false
  ${KAFKA_OPTS:-}
)
CP="$KAFKA_HOME/libs/*"

# kafka.tools.StorageTool is what bin/kafka-storage.sh runs; --ignore-formatted keeps a restart of the
# same container working.
java "${JAVA_OPTS[@]}" -cp "$CP" kafka.tools.StorageTool format \
  --ignore-formatted --cluster-id="$CLUSTER_ID" --config "$CONFIG"

# kafka.Kafka is what bin/kafka-server-start.sh runs.
exec java "${JAVA_OPTS[@]}" -cp "$CP" kafka.Kafka "$CONFIG"
