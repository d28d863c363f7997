#!/usr/bin/env bash
# container-engine.sh — make a Docker-API container engine available for the integration tests.
#
#   eval "$(scripts/container-engine.sh start)"   # prints export lines on stdout, progress on stderr
#   scripts/container-engine.sh env                # re-print the export lines of a running service
#   scripts/container-engine.sh stop               # stop the podman service that `start` launched
#   scripts/container-engine.sh status
#
# If a real Docker engine already answers (`docker info`), it is used as is. Otherwise (the project's
# machines: only a docker *client*, no engine, no registry) podman + runc are installed from Debian's
# packages and `podman system service` serves the Docker API on a unix socket under the cache dir.
# Idempotent: a second `start` finds the running service and only re-prints the exports.
set -euo pipefail

CACHE="${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}"
DIR="$CACHE/engine"
SOCK="$DIR/podman.sock"
PIDFILE="$DIR/podman.pid"
CONF="$DIR/containers.conf"
LOG="$DIR/podman-service.log"

log() { echo "container-engine: $*" >&2; }

exports() {
  echo "export DOCKER_HOST=unix://$SOCK"
  echo "export CONTAINERS_CONF=$CONF"
}

# ping answers "OK" on the Docker API's /_ping once the service accepts requests.
sock_answers() {
  [[ -S "$SOCK" ]] && [[ "$(curl -s --max-time 5 --unix-socket "$SOCK" http://d/_ping 2>/dev/null)" == "OK" ]]
}

our_service_running() {
  [[ -f "$PIDFILE" ]] || return 1
  local pid; pid="$(cat "$PIDFILE")"
  # Check the command line too, so a recycled pid is never mistaken for our service.
  [[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'system service' && sock_answers
}

# A real engine (Docker Engine, Docker Desktop, a podman socket the user set up) answering with the
# caller's own DOCKER_HOST / default socket. `timeout` guards against a DOCKER_HOST that hangs.
real_engine_answers() {
  if command -v docker >/dev/null 2>&1; then
    timeout 20 docker info >/dev/null 2>&1 && return 0
  fi
  if [[ -z "${DOCKER_HOST:-}" && -S /var/run/docker.sock ]]; then
    [[ "$(curl -s --max-time 5 --unix-socket /var/run/docker.sock http://d/_ping 2>/dev/null)" == "OK" ]] && return 0
  fi
  return 1
}

apt_install() {
  # Fresh machines may have empty package lists: update once, right before installing.
  log "installing $* (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  mkdir -p "$DIR"
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "$@" >"$DIR/apt.log" 2>&1 ||
    { tail -n 30 "$DIR/apt.log" >&2; log "apt-get install $* failed"; exit 1; }
}

ensure_packages() {
  local need=()
  command -v podman >/dev/null 2>&1 || need+=(podman)
  # runc, not crun: crun fails on this kernel's cgroup layout (shared/notes/containers.md).
  command -v runc >/dev/null 2>&1 || need+=(runc)
  # Network stack for port publishing (-p host:container) on rootful podman 4.x.
  command -v netavark >/dev/null 2>&1 || [[ -x /usr/lib/podman/netavark ]] || need+=(netavark aardvark-dns)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  if ((${#need[@]})); then
    [[ $(id -u) -eq 0 ]] || { log "need root to install ${need[*]}"; exit 1; }
    apt_install "${need[@]}"
  fi
}

write_conf() {
  mkdir -p "$DIR"
  # runc + cgroupfs + no ulimits: the only combination that starts containers in this sandbox
  # (default_ulimits: "setrlimit RLIMIT_NOFILE: Operation not permitted" otherwise).
  # events_logger=file: no journald here.
  cat >"$CONF.tmp" <<'EOF'
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
  mv "$CONF.tmp" "$CONF"
}

start() {
  if our_service_running; then
    log "podman service already running (pid $(cat "$PIDFILE"))"
    exports
    return 0
  fi
  if real_engine_answers; then
    log "using the Docker engine that already answers (DOCKER_HOST=${DOCKER_HOST:-default socket})"
    # Keep the caller's settings; print only comments plus DOCKER_HOST if it was set.
    echo "# container-engine: existing Docker engine in use"
    [[ -n "${DOCKER_HOST:-}" ]] && echo "export DOCKER_HOST=$DOCKER_HOST"
    return 0
  fi
  ensure_packages
  write_conf
  rm -f "$SOCK"
  log "starting podman system service on unix://$SOCK (log: $LOG)"
  # setsid + all fds redirected: the service outlives this script and never holds the stdout pipe
  # of `eval "$(… start)"` open (which would make the caller hang).
  CONTAINERS_CONF="$CONF" setsid podman system service --time=0 "unix://$SOCK" \
    </dev/null >>"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if sock_answers; then
      log "podman service ready (pid $(cat "$PIDFILE"))"
      exports
      return 0
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      log "podman service exited; last log lines:"; tail -n 20 "$LOG" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  log "podman service did not answer on $SOCK within 60s"; tail -n 20 "$LOG" >&2 || true
  exit 1
}

stop() {
  if [[ ! -f "$PIDFILE" ]]; then
    log "no podman service started by this script (no $PIDFILE)"
    return 0
  fi
  local pid; pid="$(cat "$PIDFILE")"
  if [[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'system service'; then
    log "stopping podman service (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$PIDFILE" "$SOCK"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  env) if our_service_running; then exports; else log "not running"; exit 1; fi ;;
  status) if our_service_running; then log "running (pid $(cat "$PIDFILE"))"; else log "not running"; exit 1; fi ;;
  *) echo "usage: $0 [start|stop|env|status]" >&2; exit 2 ;;
esac
