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
#   --version V is accepted and ignored, so that start-zk.sh's flags stop what they started.
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
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/zk-lib.sh
source "$here/zk-lib.sh"
# shellcheck source=scripts/lib/stop.sh
source "$here/lib/stop.sh"

parse_flags "--all --clean" "$@"
is_uint "$ZK_PORT" || die "bad ZK_PORT '$ZK_PORT'"
is_uint "$ZK_STOP_TIMEOUT" || die "bad ZK_STOP_TIMEOUT '$ZK_STOP_TIMEOUT'"
[[ $mode != member ]] || is_uint "$member" || die "bad ensemble member id '$member'"
if ((sasl || tls)) && [[ $mode != standalone ]]; then
    die "--sasl and --tls name a standalone server; use them without --ensemble/--all"
fi
ZK_PORT=$((10#$ZK_PORT))
ZK_STOP_TIMEOUT=$((10#$ZK_STOP_TIMEOUT))
[[ $mode != member ]] || member=$((10#$member))
check_workdir
ens_dir="$(ensemble_dir)"

case "$mode" in
    standalone) stop_standalone ;;
    ensemble) stop_ensemble ;;
    member) stop_member ;;
    all) stop_all ;;
esac
exit 0
