#!/usr/bin/env bash
# bench.sh -- zklock beside Apache Curator and kazoo in the shared lock anchors, then zklock's
# own extra scenarios.
#
#   scripts/bench.sh
#
# 1. Installs what the anchors need if missing (Debian packages, via apt-get; needs root).
# 2. Starts the local ZooKeeper (Apache 3.9.5, or ZK_VERSION) with scripts/start-zk.sh if it is
#    not serving yet (for step 5).
# 3. Builds the bench binary: cargo build --release --example bench.
# 4. Runs ../shared/anchors/run.sh (the anchors are checked out next to this repository) with
#    zklock as one more row; run.sh starts and stops its own private server on 2190+ and prints
#    the combined table.
# 5. Runs the extra scenarios `scale` and `many_locks` (see examples/bench.rs) against the local
#    server and prints their RESULT lines.
# 6. The floor: on the local server, FLOOR_ROUNDS rounds of zklock's `uncontended` and the bare
#    socket client's `floor` (create+getChildren pipelined, then delete) in alternating order,
#    plus `floor_sequential`; prints each round, the medians of the rounds' medians, zklock's
#    ratio to the floor (target: at most 1.1) and, from step 4's table, to Curator (at most
#    0.6). Timings on a shared VM move between runs: only ratios within one run mean much.
#
# Environment (all optional):
#   IMPLS          anchors rows, in order              (default "curator kazoo zklock")
#   FSYNC_MODES    anchors server forceSync values     (default "no")
#   ZK_CONNECT     server for the extra scenarios      (default: the one start-zk.sh reports)
#   BENCH_ANCHORS  0 skips step 4                      (default 1)
#   BENCH_EXTRAS   0 skips step 5                      (default 1)
#   EXTRAS         step 5's scenarios                  (default "scale many_locks")
#   BENCH_FLOOR    0 skips step 6                      (default 1)
#   FLOOR_ROUNDS   rounds of step 6                    (default 5)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ANCHORS_REL=../shared/anchors # relative to the repository: it is checked out next to shared/
ANCHORS=$(cd "$REPO/$ANCHORS_REL" 2>/dev/null && pwd) ||
    { echo "bench.sh: $REPO/$ANCHORS_REL not found" >&2; exit 1; }
JAR_DIR=${JAR_DIR:-/usr/share/java}
BENCH_ANCHORS=${BENCH_ANCHORS:-1}
BENCH_EXTRAS=${BENCH_EXTRAS:-1}
BENCH_FLOOR=${BENCH_FLOOR:-1}
FLOOR_ROUNDS=${FLOOR_ROUNDS:-5}

log() { printf 'bench.sh: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# The median of the numbers given (the lower middle one for an even count), or "-".
median() { (($#)) || { echo -; return; }; printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

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

# ---- 2. the local server for the extra scenarios and the floor ----
if [[ ($BENCH_EXTRAS != 0 || $BENCH_FLOOR != 0) && -z ${ZK_CONNECT:-} ]]; then
    # Apache's 3.9.5 unless ZK_VERSION names another release (start-zk.sh alone would start
    # the embedded server): the anchors and the floor are figures against Apache ZooKeeper.
    ZK_CONNECT=$("$REPO/scripts/start-zk.sh" --version "${ZK_VERSION:-3.9.5}" | tail -1)
fi

# ---- 3. build ----
(cd "$REPO" && cargo build --release --example bench >&2)
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/examples/bench"
[[ $BIN == /* ]] || BIN="$REPO/$BIN"
[[ -x $BIN ]] || die "no binary at $BIN"
[[ $BIN != *" "* ]] || die "run.sh splits ANCHOR_CMD_zklock on spaces: $BIN has one"

# ---- 4. the anchors, zklock as one more row ----
anchors_rc=0
anchors_out=$(mktemp)
trap 'rm -f "$anchors_out"' EXIT
if [[ $BENCH_ANCHORS != 0 ]]; then
    ANCHOR_CMD_zklock="$BIN" IMPLS="${IMPLS:-curator kazoo zklock}" FSYNC_MODES="${FSYNC_MODES:-no}" \
        "$ANCHORS/run.sh" | tee "$anchors_out" || anchors_rc=$?
    ((anchors_rc == 0)) || log "run.sh failed (exit $anchors_rc); running the extra scenarios anyway"
fi
# The `unc med` cell of the first table's row for implementation $1 ("-" if none).
anchors_unc() { awk -F'|' -v impl="$1" '$2 ~ "^ *" impl " *$" { gsub(/ /, "", $3); print $3; exit }' "$anchors_out"; }

# ---- 5. zklock's own scenarios ----
EXTRAS=${EXTRAS-scale many_locks}
if [[ $BENCH_EXTRAS != 0 && -n $EXTRAS ]]; then
    base="/zklock-bench/run-$(date +%Y%m%d-%H%M%S)-$$" # fresh paths: many_locks' cold pass is cold
    echo
    echo "## zklock extra scenarios  ($ZK_CONNECT, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load avg $(cut -d' ' -f1-3 /proc/loadavg))"
    for scenario in $EXTRAS; do
        echo
        echo "### $scenario"
        "$BIN" "$scenario" "$ZK_CONNECT" "$base/$scenario"
    done
fi

# ---- 6. zklock against the floor, alternating on one server ----
if [[ $BENCH_FLOOR != 0 ]]; then
    base="/zklock-bench/floor-$(date +%Y%m%d-%H%M%S)-$$"
    echo
    echo "## zklock against the floor  ($ZK_CONNECT, $(date -u '+%Y-%m-%d %H:%M UTC'), load avg $(cut -d' ' -f1-3 /proc/loadavg))"
    echo
    # RESULT value of key $2 in the output $1.
    value() { sed -n "s/^RESULT $2=//p" <<<"$1"; }
    zk=() fl=() sq=() ratios=() zk99=() fl99=()
    for ((i = 1; i <= FLOOR_ROUNDS; i++)); do
        order=(uncontended floor)
        ((i % 2)) || order=(floor uncontended) # neither always runs first
        for scenario in "${order[@]}" floor_sequential; do
            out=$("$BIN" "$scenario" "$ZK_CONNECT" "$base/r$i-$scenario")
            case $scenario in
                uncontended) zk+=("$(value "$out" unc_median_us)") zk99+=("$(value "$out" unc_p99_us)") ;;
                floor) fl+=("$(value "$out" floor_median_us)") fl99+=("$(value "$out" floor_p99_us)") ;;
                floor_sequential) sq+=("$(value "$out" floor_seq_median_us)") ;;
            esac
        done
        ratios+=("$(ratio "${zk[-1]}" "${fl[-1]}")")
        printf 'round %d (%s first): zklock median %s us (p99 %s), floor %s us (p99 %s), floor_sequential %s us; zklock/floor %s\n' \
            "$i" "${order[0]}" "${zk[-1]}" "${zk99[-1]}" "${fl[-1]}" "${fl99[-1]}" "${sq[-1]}" "${ratios[-1]}"
    done
    zkm=$(median "${zk[@]}") flm=$(median "${fl[@]}")
    echo
    echo "medians of the $FLOOR_ROUNDS rounds: zklock $zkm us (p99 $(median "${zk99[@]}")), floor $flm us (p99 $(median "${fl99[@]}")), floor_sequential $(median "${sq[@]}") us"
    # Both: the ratio of the medians, and the median of each round's ratio (a round's two runs
    # are seconds apart, so the VM's drift between rounds cancels).
    echo "zklock / floor: $(ratio "$zkm" "$flm"); median of the rounds' ratios $(median "${ratios[@]}")  (target: at most 1.10)"
    cur=$(anchors_unc curator) zka=$(anchors_unc zklock)
    if [[ -n $cur && -n $zka ]]; then
        echo "zklock / Curator, the anchors table above: $(ratio "$zka" "$cur")  ($zka / $cur us; target: at most 0.60)"
    fi
fi
exit "$anchors_rc"
