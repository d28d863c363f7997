#!/usr/bin/env bash
# chaos.sh — fault injection on the demo cluster, then the verifier (issue 5).
#
#   scripts/chaos.sh --short                  # CI: 12 faults of every kind, < 10 min, exit 0 iff it passes
#   scripts/chaos.sh                          # long run: 50 faults
#   scripts/chaos.sh --faults 100 --seed 7
#   scripts/chaos.sh --mode plain --kinds zombie,zombie_handover --faults 10   # the verifier failing (#732)
#   KAFKA_VERSION=4.1.2 scripts/chaos.sh --short   # on the oldest supported broker (default: the newest,
#                                                  # scripts/kafka-versions.env)
#   scripts/chaos.sh --brokers 3 --kinds node_kill,kill --faults 4   # on three brokers: SIGKILL of a node
#   scripts/chaos.sh --kinds silent_kill,kill --faults 2   # the verifier failing: a worker dying silently
#
# Options (the rest go to deploy/chaos.py, see its --help):
#   --mode transactional|plain   persistence mode of the workers (default transactional)
#   --brokers 1|3                the cluster's shape (scripts/cluster.sh up --brokers): 3 is a 3-node KRaft
#                                cluster (RF 3, min.insync.replicas 2) and enables the node_kill and node_pause
#                                faults; with --reuse and no --brokers, the running cluster's (saved) count.
#                                Default 1.
#   --short                      12 faults covering every kind, 2 s gaps
#   --faults N                   number of faults (default 50; 12 with --short)
#   --kinds k1,k2                draw only these: kill, zombie, zombie_handover, broker_restart,
#                                rolling_restart, scale (scale_out and scale_in in turn), poison (records
#                                the fold cannot take, into the input: the dead-letter policy's test),
#                                node_kill (3 brokers only: docker kill -s KILL of the broker leading the
#                                most input partitions and worker transaction coordinators, ~15 s down,
#                                then started again and waited for), node_pause (3 brokers, not among --short's 12:
#                                the same node frozen for --node-pause seconds, 20, then resumed)
#   --pause S                    zombie pause in seconds (default 2 x the 6 s session timeout)
#   --seed N                     the random schedule's seed (printed at the start)
#   --reuse                      keep a cluster already up in the same mode (default: a fresh one)
#   --keep                       leave the cluster up afterwards (default: scripts/cluster.sh down)
#
# Steps: scripts/cluster.sh up --fresh --mode M (engine, images, broker, 3 workers, producer), then
# deploy/chaos.py (faults while the producer runs, /status polling, producer stop, verifier, report),
# then the containers' logs are saved and the cluster is removed. Output: the report on stdout, and
# $ACTORFLOW_CACHE/chaos/<time>-<mode>/ (report.json, status.jsonl, verify.out, logs/).
# Pass: the verifier's PASS (0 mismatches; outputs read_committed exactly once and in order in the
# transactional mode, none missing in the plain mode, each with the balance the verifier's fold gives its
# account at its sequence number), every acknowledged event verified, no unexpected
# worker failure, every fault as planned (deploy/chaos.py's docstring). With poison faults also 0 worker
# exits during them and each poison record in the dead-letter topic exactly once; with node_kill faults
# also 0 worker exits during them.
# Exit: 0 when the run passes, 1 when it fails, 2 when the run could not complete.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}"
log() { echo "chaos.sh: $*" >&2; }

mode="${ACTORFLOW_MODE:-transactional}" reuse=0 keep=0 pass=() brokers=""
while (($#)); do
  case "$1" in
    --mode) mode="$2"; shift 2 ;;
    --mode=*) mode="${1#--mode=}"; shift ;;
    --brokers) brokers="$2"; shift 2 ;;
    --brokers=*) brokers="${1#--brokers=}"; shift ;;
    --reuse) reuse=1; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) pass+=("$1"); shift ;;
  esac
done
export ACTORFLOW_MODE="$mode"
if [[ -z "$brokers" ]]; then
  # --reuse keeps the running cluster's shape (the saved state of scripts/cluster.sh); otherwise 1.
  brokers=1
  if ((reuse)); then
    brokers="$("$ROOT/scripts/cluster.sh" env 2>/dev/null | sed -n 's/^export ACTORFLOW_BROKER_COUNT=//p')"
    brokers="${brokers:-1}"
  fi
fi
[[ "$brokers" == 1 || "$brokers" == 3 ]] || { log "--brokers $brokers: want 1 or 3"; exit 2; }
# shellcheck source=kafka-versions.env
. "$ROOT/scripts/kafka-versions.env"
export KAFKA_VERSION="${KAFKA_VERSION:-$KAFKA_VERSION_NEWEST}"
log "Kafka $KAFKA_VERSION, mode $mode, $brokers broker(s)"
command -v python3 >/dev/null 2>&1 || { log "python3 is needed"; exit 2; }

t0=$(date +%s)
out="$CACHE/chaos/$(date +%Y%m%d-%H%M%S)-$mode$( ((brokers == 3)) && echo -brokers3)"
mkdir -p "$out"
up_args=(--mode "$mode" --brokers "$brokers")
if ((brokers == 3)); then
  # node_kill's lookups (which node leads what): built before the cluster starts, not while it runs.
  export ACTORFLOW_KCLUSTER="$CACHE/cluster/bin/kcluster"
  mkdir -p "$(dirname "$ACTORFLOW_KCLUSTER")"
  (cd "$ROOT" && CGO_ENABLED=0 go build -o "$ACTORFLOW_KCLUSTER" ./internal/kcluster/cmd/kcluster) ||
    { log "go build ./internal/kcluster/cmd/kcluster failed: node_kill will pick its node round-robin"; unset ACTORFLOW_KCLUSTER; }
fi
((reuse)) || up_args+=(--fresh)
if ! "$ROOT/scripts/cluster.sh" up "${up_args[@]}"; then
  log "the cluster did not come up"
  ((keep)) || "$ROOT/scripts/cluster.sh" down
  exit 2
fi
t1=$(date +%s)
log "cluster up in $((t1 - t0))s"
eval "$("$ROOT/scripts/cluster.sh" env)"

# deploy/chaos.py restores a paused worker itself. On Ctrl-C the terminal's SIGINT reaches it too; the
# trap (a handler, not an ignore, which the child would inherit) keeps this script going to save the logs
# and remove the cluster below.
interrupted=0
trap 'interrupted=1' INT
python3 "$ROOT/deploy/chaos.py" --mode "$mode" --brokers "$brokers" --outdir "$out" "${pass[@]}"
rc=$?
trap - INT
((interrupted)) && { log "interrupted"; ((rc == 0)) && rc=130; }

# deploy/chaos.py saves the logs at its end; when it broke before, save them here.
if [[ ! -d "$out/logs" ]]; then
  mkdir -p "$out/logs"
  docker() { if type -P docker >/dev/null; then command docker "$@"; else podman "$@"; fi; }  # the client, or podman's
  for id in $(docker ps -aq --filter "label=com.docker.compose.project=${ACTORFLOW_PROJECT:-actorflow}"); do
    name="$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$id" 2>/dev/null || echo "$id")"
    docker logs "$id" >"$out/logs/$name.log" 2>&1 || true
  done
fi
((keep)) || "$ROOT/scripts/cluster.sh" down
log "exit $rc after $(($(date +%s) - t0))s (cluster up $((t1 - t0))s); output in $out"
exit "$rc"
