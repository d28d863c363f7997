#!/usr/bin/env bash
# itest.sh — run the integration tests (./itest/...) against a real Kafka broker in a container.
#
#   scripts/itest.sh                 # everything: engine, image, go test
#   scripts/itest.sh -run Smoke      # extra arguments go to `go test` before the package list
#
# 1. scripts/container-engine.sh start   (an existing Docker engine, or podman installed + started)
# 2. scripts/kafka-image.sh              (KAFKA_IMAGE, upstream apache/kafka, or a local build)
# 3. go test -race -count=1 -v ./itest/... with DOCKER_HOST and KAFKA_IMAGE exported
# 4. stops the podman service if step 1 started it (images and caches stay for the next run)
# Exit code: go test's (or 1 when provisioning failed before it could run).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
t0=$(date +%s)
log() { echo "itest.sh: $*" >&2; }

# Remember whether the service was already up, so that we only stop what we started.
engine_was_running=0
scripts/container-engine.sh status >/dev/null 2>&1 && engine_was_running=1

engine_env="$(scripts/container-engine.sh start)" || { log "no container engine"; exit 1; }
eval "$engine_env"
# shellcheck disable=SC2317 # called through the trap
stop_engine() {
  if [[ $engine_was_running == 0 ]]; then scripts/container-engine.sh stop || true; fi
}
trap stop_engine EXIT
t1=$(date +%s)
log "container engine ready in $((t1 - t0))s (DOCKER_HOST=${DOCKER_HOST:-default})"

image_out="$(scripts/kafka-image.sh)" || { log "no Kafka broker image"; exit 1; }
KAFKA_IMAGE="$(tail -n1 <<<"$image_out")"
export KAFKA_IMAGE
t2=$(date +%s)
log "Kafka image $KAFKA_IMAGE ready in $((t2 - t1))s"

go test -race -count=1 -v "$@" ./itest/...
rc=$?
log "go test exited $rc after $(($(date +%s) - t2))s (total $(($(date +%s) - t0))s)"
exit $rc
