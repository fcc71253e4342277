#!/usr/bin/env bash
# Runs the whole test suite against real ZooKeeper servers on loopback, installing what the
# tests need on a fresh Debian machine first:
#   - ZooKeeper: release ZK_VERSION, by default Apache's 3.9.5, named here because
#     scripts/start-zk.sh alone starts the embedded server (it fetches Apache's
#     jars once into a cache, see scripts/lib/dist.sh; "debian" is Debian's zookeeper package);
#   - a JDK and Apache Curator's jars for the interop tests (tests/interop.rs: the Curator of
#     ZK_VERSION's jars, or ZK_CURATOR; Debian's libcurator-*-java is Curator 5.4.0);
#   - openssl for the certificates of the TLS test server (tests/security_tls_sasl.rs);
#   - Debian's python3-kazoo for the kazoo interop tests (tests/interop_kazoo.rs).
# Runs the tests of the whole workspace: the library and the `zklock-cli` crate (cli/).
# Extra arguments go to `cargo test` (e.g. scripts/test.sh --test exclusion, or -p zklock-cli).
#
# Servers: every server of the run lives in a work dir of its own, ZK_WORKDIR=a fresh
# ${TMPDIR:-/tmp}/zklock-test.XXXXXX: the main server, started here on a free port and passed
# to the tests as ZK_CONNECT, and the ensemble, secure and private servers that the tests start
# through scripts/start-zk.sh on free ports of their own.  Two runs on one machine therefore
# never share a port or a server.  When this script exits, however the suite ended (a failure,
# Ctrl-C), it stops exactly the servers in that dir (scripts/stop-zk.sh --all there), never one
# it did not start, such as the demo's server on 2181.  The dir is removed after a passing run
# and kept, with the servers' logs, after a failing one.
#
# Environment:
#   ZK_VERSION   the release of every server of the run (default 3.9.5; 3.6.3, 3.8.0,
#                debian or embedded), passed to the tests, which start theirs with it;
#                embedded: zklock's own server (scripts/lib/embedded.sh), built here once
#                (dev profile; ZK_EMBEDDED_PROFILE=release for an optimised one)
#   ZK_DIST      Apache's tarball or jar dir instead (see scripts/start-zk.sh)
#   ZK_CURATOR   the interop tests' Curator (5.9.0, 5.4.0 or 2.13.0; default: ZK_VERSION's)
#   ZK_CONNECT   run the tests against this server instead of starting a main server (the
#                tests' own servers are still started, and stopped, as above)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need=()
for pkg in openjdk-17-jdk-headless libcurator-recipes-java libcurator-framework-java \
    libcurator-client-java libzookeeper-java libguava-java libslf4j-java openssl python3-kazoo; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    log "installing ${need[*]}"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [[ -z "${ZK_DIST:-}" ]]; then
    export ZK_VERSION="${ZK_VERSION:-3.9.5}"
fi
if [[ ${ZK_VERSION:-} == embedded && -z "${ZK_EMBEDDED_BIN:-}" ]]; then
    # Built once for the run: every server the tests start is this binary.
    profile="${ZK_EMBEDDED_PROFILE:-dev}"
    log "building zklock-server ($profile profile) for ZK_VERSION=embedded"
    cargo build --quiet --profile "$profile" -p zklock-server --bin zklock-server
    dir=debug
    [[ $profile == dev || $profile == debug ]] || dir="$profile"
    target="${CARGO_TARGET_DIR:-target}"
    [[ $target == /* ]] || target="$(pwd)/$target"
    ZK_EMBEDDED_BIN="$target/$dir/zklock-server"
    export ZK_EMBEDDED_BIN
fi
ZK_WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/zklock-test.XXXXXX")"
export ZK_WORKDIR
# shellcheck source=scripts/zk-lib.sh
source scripts/zk-lib.sh

stop_servers() {
    local rc=$?
    trap - EXIT
    if ((rc == 0)); then
        scripts/stop-zk.sh --all --clean || log "could not stop every server in $ZK_WORKDIR"
        rmdir "$ZK_WORKDIR" 2>/dev/null || true # left empty when no server was started
    else
        scripts/stop-zk.sh --all || log "could not stop every server in $ZK_WORKDIR"
        log "failed (exit $rc); the servers' logs are kept in $ZK_WORKDIR"
    fi
    exit "$rc"
}
trap stop_servers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -z "${ZK_CONNECT:-}" ]]; then
    port="$(free_port)" || die "no free port on 127.0.0.1"
    # Only ZK_PORT selects the server: a ZK_ENSEMBLE... of the caller's would start an ensemble.
    ZK_CONNECT="$(env -u ZK_ENSEMBLE -u ZK_ENSEMBLE_PORTS -u ZK_JVM_OPTS ZK_PORT="$port" \
        scripts/start-zk.sh | tail -1)"
    # start-zk.sh accepts a server that already serves on the port; this run's must be its own.
    running_pid "$ZK_WORKDIR/$port" >/dev/null || die "127.0.0.1:$port is served by a server this run did not start"
    export ZK_CONNECT
    log "main server: $(zk_served_name "$port")"
fi
log "main server $ZK_CONNECT; servers of this run (ZK_VERSION=${ZK_VERSION:-}${ZK_DIST:+, ZK_DIST=$ZK_DIST}) in $ZK_WORKDIR"
cargo test --workspace --all-features "$@"
