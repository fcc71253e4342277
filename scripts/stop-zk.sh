#!/usr/bin/env bash
# stop-zk.sh -- stop ZooKeeper server(s) started by scripts/start-zk.sh.
#
# Usage:
#   scripts/stop-zk.sh [--clean]                     standalone server on ${ZK_PORT:-2181}
#   scripts/stop-zk.sh --sasl [--tls] [--clean]      the secure variant started with the same
#   scripts/stop-zk.sh --tls [--clean]               flags and ZK_PORT ($ZK_WORKDIR/<port>-sasl,
#                                                    <port>-tls or <port>-sasl-tls)
#   scripts/stop-zk.sh --ensemble [--clean]          all ensemble members (of the ensemble
#                                                    that ZK_ENSEMBLE_PORTS names, if set)
#   scripts/stop-zk.sh --ensemble-member N [--clean] ensemble member N only
#   scripts/stop-zk.sh --all [--clean]               every server under $ZK_WORKDIR
#
#   Only processes recorded in the zk.pid files written by start-zk.sh are signalled
#   (and only if the process still is that server: QuorumPeerMain with that zoo.cfg).
#   SIGTERM first, SIGKILL after ZK_STOP_TIMEOUT seconds; the pid file is removed.
#   Exits 0 if nothing is running.
#   --all includes the secure variants (--sasl/--tls) and every ensemble (ensemble/ and the
#   ensemble-<port>/ dirs of ZK_ENSEMBLE_PORTS ensembles).
#   --clean also deletes the work dir(s): $ZK_WORKDIR/<port>[-sasl|-tls|-sasl-tls], the
#   ensemble's dir, its member N's dir, or all of those for --all; $ZK_WORKDIR itself is removed
#   once nothing else is left in it.  Only directories carrying start-zk.sh's
#   .zklock-zk marker are deleted (start-zk.sh never marks a pre-existing non-empty
#   ZK_WORKDIR), and never one whose server is still running.
#
# Environment (same meaning as for start-zk.sh):
#   ZK_PORT (2181), ZK_ENSEMBLE (>=2 means --ensemble), ZK_ENSEMBLE_PORTS, ZK_WORKDIR
#   (${TMPDIR:-/tmp}/zklock-zk), ZK_STOP_TIMEOUT (10)
set -euo pipefail

ZK_PORT="${ZK_PORT:-2181}"
ZK_WORKDIR="${ZK_WORKDIR:-${TMPDIR:-/tmp}/zklock-zk}"
ZK_STOP_TIMEOUT="${ZK_STOP_TIMEOUT:-10}"

log() { printf 'stop-zk: %s\n' "$*" >&2; }
die() { printf 'stop-zk: ERROR: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/zk-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/zk-lib.sh"

mode=standalone
member=""
clean=0
variant=""
sasl=0
tls=0
if [[ -n "${ZK_ENSEMBLE:-}" && "${ZK_ENSEMBLE}" != 0 ]]; then
    mode=ensemble
fi
while (($#)); do
    case "$1" in
        --ensemble) mode=ensemble ;;
        --ensemble-member)
            (($# >= 2)) || die "--ensemble-member needs a member id"
            mode=member
            member="$2"
            shift
            ;;
        --ensemble-member=*) mode=member; member="${1#*=}" ;;
        --all) mode=all ;;
        --sasl) sasl=1 ;;
        --tls) tls=1 ;;
        --clean) clean=1 ;;
        -h | --help) usage; exit 0 ;;
        *) usage; die "unknown argument: $1" ;;
    esac
    shift
done
is_uint "$ZK_PORT" || die "bad ZK_PORT '$ZK_PORT'"
is_uint "$ZK_STOP_TIMEOUT" || die "bad ZK_STOP_TIMEOUT '$ZK_STOP_TIMEOUT'"
[[ $mode != member ]] || is_uint "$member" || die "bad ensemble member id '$member'"
if ((sasl || tls)) && [[ $mode != standalone ]]; then
    die "--sasl and --tls name a standalone server; use them without --ensemble/--all"
fi
((sasl)) && variant+="-sasl"
((tls)) && variant+="-tls"
ZK_PORT=$((10#$ZK_PORT))
ZK_STOP_TIMEOUT=$((10#$ZK_STOP_TIMEOUT))
[[ $mode != member ]] || member=$((10#$member))
[[ -n "$ZK_WORKDIR" && "$ZK_WORKDIR" != / ]] || die "bad ZK_WORKDIR '$ZK_WORKDIR'"
ens_dir="$(ensemble_dir)"
# (lock_dir, zk_mode and ensemble_dir are in zk-lib.sh)

# stop the servers in the given server dirs (in parallel)
stop_dirs() { # dir...
    local dir pid deadline
    local -a dirs=() pids=()
    for dir in "$@"; do
        if pid="$(running_pid "$dir")"; then
            log "stopping $dir (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
            dirs+=("$dir")
            pids+=("$pid")
        elif [[ -f "$dir/zk.pid" ]]; then
            log "removing stale pid file $dir/zk.pid"
            rm -f "$dir/zk.pid"
        fi
    done
    ((${#dirs[@]})) || return 0

    local i remaining killed=0
    deadline=$((SECONDS + ZK_STOP_TIMEOUT))
    while :; do
        remaining=0
        for i in "${!dirs[@]}"; do
            running_pid "${dirs[$i]}" >/dev/null && remaining=$((remaining + 1))
        done
        ((remaining)) || break
        if ((SECONDS >= deadline)); then
            if ((killed)); then
                die "server process(es) still alive ${ZK_STOP_TIMEOUT}s after SIGKILL"
            fi
            for i in "${!dirs[@]}"; do
                if running_pid "${dirs[$i]}" >/dev/null; then
                    log "pid ${pids[$i]} ignored SIGTERM for ${ZK_STOP_TIMEOUT}s; sending SIGKILL"
                    kill -KILL "${pids[$i]}" 2>/dev/null || true
                fi
            done
            killed=1
            deadline=$((SECONDS + ZK_STOP_TIMEOUT))
        fi
        sleep 0.1
    done
    for dir in "${dirs[@]}"; do
        rm -f "$dir/zk.pid"
        printf '==== %s stop-zk.sh: server stopped ====\n' "$(date '+%F %T')" >>"$dir/server.log" 2>/dev/null || true
    done
    log "stopped ${#dirs[@]} server(s)"
}

port_of() { # dir -> its client port, from zoo.cfg
    [[ -f "$1/zoo.cfg" ]] && sed -n 's/^clientPort=//p' "$1/zoo.cfg"
}

warn_if_still_serving() { # dir...
    local dir port
    for dir in "$@"; do
        port="$(port_of "$dir" || true)"
        if [[ -n "$port" && -n "$(zk_mode "$port")" ]]; then
            log "WARNING: a ZooKeeper still serves on 127.0.0.1:$port (not started by start-zk.sh in $dir?)"
        fi
    done
}

remove_dir() { # dir
    local dir="$1"
    [[ -d "$dir" ]] || return 0
    if [[ ! -e "$dir/.zklock-zk" ]]; then
        log "not deleting $dir: no .zklock-zk marker (not created by start-zk.sh?)"
        return 0
    fi
    if running_pid "$dir" >/dev/null; then
        log "not deleting $dir: its server is still running"
        return 0
    fi
    rm -rf -- "$dir"
    log "deleted $dir"
}

# drop the work dir root if nothing but the marker is left in it
prune_workdir() {
    local f
    [[ -d "$ZK_WORKDIR" && -e "$ZK_WORKDIR/.zklock-zk" ]] || return 0
    for f in "$ZK_WORKDIR"/* "$ZK_WORKDIR"/.[!.]*; do
        [[ -e "$f" && "$f" != "$ZK_WORKDIR/.zklock-zk" ]] && return 0
    done
    rm -rf -- "$ZK_WORKDIR"
}



case "$mode" in
    standalone)
        dir="$ZK_WORKDIR/$ZK_PORT$variant"
        lock_dir "$dir"
        stop_dirs "$dir"
        warn_if_still_serving "$dir"
        if ((clean)); then remove_dir "$dir"; prune_workdir; fi
        ;;
    ensemble)
        lock_dir "$ens_dir"
        mapfile -t dirs < <(numbered_dirs "$ens_dir")
        if ((${#dirs[@]})); then
            stop_dirs "${dirs[@]}"
            warn_if_still_serving "${dirs[@]}"
        fi
        if ((clean)); then remove_dir "$ens_dir"; prune_workdir; fi
        ;;
    member)
        lock_dir "$ens_dir"
        stop_dirs "$ens_dir/$member"
        warn_if_still_serving "$ens_dir/$member"
        ((clean)) && remove_dir "$ens_dir/$member"
        ;;
    all)
        mapfile -t dirs < <(numbered_dirs "$ZK_WORKDIR")
        for dir in "${dirs[@]}"; do
            lock_dir "$dir"
            stop_dirs "$dir"
        done
        ens_dirs=()
        for dir in "$ZK_WORKDIR/ensemble" "$ZK_WORKDIR"/ensemble-[0-9]*; do
            [[ -d "$dir" ]] && ens_dirs+=("$dir")
        done
        for dir in "${ens_dirs[@]}"; do
            lock_dir "$dir"
            mapfile -t edirs < <(numbered_dirs "$dir")
            ((${#edirs[@]} == 0)) || stop_dirs "${edirs[@]}"
        done
        if ((clean)); then
            for dir in "${dirs[@]}" "${ens_dirs[@]}"; do remove_dir "$dir"; done
            prune_workdir
        fi
        ;;
esac
exit 0
