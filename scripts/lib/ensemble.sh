# shellcheck shell=bash
# shellcheck disable=SC2154 # the flags and settings are the sourcing script's globals
# start-zk.sh's ensemble (sourced, not run): --ensemble and --ensemble-member, in ens_dir
# (set by start-zk.sh), members 1..ens_size.  Builds on lib/server.sh.

# the ports of member <id>: those of ZK_ENSEMBLE_PORTS, else counted from ZK_ENSEMBLE_BASE
client_port() { # id
    if [[ -n "${ZK_ENSEMBLE_PORTS:-}" ]]; then echo "${ens_client_ports[$1 - 1]}"; else echo $((ZK_ENSEMBLE_BASE + $1 - 1)); fi
}
quorum_port() { # id
    if [[ -n "${ZK_ENSEMBLE_PORTS:-}" ]]; then echo "${ens_quorum_ports[$1 - 1]}"; else echo $((ZK_ENSEMBLE_BASE + 100 + $1 - 1)); fi
}
election_port() { # id
    if [[ -n "${ZK_ENSEMBLE_PORTS:-}" ]]; then echo "${ens_election_ports[$1 - 1]}"; else echo $((ZK_ENSEMBLE_BASE + 200 + $1 - 1)); fi
}

# member ids: from the existing layout if there is one, else 1..ens_size
member_ids() {
    local d ids=()
    if [[ $mode == member ]]; then
        for d in "$ens_dir"/[0-9]*/zoo.cfg; do
            [[ -f "$d" ]] || continue
            d="${d%/zoo.cfg}"
            ids+=("${d##*/}")
        done
    fi
    if ((${#ids[@]} == 0)); then
        for ((d = 1; d <= ens_size; d++)); do ids+=("$d"); done
    fi
    printf '%s\n' "${ids[@]}" | sort -n
}

# client port of member <id>: computed from ZK_ENSEMBLE_BASE, except for
# --ensemble-member, which uses the member's existing zoo.cfg if there is one
member_port() { # id
    local p=""
    if [[ $mode == member && -f "$ens_dir/$1/zoo.cfg" ]]; then
        p="$(sed -n 's/^clientPort=//p' "$ens_dir/$1/zoo.cfg")"
    fi
    echo "${p:-$(client_port "$1")}"
}

connect_string() {
    local id out=""
    for id in $(member_ids); do out+="${out:+,}127.0.0.1:$(member_port "$id")"; done
    printf '%s\n' "$out"
}

# writes <ens_dir>/<id>/zoo.cfg.new (and data/myid) for member <id>
gen_member_cfg() { # id
    local id="$1" dir="$ens_dir/$1" j
    local -a servers=()
    mkdir -p "$dir/data" "$dir/datalog"
    : >"$dir/.zklock-zk"
    printf '%s\n' "$id" >"$dir/data/myid"
    for ((j = 1; j <= ens_size; j++)); do
        servers+=("server.$j=127.0.0.1:$(quorum_port "$j"):$(election_port "$j")")
    done
    cfg_common "$dir" "$(client_port "$id")" "${servers[@]}" >"$dir/zoo.cfg.new"
}

# start member <id> unless it runs; <use_existing>=1 keeps an existing zoo.cfg
ensure_member() { # id use_existing
    local id="$1" dir="$ens_dir/$1" port
    if [[ $2 == 1 && -f "$dir/zoo.cfg" ]]; then
        mkdir -p "$dir/data" "$dir/datalog"
        [[ -f "$dir/data/myid" ]] || printf '%s\n' "$id" >"$dir/data/myid"
    else
        gen_member_cfg "$id"
        install_cfg "$dir"
    fi
    port="$(member_port "$id")"
    if [[ -n "$(zk_mode "$port")" ]]; then
        log "member $id already serves on 127.0.0.1:$port"
        return 0
    fi
    if running_pid "$dir" >/dev/null; then
        log "member $id already running (pid $(running_pid "$dir")), not serving yet"
        return 0
    fi
    port_in_use "$port" && die "port $port (member $id) is in use by something that is not a serving ZooKeeper"
    launch "$dir"
}

# wait until every given member serves as leader/follower, at least one leader
wait_members() { # start_ms ids...
    local start="$1" id m leaders bad
    shift
    while :; do
        leaders=0
        bad=""
        for id in "$@"; do
            m="$(zk_mode "$(member_port "$id")")"
            case "$m" in
                leader) leaders=$((leaders + 1)) ;;
                follower | observer) ;;
                *) bad+=" $id" ;;
            esac
        done
        if [[ -z "$bad" ]] && { ((leaders >= 1)) || [[ $mode == member ]]; }; then
            return 0
        fi
        for id in $bad; do
            if ! running_pid "$ens_dir/$id" >/dev/null && [[ -z "$(zk_mode "$(member_port "$id")")" ]]; then
                rm -f "$ens_dir/$id/zk.pid"
                tail_log "$ens_dir/$id"
                die "ensemble member $id exited during startup"
            fi
        done
        if timed_out "$start"; then
            for id in $bad; do tail_log "$ens_dir/$id"; done
            die "ensemble member(s)$bad not serving after ${ZK_START_TIMEOUT}s (is a quorum of members running?)"
        fi
        sleep 0.2
    done
}

# whether every member serves, one of them as leader
ensemble_serves() {
    local id m leaders=0
    for id in $(member_ids); do
        m="$(zk_mode "$(member_port "$id")")"
        case "$m" in
            leader) leaders=$((leaders + 1)) ;;
            follower | observer) ;;
            *) return 1 ;;
        esac
    done
    ((leaders >= 1))
}

# --ensemble: every member, then waits for a leader and followers
ensemble() {
    local start id ids
    start="$(now_ms)"
    if ensemble_serves; then
        log "ensemble already serving"
        connect_string
        return 0
    fi
    ensure_installed
    start="$(now_ms)" # the start timeout does not count a first download of the jars
    mark_workdir
    lock_dir "$ens_dir" create
    : >"$ens_dir/.zklock-zk"
    mapfile -t ids < <(member_ids)
    for id in "${ids[@]}"; do ensure_member "$id" 0; done
    wait_members "$start" "${ids[@]}"
    for id in "${ids[@]}"; do
        log "member $id: 127.0.0.1:$(member_port "$id") Mode: $(zk_mode "$(member_port "$id")"), $(zk_served_name "$(member_port "$id")")"
    done
    log "ensemble serving after $(elapsed "$start"); logs: $ens_dir/<id>/server.log"
    connect_string
}

# --ensemble-member N: member N with its existing zoo.cfg if it has one
ensemble_member() {
    local start id="$member" port m
    start="$(now_ms)"
    port="$(member_port "$id")"
    m="$(zk_mode "$port")"
    if [[ -n "$m" ]]; then
        log "ensemble member $id already serves on 127.0.0.1:$port (Mode: $m)"
        connect_string
        return 0
    fi
    if [[ ! -f "$ens_dir/$id/zoo.cfg" ]]; then
        ((id <= ens_size)) || die "no ensemble member $id (no $ens_dir/$id/zoo.cfg; ensemble size $ens_size)"
        log "member $id has no config yet; generating it"
    fi
    ensure_installed
    start="$(now_ms)" # the start timeout does not count a first download of the jars
    mark_workdir
    lock_dir "$ens_dir" create
    : >"$ens_dir/.zklock-zk"
    ensure_member "$id" 1
    wait_members "$start" "$id"
    log "member $id serving on 127.0.0.1:$port (Mode: $(zk_mode "$port")) after $(elapsed "$start")"
    connect_string
}
