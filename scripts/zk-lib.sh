# shellcheck shell=bash
# Shared by start-zk.sh, stop-zk.sh, test.sh and nemesis.sh (sourced, not run).  ZK_WORKDIR
# must be set before the functions that use it run; die and log come from the sourcing script.
# What only start-zk.sh or stop-zk.sh needs is in scripts/lib/.

# prints the comment at the top of the running script, up to its `set -euo pipefail`
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; }

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# the pid recorded in <dir>/zk.pid if that process is alive and is our server: a JVM running
# <dir>/zoo.cfg, or the embedded zklock-server whose working directory is <dir>
running_pid() { # dir
    local dir="$1" pid state cmd
    [[ -f "$dir/zk.pid" ]] || return 1
    pid="$(tr -dc '0-9' <"$dir/zk.pid")"
    [[ -n "$pid" ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r "/proc/$pid/stat" ]]; then
        state="$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)"
        [[ "$state" != Z ]] || return 1 # zombie: gone, but not reaped
        cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline")"
    else
        cmd="$(ps -o args= -p "$pid" 2>/dev/null || true)"
    fi
    if [[ "$cmd" != *QuorumPeerMain*"$dir/zoo.cfg"* ]]; then
        # The embedded server (ZK_VERSION=embedded) names no config: it runs in its dir.
        [[ "$cmd" == *zklock-server*--port* ]] || return 1
        [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == "$(cd "$dir" 2>/dev/null && pwd -P)" ]] || return 1
    fi
    printf '%s\n' "$pid"
}

# the numbered server dirs directly under <parent> (ensemble members, standalone ports)
numbered_dirs() { # parent
    local d
    for d in "$1"/[0-9]*; do
        [[ -d "$d" ]] && printf '%s\n' "$d"
    done
    return 0
}

# four-letter-word command; prints the answer, fails if nothing could be sent.  Exactly 4
# bytes via bash /dev/tcp: "echo srvr | nc" sends a 5th byte, which makes the server reset
# the connection and occasionally loses the answer.
zk_4lw() { # host port word
    # shellcheck disable=SC2016 # expanded by the inner shell
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1; printf "%s" "$3" >&3; cat <&3' \
        _ "$1" "$2" "$3" 2>/dev/null
}

# prints the mode of the server on 127.0.0.1:<port> (standalone/leader/follower/observer),
# or nothing if no ZooKeeper serves there
zk_mode() { # port
    zk_4lw 127.0.0.1 "$1" srvr | sed -n 's/^Mode: *//p' | tr -d '\r' || true
}

# prints the release ("3.9.5") of the ZooKeeper on 127.0.0.1:<port> (4lw srvr), or nothing;
# for zklock's embedded server, the release whose protocol it serves (see zk_served_name)
zk_served_version() { # port
    zk_4lw 127.0.0.1 "$1" srvr | sed -n 's/^Zookeeper version: *\([^-,]*\).*/\1/p' | tr -d '\r' || true
}

# prints, for people, what serves on 127.0.0.1:<port>: "ZooKeeper 3.9.5" for Apache's, or
# "zklock-server 0.2.0 (ZooKeeper 3.9.5 protocol)" for zklock's embedded server (whose srvr
# says "Zookeeper version: 3.9.5-zklock-server-0.2.0, ...", the release first, for the tools
# that parse it); nothing if no ZooKeeper serves there
zk_served_name() { # port
    local v
    v="$(zk_4lw 127.0.0.1 "$1" srvr | sed -n 's/^Zookeeper version: *//p' | tr -d '\r' || true)"
    [[ -n $v ]] || return 0
    if [[ $v =~ ^([^-,]*)-zklock-server-([^,]*) ]]; then
        printf 'zklock-server %s (ZooKeeper %s protocol)\n' "${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}"
    else
        printf 'ZooKeeper %s\n' "${v%%[-,]*}"
    fi
}

# true if something accepts connections on 127.0.0.1:<port>
port_in_use() { # port
    # shellcheck disable=SC2016 # expanded by the inner shell
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# prints a port on 127.0.0.1 that nothing listens on, picked at random below the kernel's
# ephemeral range (net.ipv4.ip_local_port_range): the kernel never gives those ports to the
# local end of an outgoing connection, which could otherwise take the port before the server
# binds it.  The tests pick their servers' ports the same way (tests/common/servers.rs).
free_port() {
    local lo=15000 hi=32768 first p i
    if read -r first _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && is_uint "$first"; then
        hi=$((10#$first))
    fi
    ((hi - lo >= 1000)) || lo=1024
    for ((i = 0; i < 100; i++)); do
        p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
        port_in_use "$p" || { printf '%s\n' "$p"; return 0; }
    done
    return 1
}

# take an exclusive lock for <dir>, which is created if <create> is given and otherwise
# skipped if missing.  fd 9 is reused, so re-locking releases the previous lock; the lock
# is released when the script exits (start-zk.sh closes fd 9 in the server's environment,
# so the JVM does not inherit it).
lock_dir() { # dir [create]
    if [[ ${2:-} == create ]]; then
        mkdir -p "$1"
    elif [[ ! -d "$1" ]]; then
        return 0
    fi
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$1/.lock"
        flock -w 120 9 || die "could not lock $1/.lock"
    fi
}

# the ensemble's dir: $ZK_WORKDIR/ensemble, or $ZK_WORKDIR/ensemble-<client port of member 1>
# when ZK_ENSEMBLE_PORTS names the ports, so ensembles on other ports never share a dir
ensemble_dir() {
    if [[ -n "${ZK_ENSEMBLE_PORTS:-}" ]]; then
        parse_ensemble_ports
        printf '%s/ensemble-%s\n' "$ZK_WORKDIR" "${ens_client_ports[0]}"
    else
        printf '%s/ensemble\n' "$ZK_WORKDIR"
    fi
}

# parses ZK_ENSEMBLE_PORTS ("client:quorum:election,..." one triple per member, all distinct)
# into the arrays ens_client_ports, ens_quorum_ports and ens_election_ports (index id-1)
parse_ensemble_ports() {
    local triple c q e p
    local -A seen=()
    ens_client_ports=() ens_quorum_ports=() ens_election_ports=()
    for triple in ${ZK_ENSEMBLE_PORTS//,/ }; do
        IFS=: read -r c q e <<<"$triple"
        for p in "$c" "$q" "$e"; do
            if ! is_uint "$p" || ((10#$p <= 0 || 10#$p >= 65536)); then
                die "bad ZK_ENSEMBLE_PORTS '$ZK_ENSEMBLE_PORTS': '$triple' is not client:quorum:election"
            fi
            [[ -z "${seen[$((10#$p))]:-}" ]] || die "bad ZK_ENSEMBLE_PORTS '$ZK_ENSEMBLE_PORTS': port $p twice"
            seen[$((10#$p))]=1
        done
        ens_client_ports+=($((10#$c)))
        ens_quorum_ports+=($((10#$q)))
        ens_election_ports+=($((10#$e)))
    done
    ((${#ens_client_ports[@]} >= 2 && ${#ens_client_ports[@]} <= 99)) ||
        die "bad ZK_ENSEMBLE_PORTS '$ZK_ENSEMBLE_PORTS': give 2..99 members"
}

# The flags of start-zk.sh and stop-zk.sh, parsed into mode (standalone, ensemble, member or
# all), member, sasl, tls, clean and variant (the secure server's dir suffix: -sasl, -tls or
# -sasl-tls), and --version into ZK_VERSION (stop-zk.sh accepts and ignores it, so that one set
# of flags serves both).  A ZK_ENSEMBLE other than 0 selects the ensemble unless a flag says otherwise.
# <extra> names the flags only some scripts take (stop-zk.sh: "--all --clean"); any other
# argument prints the usage and dies.
# shellcheck disable=SC2034 # the results are the sourcing script's globals
parse_flags() { # extra args...
    local extra=" $1 "
    shift
    mode=standalone member="" sasl=0 tls=0 clean=0 variant=""
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
            --version)
                (($# >= 2)) || die "--version needs a release (3.9.5, 3.6.3, 3.8.0, debian or embedded)"
                ZK_VERSION="$2" zk_version_asked="$2"
                shift
                ;;
            --version=*) ZK_VERSION="${1#*=}" zk_version_asked="${1#*=}" ;;
            --sasl) sasl=1 ;;
            --tls) tls=1 ;;
            -h | --help) usage; exit 0 ;;
            --all | --clean)
                [[ $extra == *" $1 "* ]] || { usage; die "unknown argument: $1"; }
                if [[ $1 == --all ]]; then mode=all; else clean=1; fi
                ;;
            *) usage; die "unknown argument: $1" ;;
        esac
        shift
    done
    if ((sasl)); then variant+="-sasl"; fi
    if ((tls)); then variant+="-tls"; fi
}

# dies unless ZK_WORKDIR is a directory the scripts may own (not empty, not /)
check_workdir() {
    [[ -n "$ZK_WORKDIR" && "$ZK_WORKDIR" != / ]] || die "bad ZK_WORKDIR '$ZK_WORKDIR'"
}
