#!/usr/bin/env bash
# itest.sh — run the integration tests (./itest/...) against a real Kafka broker in a container.
#
#   scripts/itest.sh                 # everything: engine, image, go test
#   scripts/itest.sh -run Smoke      # extra arguments go to `go test` before the package list
#   KAFKA_VERSION=4.1.2 scripts/itest.sh   # another broker version (default: the newest supported,
#                                          # scripts/kafka-versions.env)
#
# 1. scripts/container-engine.sh start   (an existing Docker engine, or podman installed + started)
# 2. scripts/kafka-image.sh              (KAFKA_IMAGE, upstream apache/kafka, or a local build)
# 3. go test -race -count=1 -v ./itest/... with DOCKER_HOST, KAFKA_IMAGE and KAFKA_VERSION exported
#    (the suite checks that the broker it started is that version: TestBrokerVersion)
# 4. stops the podman service if step 1 started it (images and caches stay for the next run)
# Exit code: go test's (or 1 when provisioning failed before it could run).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
t0=$(date +%s)
log() { echo "itest.sh: $*" >&2; }
# shellcheck source=kafka-versions.env
. scripts/kafka-versions.env
if [[ -z "${KAFKA_VERSION:-}" && -n "${KAFKA_IMAGE:-}" ]]; then
  # An image given by name names its version in its tag; the suite checks the broker against that.
  log "KAFKA_IMAGE=$KAFKA_IMAGE without KAFKA_VERSION (supported: $KAFKA_VERSION_OLDEST .. $KAFKA_VERSION_NEWEST)"
else
  export KAFKA_VERSION="${KAFKA_VERSION:-$KAFKA_VERSION_NEWEST}"
  log "Kafka $KAFKA_VERSION (supported: $KAFKA_VERSION_OLDEST .. $KAFKA_VERSION_NEWEST)"
fi

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

# kcat (Debian's package): the independent client of itest/foreign_reader_test.go, which reads the
# snapshot topic read_committed and compares it with snapshotstore.ReadLatest. Best effort: without
# it that test skips with a message, the rest of the suite runs. ACTORFLOW_ITEST_NO_KCAT=1 skips
# the install.
if ! command -v kcat >/dev/null 2>&1 && [[ ${ACTORFLOW_ITEST_NO_KCAT:-0} != 1 ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing kcat (apt-get) for the foreign-reader test"
    export DEBIAN_FRONTEND=noninteractive
    kcat_log="${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}/kcat-apt.log"
    mkdir -p "$(dirname "$kcat_log")"
    # The package lists may be missing or stale: update only when the first try fails.
    if ! apt-get install -y -qq --no-install-recommends kcat >"$kcat_log" 2>&1; then
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends kcat; } >>"$kcat_log" 2>&1 ||
        log "kcat could not be installed (see $kcat_log): the foreign-reader test will skip"
    fi
  else
    log "kcat is not installed and cannot be (needs root and apt-get): the foreign-reader test will skip"
  fi
fi
if [[ ${ACTORFLOW_ITEST_REQUIRE_KCAT:-0} == 1 ]] && ! command -v kcat >/dev/null 2>&1; then
  log "kcat is required (ACTORFLOW_ITEST_REQUIRE_KCAT=1, as in CI) and could not be installed"
  exit 1
fi
t3=$(date +%s)
[[ $t3 -gt $t2 ]] && log "kcat step took $((t3 - t2))s"

suite_log="$(mktemp)"
# 30 min: go test's default 10 is 3x the suite's time here, not enough on a slower machine.
run_suite() { go test -race -count=1 -timeout 30m -v "$@" ./itest/... 2>&1 | tee "$suite_log"; return "${PIPESTATUS[0]}"; }
run_suite "$@"
rc=$?
# A podman service can get into a state where it answers the API but cannot start a container
# ("API error (500): write child: broken pipe", seen in a rehearsal after an hour of other work;
# `podman run` from the CLI still worked). The suite then fails at once, before any test: restart
# the engine and run it once more.
if [[ $rc != 0 ]] && grep -q "FAILED to start the Kafka broker" "$suite_log"; then
  log "the broker container did not start: restarting the container engine, then the suite once more"
  scripts/container-engine.sh stop || true
  engine_env="$(scripts/container-engine.sh start)" || { log "no container engine"; exit 1; }
  eval "$engine_env"
  run_suite "$@"
  rc=$?
fi
rm -f "$suite_log"
log "go test exited $rc after $(($(date +%s) - t3))s (total $(($(date +%s) - t0))s)"
exit $rc
