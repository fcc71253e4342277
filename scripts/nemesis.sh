#!/usr/bin/env bash
# nemesis.sh -- Jepsen-style fault test of zklock in a private network namespace.
#
# Usage:
#   scripts/nemesis.sh [--duration SECONDS] [--seed N] [--clients N] [--session-timeout-ms MS]
#                      [--bound SECONDS] [--faults KIND,...] [--keep] [--sabotage MODE]
#                      [--stack PERCENT] [--out DIR] [--screenshot FILE.png]
#
#   --duration   how long faults are injected (default 60); setup, the last fault's recovery,
#                the idle check and the checker come on top (7-33 s measured on 60 s runs)
#   --seed       the schedule's seed (default: random); printed first, so a run can be repeated
#   --clients    client processes (default 5, at most 9)
#   --session-timeout-ms   the clients' ZooKeeper session timeout (default 3000)
#   --bound      progress bound: every client must acquire within this many seconds after each
#                heal (default 30)
#   --faults     only these fault kinds (default: all): isolate-leader, split, cut-client,
#                loss, latency, pause-client, pause-server, kill-server
#   --version    the servers' ZooKeeper release, as for start-zk.sh (default: ZK_VERSION, else
#                3.9.5; 3.6.3, 3.8.0 = debian; or ZK_DIST)
#   --keep       keep the work dir (logs, server data) even when the run passes
#   --stack      percent of faults injected right after the previous heal, before the ensemble
#                is whole again (default 0: every fault waits until all three servers are
#                leader or follower); the schedule says which faults stack
#   --out        where the run's history (history.jsonl), its page (nemesis.html) and the
#                checker's report (check.txt) are kept, pass or fail (default
#                <target dir>/nemesis/seed-<seed>)
#   --screenshot render the page in headless Chromium (Debian's chromium, installed when
#                missing), save a screenshot there (shrunk by pngquant when installed), and
#                fail unless the DOM holds one lane per client and lock
#   --scenario   instead of the random schedule, one targeted scenario, repeated (see
#                examples/nemesis/orchestrate/scenario.rs): follower-lease
#   --trials     how many times the scenario is repeated (default 5)
#   --sync-limit the servers' syncLimit in ticks of 200 ms (default 10: 2 s); how long a
#                follower cut off from the leader goes on serving its clients
#   --sabotage   blind and/or unfenced (comma-separated): break the clients on purpose, to see
#                the checker catch it (blind: believe without asking is_held(); unfenced: write
#                with the plain Client::set_data). Such a run is expected to FAIL.
#
# What it does (as root; CI runs as root):
#   1. installs what is missing from Debian: nftables, iproute2, iptables (for iptables-legacy's
#      NFQUEUE target), util-linux (setpriv), a JRE and (--version debian) zookeeper; other
#      releases' jars come from scripts/lib/dist.sh's cache;
#   2. builds examples/nemesis (cargo build --example nemesis);
#   3. creates a network namespace zk-nemesis-<pid> (ip netns) with its own loopback, where
#      server i of a 3-server ensemble listens on 127.0.0.1<i> (client port 2181, quorum 2888,
#      election 3888) and client j's connections carry the source address 127.0.0.2<j>
#      (nftables snat by the process's uid); nothing is routed out of the namespace and the
#      machine's own loopback and network are never touched;
#   4. runs `nemesis run` inside it: starts the servers and the clients, injects faults from
#      the seeded schedule (partitions, one-way loss, latency, SIGSTOP, SIGKILL), heals
#      between them, then stops the clients and runs the checker (`nemesis check`);
#   5. kills every process left in the namespace, deletes the namespace and the work dir
#      (/tmp/zk-nemesis-XXXXXX; kept, minus the servers' data, when the run fails, or with
#      --keep), keeps the history and its page (--out), and prints the checker's summary as
#      its last line, e.g. (seed 21):
#        nemesis: 138 holds, 5 faults; unfenced: 8 of 151 increments lost; fenced: 0 lost,
#        5 stale writes refused (5 by the check, 0 by expiry); 0 overlaps, 0 stale writes
#        accepted, 0 token, 0 progress, 0 timeout, 0 leftover violations; 9.5 s max
#        unavailability; no server data loss
#   The workload: five client processes lock a mutex, a read/write lock, a 2-permit and a
#   1-permit semaphore; under the exclusive locks they increment a fenced register and, beside
#   it, an unfenced control register (plain set_data). Now and then a holder freezes itself
#   (SIGSTOP) for 0.9-2.5 session timeouts between its read and its write; a careless one then
#   writes through its client's new session, so that only the server's check refuses it.
#   Exits non-zero on any client violation (overlap, stale write accepted, lost update, token
#   order, stall per lock or recipe, no progress after a heal, a timeout overrun or one on a
#   free lock, a warm-up that never completes, leftovers, a client failure, and a run of 50 s
#   or more in which the fence never refused anything), and when namespaces (or the packet
#   filter) are refused. ZooKeeper's own data loss (a register that went back across an epoch
#   change with a "Truncating log" in a server log) is named "SERVER DATA LOSS" with its
#   evidence and counted on the summary line, but does not fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=60
seed=""
clients=5
session_ms=3000
bound=30
keep=0
faults=all
sabotage=none
scenario=none
sync_limit=10
trials=5
stack=0
out=""
screenshot=""

say() { printf 'nemesis.sh: %s\n' "$*" >&2; }
die() { printf 'nemesis.sh: ERROR: %s\n' "$*" >&2; exit 2; }
log() { say "$@"; }
# shellcheck source=scripts/zk-lib.sh
source scripts/zk-lib.sh # usage, is_uint
# shellcheck source=scripts/lib/zoo-cfg.sh
source scripts/lib/zoo-cfg.sh # zoo_cfg, write_log4j
# shellcheck source=scripts/lib/dist.sh
source scripts/lib/dist.sh # zk_jar_dir, zk_classpath, zk_log_opts: the release's jars
# shellcheck source=scripts/lib/nemesis-page.sh
source scripts/lib/nemesis-page.sh # check_page

while (($#)); do
    case "$1" in
        --duration) duration="${2:?--duration needs a value}"; shift ;;
        --seed) seed="${2:?--seed needs a value}"; shift ;;
        --clients) clients="${2:?--clients needs a value}"; shift ;;
        --session-timeout-ms) session_ms="${2:?--session-timeout-ms needs a value}"; shift ;;
        --bound) bound="${2:?--bound needs a value}"; shift ;;
        --faults) faults="${2:?--faults needs a value}"; shift ;;
        --sabotage) sabotage="${2:?--sabotage needs a value}"; shift ;;
        --scenario) scenario="${2:?--scenario needs a value}"; shift ;;
        --sync-limit) sync_limit="${2:?--sync-limit needs a value}"; shift ;;
        --trials) trials="${2:?--trials needs a value}"; shift ;;
        --stack) stack="${2:?--stack needs a value}"; shift ;;
        --out) out="${2:?--out needs a value}"; shift ;;
        --screenshot) screenshot="${2:?--screenshot needs a value}"; shift ;;
        --version) ZK_VERSION="${2:?--version needs a value}"; shift ;;
        --keep) keep=1 ;;
        -h | --help) usage; exit 0 ;;
        *) usage; die "unknown argument: $1" ;;
    esac
    shift
done
for v in duration clients session_ms bound sync_limit trials stack; do
    is_uint "${!v}" || die "--${v//_/-} must be a non-negative integer, got '${!v}'"
done
((clients >= 1 && clients <= 9)) || die "--clients must be 1..9"
if [[ -z "$seed" ]]; then
    seed="$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
fi
is_uint "$seed" || die "--seed must be a non-negative integer, got '$seed'"

# ------------------------------------------------------------------ preconditions
if ((EUID != 0)); then
    die "must run as root: the test creates a private network namespace (ip netns) and packet filter rules inside it; refusing to run without them rather than skipping"
fi

need=()
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables-legacy >/dev/null 2>&1 || need+=(iptables)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
zk_check_version
[[ $ZK_VERSION != embedded || -n "${ZK_DIST:-}" ]] ||
    die "the nemesis runs a three-server ensemble; ZK_VERSION=embedded serves one node: use an Apache release"
if [[ $ZK_VERSION == debian && -z "${ZK_DIST:-}" ]]; then
    [[ -f "$ZK_JAR" ]] || need+=(zookeeper)
fi
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
if [[ -n "$screenshot" ]]; then command -v chromium >/dev/null 2>&1 || need+=(chromium); fi
if ((${#need[@]})); then
    say "installing ${need[*]} (apt-get)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

say "seed $seed (repeat with: scripts/nemesis.sh --duration $duration --seed $seed --clients $clients --session-timeout-ms $session_ms --faults $faults --stack $stack --version $ZK_VERSION)"
echo "nemesis: seed $seed, duration ${duration} s, $clients clients, session timeout ${session_ms} ms"

cargo build --quiet --example nemesis
target_dir="$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
bin="${target_dir:-target}/debug/examples/nemesis"
[[ -x "$bin" ]] || die "built binary not found at $bin"
[[ -n "$out" ]] || out="${target_dir:-target}/nemesis/seed-$seed"

# ------------------------------------------------------------------ namespace
work="$(mktemp -d /tmp/zk-nemesis-XXXXXX)"
chmod 755 "$work" # the servers and clients run under uids of their own
ns="zk-nemesis-$$"
ns_made=0

cleanup() { # [exit status of the run; default: the status the script exits with]
    local rc=$? pids p
    (($#)) && rc=$1
    trap - EXIT INT TERM
    if ((ns_made)); then
        # Only processes inside our own namespace: everything in it was started by this run.
        pids="$(ip netns pids "$ns" 2>/dev/null || true)"
        for p in $pids; do kill -CONT "$p" 2>/dev/null || true; done
        for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
        for _ in $(seq 50); do
            [[ -z "$(ip netns pids "$ns" 2>/dev/null || true)" ]] && break
            sleep 0.1
        done
        ip netns del "$ns" 2>/dev/null || say "WARNING: could not delete namespace $ns"
    fi
    if ((keep)); then
        say "work dir kept: $work"
    elif ((rc != 0)) && [[ -d "$work" ]]; then
        rm -rf "$work"/s*/data "$work"/s*/datalog "$work/bin"
        say "run failed: logs kept in $work (client logs c*/client.log, schedule nemesis.log, servers s*/server.log)"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns" 2>"$work/netns.err" ||
    die "network namespaces are refused here (ip netns add: $(cat "$work/netns.err")); this test needs them and does not skip"
ns_made=1
nsx() { ip netns exec "$ns" "$@"; }
[[ "$(readlink /proc/self/ns/net)" != "$(nsx readlink /proc/self/ns/net)" ]] ||
    die "ip netns exec did not enter a new network namespace"
nsx ip link set lo up
for i in 1 2 3; do nsx ip addr add "127.0.0.1$i/32" dev lo; done
for ((j = 1; j <= clients; j++)); do nsx ip addr add "127.0.0.2$j/32" dev lo; done

# Identities: each server and client runs under a uid of its own, and every connection it
# opens leaves with its own address (snat), so conntrack names both ends of every link and
# the fault rules (chain "faults", filled and flushed by `nemesis run`) can cut any pair.
{
    echo "table ip nemesis {"
    echo "  chain identities {"
    echo "    type nat hook postrouting priority srcnat; policy accept;"
    for i in 1 2 3; do echo "    meta skuid $((61010 + i)) snat ip to 127.0.0.1$i"; done
    for ((j = 1; j <= clients; j++)); do echo "    meta skuid $((61020 + j)) snat ip to 127.0.0.2$j"; done
    echo "  }"
    echo "  chain faults {"
    echo "    type filter hook postrouting priority 200; policy accept;"
    echo "  }"
    echo "}"
} >"$work/nemesis.nft"
nsx nft -f "$work/nemesis.nft" 2>"$work/nft.err" ||
    die "nftables refused the namespace's rules: $(cat "$work/nft.err")"
nsx iptables-legacy -t mangle -L POSTROUTING -n >/dev/null 2>"$work/ipt.err" ||
    die "iptables-legacy (needed for the NFQUEUE latency fault) does not work here: $(cat "$work/ipt.err")"

# ------------------------------------------------------------------ servers
java="$(command -v java)"
# The servers run under uids of their own, which may not read the jar cache (in root's home):
# they get a copy.
jars="$(zk_jar_dir)"
release="$(zk_release_of "$jars")"
if [[ $jars != "$ZK_JAVA_DIR" ]]; then
    mkdir -p "$work/jars"
    cp "$jars"/*.jar "$work/jars/"
    chmod -R a+rX "$work/jars"
    jars="$work/jars"
fi
cp="$(zk_classpath "$jars" 0)"
say "ZooKeeper $release ($jars)"
for i in 1 2 3; do
    d="$work/s$i"
    mkdir -p "$d/data" "$d/datalog"
    echo "$i" >"$d/data/myid"
    {
        echo "# nemesis server $i (scripts/nemesis.sh), inside network namespace $ns"
        zoo_cfg "$d" 2181 syncLimit="$sync_limit" clientPortAddress="127.0.0.1$i" \
            standaloneEnabled=false server.1=127.0.0.11:2888:3888 server.2=127.0.0.12:2888:3888 \
            server.3=127.0.0.13:2888:3888
    } >"$d/zoo.cfg"
    write_log4j "$d" INFO
    # `nemesis run` starts (and restarts) the server with this; exec keeps one pid.
    cat >"$d/run.sh" <<EOF
cd "$d"
exec setpriv --reuid $((61010 + i)) --regid $((61010 + i)) --clear-groups -- env HOME="$d" \\
    "$java" -Xmx160m -XX:+UseSerialGC -XX:-UsePerfData -XX:+ExitOnOutOfMemoryError \\
    -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true -Duser.timezone=UTC \\
    -Dzookeeper.admin.enableServer=false -Dzookeeper.jmx.log4j.disable=true \\
    $(zk_log_opts "$d" | tr '\n' ' ') \\
    -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg"
EOF
    chown -R "$((61010 + i)):$((61010 + i))" "$d"
done
for ((j = 1; j <= clients; j++)); do
    mkdir -p "$work/c$j"
    chown "$((61020 + j)):$((61020 + j))" "$work/c$j"
done
mkdir -p "$work/bin"
cp "$bin" "$work/bin/nemesis"
chmod 755 "$work/bin" "$work/bin/nemesis"

# ------------------------------------------------------------------ run
rc=0
# In the background, so that a signal to this script runs the cleanup at once (bash runs traps
# only between commands, and `wait` is interruptible where a foreground command is not).
nsx "$work/bin/nemesis" run --dir "$work" --seed "$seed" --duration "$duration" \
    --clients "$clients" --session-timeout-ms "$session_ms" --bound "$bound" \
    --faults "$faults" --sabotage "$sabotage" --scenario "$scenario" --trials "$trials" \
    --stack "$stack" > >(tee "$work/run.txt") &
wait "$!" || rc=$?
summary="$(cat "$work/summary" 2>/dev/null || true)"
[[ -n "$summary" ]] || summary="nemesis: run failed before the check (exit $rc); see the messages above"
if [[ -f "$work/history.jsonl" ]]; then
    mkdir -p "$out"
    cp "$work/history.jsonl" "$work/nemesis.html" "$out/"
    cp "$work/run.txt" "$out/check.txt" 2>/dev/null || true
    say "history and page kept: $out/history.jsonl, $out/nemesis.html"
fi
if [[ -n "$screenshot" && -f "$work/nemesis.html" ]]; then
    check_page "$out/nemesis.html" "$screenshot" "$((clients * 4))" || rc=3
fi
((rc == 0)) || say "FAILED (exit $rc); repeat with --seed $seed"
# Clean up before the last line, so that the summary is the last thing printed.
trap - EXIT
cleanup "$rc"
echo "$summary"
exit "$rc"
