#!/usr/bin/env bash
# bench.sh -- zklock beside Apache Curator and kazoo in the shared lock anchors, then zklock's
# own extra scenarios.
#
#   scripts/bench.sh
#
# 1. Installs what the anchors need if missing (Debian packages, via apt-get; needs root).
# 2. Starts the local ZooKeeper with scripts/start-zk.sh if it is not serving yet (for step 5).
# 3. Builds the bench binary: cargo build --release --example bench.
# 4. Runs ../shared/anchors/run.sh (the anchors are checked out next to this repository) with
#    zklock as one more row; run.sh starts and stops its own private server on 2190+ and prints
#    the combined table.
# 5. Runs the extra scenarios `scale` and `many_locks` (see examples/bench.rs) against the local
#    server and prints their RESULT lines.
#
# Environment (all optional):
#   IMPLS          anchors rows, in order              (default "curator kazoo zklock")
#   FSYNC_MODES    anchors server forceSync values     (default "no")
#   ZK_CONNECT     server for the extra scenarios      (default: the one start-zk.sh reports)
#   BENCH_ANCHORS  0 skips step 4                      (default 1)
#   BENCH_EXTRAS   0 skips step 5                      (default 1)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANCHORS_REL=../shared/anchors # relative to the repository: it is checked out next to shared/
ANCHORS=$(cd "$REPO/$ANCHORS_REL" 2>/dev/null && pwd) ||
    { echo "bench.sh: $REPO/$ANCHORS_REL not found" >&2; exit 1; }
JAR_DIR=${JAR_DIR:-/usr/share/java}
BENCH_ANCHORS=${BENCH_ANCHORS:-1}
BENCH_EXTRAS=${BENCH_EXTRAS:-1}

log() { printf 'bench.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---- 1. prerequisites of run.sh (it names these Debian packages) ----
need=()
{ command -v java && command -v javac; } >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
[[ -f $JAR_DIR/zookeeper.jar && -f $JAR_DIR/zookeeper-recipes-lock.jar ]] || need+=(zookeeper)
[[ -f $JAR_DIR/curator-recipes.jar ]] || need+=(libcurator-recipes-java)
/usr/bin/python3 -c 'import kazoo' 2>/dev/null || need+=(python3-kazoo)
[[ -x /usr/bin/time ]] || need+=(time)
if ((${#need[@]})); then
    log "installing ${need[*]}"
    sudo=()
    ((EUID == 0)) || sudo=(sudo)
    "${sudo[@]}" apt-get update -q >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2
fi

# ---- 2. the local server for the extra scenarios ----
if [[ $BENCH_EXTRAS != 0 && -z ${ZK_CONNECT:-} ]]; then
    ZK_CONNECT=$("$REPO/scripts/start-zk.sh" | tail -1)
fi

# ---- 3. build ----
(cd "$REPO" && cargo build --release --example bench >&2)
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/examples/bench"
[[ $BIN == /* ]] || BIN="$REPO/$BIN"
[[ -x $BIN ]] || die "no binary at $BIN"
[[ $BIN != *" "* ]] || die "run.sh splits ANCHOR_CMD_zklock on spaces: $BIN has one"

# ---- 4. the anchors, zklock as one more row ----
anchors_rc=0
if [[ $BENCH_ANCHORS != 0 ]]; then
    ANCHOR_CMD_zklock="$BIN" IMPLS="${IMPLS:-curator kazoo zklock}" FSYNC_MODES="${FSYNC_MODES:-no}" \
        "$ANCHORS/run.sh" || anchors_rc=$?
    ((anchors_rc == 0)) || log "run.sh failed (exit $anchors_rc); running the extra scenarios anyway"
fi

# ---- 5. zklock's own scenarios ----
if [[ $BENCH_EXTRAS != 0 ]]; then
    base="/zklock-bench/run-$(date +%Y%m%d-%H%M%S)-$$" # fresh paths: many_locks' cold pass is cold
    echo
    echo "## zklock extra scenarios  ($ZK_CONNECT, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load avg $(cut -d' ' -f1-3 /proc/loadavg))"
    for scenario in scale many_locks; do
        echo
        echo "### $scenario"
        "$BIN" "$scenario" "$ZK_CONNECT" "$base/$scenario"
    done
fi
exit "$anchors_rc"
