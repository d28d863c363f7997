#!/usr/bin/env bash
# kafka-image.sh — make a Kafka broker image available to the container engine; print its name as the
# LAST line of stdout (progress goes to stderr):
#
#   export KAFKA_IMAGE="$(scripts/kafka-image.sh | tail -n1)"
#
# Order:
#   1. KAFKA_IMAGE set: use it if present locally or pullable.
#   2. localhost/actorflow-kafka:$KAFKA_VERSION already built from the current recipe: use it.
#   3. upstream apache/kafka:$KAFKA_VERSION pullable (a machine with a registry): use it.
#   4. Build localhost/actorflow-kafka:$KAFKA_VERSION without any registry: Debian rootfs
#      (debootstrap --variant=minbase) + openjdk-17-jre-headless + Kafka jars from Maven Central +
#      scripts/kafka-image/entrypoint.sh, imported as a single-layer image.
#   KAFKA_IMAGE_BUILD=1 skips 1 and 3 (always use/build the local image).
#   --jars-only: only build (or find) the cached jars and print their directory (no engine needed).
#   KAFKA_VERSION: any org.apache.kafka:kafka_2.13 version on Maven Central; default the newest
#   supported one (scripts/kafka-versions.env). 4.1.x and 4.4.0 use the same classes and flags
#   (kafka.tools.StorageTool format, kafka.Kafka) and the same Java 17 rootfs.
#
# Caches (outside the repo, under ${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}/kafka):
#   jars/<version>/libs     the broker's runtime classpath (~45 MB)
#   rootfs/<suite>-<jre>.tar the Debian root fs with the JRE (~600 MB), shared by all Kafka versions
# The image carries a label with a hash of its recipe; a changed entrypoint or version rebuilds it.
#
# Needs root only when it has to build (apt-get, debootstrap, chroot, mount).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# KAFKA_VERSION_NEWEST / KAFKA_VERSION_OLDEST: the supported versions, one place for every script.
# shellcheck source=kafka-versions.env
. "$HERE/kafka-versions.env"
VERSION="${KAFKA_VERSION:-$KAFKA_VERSION_NEWEST}"
SCALA="${KAFKA_SCALA_VERSION:-2.13}"
SUITE="${KAFKA_ROOTFS_SUITE:-bookworm}"
JRE="${KAFKA_ROOTFS_JRE:-openjdk-17-jre-headless}"
# Fully qualified: podman refuses short names without an unqualified-search registry configured.
UPSTREAM="${KAFKA_UPSTREAM_IMAGE:-docker.io/apache/kafka:$VERSION}"
LOCAL="localhost/actorflow-kafka:$VERSION"
CACHE="${ACTORFLOW_CACHE:-$HOME/.cache/actorflow}"
KDIR="$CACHE/kafka"
LABEL=org.actorflow.kafka.recipe

log() { echo "kafka-image: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s; }

# ---------------------------------------------------------------------------------------------------
# Which CLI talks to the engine. With our podman service (CONTAINERS_CONF set by container-engine.sh)
# use podman itself: same storage as the service, and `podman import` is known to work here.
pick_cli() {
  if [[ -n "${KAFKA_IMAGE_CLI:-}" ]]; then echo "$KAFKA_IMAGE_CLI"; return; fi
  if [[ -n "${CONTAINERS_CONF:-}" ]] && command -v podman >/dev/null 2>&1; then echo podman; return; fi
  if command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1; then echo docker; return; fi
  if command -v podman >/dev/null 2>&1; then echo podman; return; fi
  die "no container engine: run  eval \"\$(scripts/container-engine.sh start)\"  first"
}
# --jars-only: only the broker's classpath (scripts/kafka-cluster.sh runs the jars on the host), no engine.
if [[ ${1:-} != --jars-only ]]; then CLI="$(pick_cli)"; fi

image_present() { "$CLI" image inspect "$1" >/dev/null 2>&1; }
try_pull() {
  log "trying to pull $1"
  # 2 min: a network that drops packets (no registry answers) must not cost 10 before the local build.
  timeout 120 "$CLI" pull "$1" >&2
}

# The recipe hash: anything that changes the built image's content.
recipe_hash() {
  {
    echo "$VERSION $SCALA $SUITE $JRE"
    cat "$HERE/kafka-image/entrypoint.sh" "$HERE/kafka-image/log4j2.properties"
  } | sha256sum | cut -c1-16
}

apt_install() {
  [[ $(id -u) -eq 0 ]] || die "need root to apt-get install $*"
  log "installing $* (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "$@" >"$KDIR/apt.log" 2>&1 ||
    { tail -n 30 "$KDIR/apt.log" >&2; die "apt-get install $* failed"; }
}

# ---------------------------------------------------------------------------------------------------
# Kafka's runtime classpath from Maven Central: kafka_2.13 and its runtime dependency closure (the same
# jars the distribution ships in libs/), plus an slf4j binding, which the pom does not carry.
build_jars() {
  local out="$KDIR/jars/$VERSION"
  [[ -f "$out/.complete" ]] && { log "jars for $VERSION: cached ($out)"; return; }
  command -v mvn >/dev/null 2>&1 || apt_install maven
  local t0; t0=$(now)
  local tmp; tmp="$(mktemp -d "$KDIR/jars/tmp.XXXXXX")"
  cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.actorflow</groupId>
  <artifactId>kafka-broker-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_${SCALA}</artifactId>
      <version>${VERSION}</version>
    </dependency>
  </dependencies>
</project>
EOF
  log "resolving org.apache.kafka:kafka_${SCALA}:${VERSION} from Maven Central"
  (cd "$tmp" && mvn -B -q dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=libs >"$KDIR/jars/mvn.log" 2>&1) ||
    { tail -n 30 "$KDIR/jars/mvn.log" >&2; die "mvn could not resolve kafka_${SCALA}:${VERSION}"; }
  [[ -f "$tmp/libs/kafka_${SCALA}-${VERSION}.jar" ]] || die "kafka_${SCALA}-${VERSION}.jar missing after mvn"

  # Kafka logs through slf4j; without a binding it would print nothing at all (not even errors).
  if ! compgen -G "$tmp/libs/log4j-slf4j*-impl-*.jar" >/dev/null &&
    ! compgen -G "$tmp/libs/slf4j-reload4j-*.jar" >/dev/null &&
    ! compgen -G "$tmp/libs/logback-classic-*.jar" >/dev/null; then
    local log4j slf4j binding jars
    jars="$(cd "$tmp/libs" && printf '%s\n' *.jar)"
    log4j="$(sed -n 's/^log4j-api-\(.*\)\.jar$/\1/p' <<<"$jars" | head -n1)"
    slf4j="$(sed -n 's/^slf4j-api-\(.*\)\.jar$/\1/p' <<<"$jars" | head -n1)"
    [[ -n "$log4j" ]] || die "no log4j-api in the classpath: cannot pick an slf4j binding"
    if [[ "$slf4j" == 1.* ]]; then binding="log4j-slf4j-impl"; else binding="log4j-slf4j2-impl"; fi
    log "adding slf4j binding org.apache.logging.log4j:${binding}:${log4j} (slf4j-api ${slf4j})"
    (cd "$tmp" && mvn -B -q dependency:copy -Dartifact="org.apache.logging.log4j:${binding}:${log4j}" \
      -DoutputDirectory=libs >"$KDIR/jars/mvn.log" 2>&1) ||
      { tail -n 30 "$KDIR/jars/mvn.log" >&2; die "mvn could not fetch ${binding}:${log4j}"; }
  fi
  rm -rf "$out"
  mkdir -p "$out"
  mv "$tmp/libs" "$out/libs"
  rm -rf "$tmp"
  touch "$out/.complete"
  log "jars for $VERSION: $(find "$out/libs" -name '*.jar' | wc -l) jars, $(du -sh "$out/libs" | cut -f1), $(($(now) - t0))s"
}

# ---------------------------------------------------------------------------------------------------
# The Debian mirror this machine already uses (never a host name written into the project):
# KAFKA_ROOTFS_MIRROR, else the first non-security URIs: line of deb822 sources, else sources.list.
detect_mirror() {
  if [[ -n "${KAFKA_ROOTFS_MIRROR:-}" ]]; then echo "$KAFKA_ROOTFS_MIRROR"; return; fi
  local m=""
  if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
    m="$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources)"
  fi
  if [[ -z "$m" && -f /etc/apt/sources.list ]]; then
    # deb [options] URI suite ...: the URI is the first field that looks like one.
    m="$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|ftp|file):/) {if ($i !~ /security/) {print $i; exit}}}' \
      /etc/apt/sources.list)"
  fi
  echo "$m" # empty: debootstrap's own default
}

build_rootfs() {
  local tarball="$KDIR/rootfs/${SUITE}-${JRE}.tar"
  [[ -f "$tarball" ]] && { log "rootfs: cached ($tarball)"; return; }
  [[ $(id -u) -eq 0 ]] || die "building the root fs needs root (debootstrap, chroot, mount)"
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  local t0; t0=$(now)
  local mirror; mirror="$(detect_mirror)"
  local dir; dir="$(mktemp -d "$KDIR/rootfs/build.XXXXXX")"
  # Unmount /proc even when a step fails, or the next rm -rf would walk into the host's /proc.
  trap 'umount "'"$dir"'/proc" 2>/dev/null || true; rm -rf --one-file-system "'"$dir"'"' EXIT
  log "debootstrap --variant=minbase $SUITE (mirror: ${mirror:-debootstrap default})"
  debootstrap --variant=minbase "$SUITE" "$dir" ${mirror:+"$mirror"} >"$KDIR/rootfs/debootstrap.log" 2>&1 ||
    { tail -n 30 "$KDIR/rootfs/debootstrap.log" >&2; die "debootstrap failed"; }
  log "debootstrap done in $(($(now) - t0))s; installing $JRE inside"
  # The JRE's post-install step (update-alternatives, CA store) needs /proc.
  mount -t proc proc "$dir/proc"
  chroot "$dir" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends $JRE && apt-get clean" \
    >"$KDIR/rootfs/chroot-apt.log" 2>&1 ||
    { tail -n 30 "$KDIR/rootfs/chroot-apt.log" >&2; die "installing $JRE in the root fs failed"; }
  # (java finds libjli.so through $ORIGIN, which ld.so resolves with /proc/self/exe: check before umount.)
  chroot "$dir" java -version >&2 2>&1 || die "java does not run in the root fs"
  umount "$dir/proc"
  # Not needed in a test image.
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/locale/*
  tar --numeric-owner -C "$dir" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf --one-file-system "$dir"
  trap - EXIT
  log "rootfs: $(du -sh "$tarball" | cut -f1) in $(($(now) - t0))s"
}

# ---------------------------------------------------------------------------------------------------
# rootfs tarball + /opt/kafka appended, then `import`: no registry, no Dockerfile build, no RUN step.
build_image() {
  local hash="$1" t0; t0=$(now)
  local tmp; tmp="$(mktemp -d "$KDIR/image.XXXXXX")"
  trap 'rm -rf "'"$tmp"'"' EXIT
  mkdir -p "$tmp/stage/opt/kafka/bin" "$tmp/stage/opt/kafka/config"
  cp -r "$KDIR/jars/$VERSION/libs" "$tmp/stage/opt/kafka/libs"
  install -m 0755 "$HERE/kafka-image/entrypoint.sh" "$tmp/stage/opt/kafka/bin/entrypoint.sh"
  install -m 0644 "$HERE/kafka-image/log4j2.properties" "$tmp/stage/opt/kafka/config/log4j2.properties"
  cp "$KDIR/rootfs/${SUITE}-${JRE}.tar" "$tmp/image.tar"
  tar --owner=0 --group=0 --numeric-owner -C "$tmp/stage" -rf "$tmp/image.tar" ./opt/kafka
  # The image this import replaces (an older recipe) would stay behind untagged: remember it.
  local old; old="$("$CLI" image inspect --format '{{.Id}}' "$LOCAL" 2>/dev/null || true)"
  log "importing $LOCAL"
  "$CLI" import \
    --change 'ENTRYPOINT ["/opt/kafka/bin/entrypoint.sh"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'WORKDIR /opt/kafka' \
    --change 'EXPOSE 9092' \
    --change "LABEL $LABEL=$hash" \
    "$tmp/image.tar" "$LOCAL" >/dev/null
  # Fails harmlessly while a container still uses the old image.
  if [[ -n "$old" ]]; then "$CLI" rmi "$old" >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
  trap - EXIT
  log "image $LOCAL imported in $(($(now) - t0))s"
}

# ---------------------------------------------------------------------------------------------------
main() {
  if [[ ${1:-} == --jars-only ]]; then
    mkdir -p "$KDIR/jars"
    exec 9>"$KDIR/.lock"
    flock 9
    build_jars
    echo "$KDIR/jars/$VERSION/libs"
    return
  fi
  if [[ -n "${KAFKA_IMAGE:-}" && "${KAFKA_IMAGE_BUILD:-0}" != 1 ]]; then
    if image_present "$KAFKA_IMAGE" || try_pull "$KAFKA_IMAGE"; then
      log "using KAFKA_IMAGE=$KAFKA_IMAGE"
      echo "$KAFKA_IMAGE"
      return
    fi
    log "WARNING: KAFKA_IMAGE=$KAFKA_IMAGE is neither present nor pullable: falling back to $LOCAL"
  fi

  mkdir -p "$KDIR/jars" "$KDIR/rootfs"
  # One build at a time per cache (two test runs starting together share the result).
  exec 9>"$KDIR/.lock"
  flock 9

  local hash; hash="$(recipe_hash)"
  if image_present "$LOCAL" &&
    [[ "$("$CLI" image inspect --format "{{index .Config.Labels \"$LABEL\"}}" "$LOCAL" 2>/dev/null)" == "$hash" ]]; then
    log "using cached $LOCAL (recipe $hash)"
    echo "$LOCAL"
    return
  fi

  if [[ -z "${KAFKA_IMAGE:-}" && "${KAFKA_IMAGE_BUILD:-0}" != 1 ]]; then
    if image_present "$UPSTREAM" || try_pull "$UPSTREAM"; then
      log "using upstream $UPSTREAM"
      echo "$UPSTREAM"
      return
    fi
    log "no registry reachable for $UPSTREAM: building $LOCAL locally"
  fi

  local t0; t0=$(now)
  build_jars
  build_rootfs
  build_image "$hash"
  log "built $LOCAL in $(($(now) - t0))s"
  echo "$LOCAL"
}

main "$@"
