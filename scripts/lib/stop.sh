# shellcheck shell=bash
# shellcheck disable=SC2154 # the flags and settings are the sourcing script's globals
# stop-zk.sh's work (sourced, not run): stopping the servers recorded in zk.pid files and
# deleting the work dirs start-zk.sh marked.  Uses the settings and the mode flags that
# stop-zk.sh sets.

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

# the standalone server on ZK_PORT (or its secure variant)
stop_standalone() {
    local dir="$ZK_WORKDIR/$ZK_PORT$variant"
    lock_dir "$dir"
    stop_dirs "$dir"
    warn_if_still_serving "$dir"
    if ((clean)); then remove_dir "$dir"; prune_workdir; fi
}

# every member of the ensemble in ens_dir
stop_ensemble() {
    local -a dirs
    lock_dir "$ens_dir"
    mapfile -t dirs < <(numbered_dirs "$ens_dir")
    if ((${#dirs[@]})); then
        stop_dirs "${dirs[@]}"
        warn_if_still_serving "${dirs[@]}"
    fi
    if ((clean)); then remove_dir "$ens_dir"; prune_workdir; fi
}

# ensemble member <member>
stop_member() {
    lock_dir "$ens_dir"
    stop_dirs "$ens_dir/$member"
    warn_if_still_serving "$ens_dir/$member"
    if ((clean)); then remove_dir "$ens_dir/$member"; fi
}

# every server under ZK_WORKDIR: standalone ones, secure ones and every ensemble
stop_all() {
    local dir
    local -a dirs ens_dirs=() edirs
    mapfile -t dirs < <(numbered_dirs "$ZK_WORKDIR")
    for dir in "${dirs[@]}"; do
        lock_dir "$dir"
        stop_dirs "$dir"
    done
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
}
