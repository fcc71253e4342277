# Shared by start-zk.sh and stop-zk.sh (sourced, not run).

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; }

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# the pid recorded in <dir>/zk.pid if that process is alive and is our server
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
    [[ "$cmd" == *QuorumPeerMain*"$dir/zoo.cfg"* ]] || return 1
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
