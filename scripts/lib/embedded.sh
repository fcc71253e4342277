# shellcheck shell=bash
# shellcheck disable=SC2154 # the flags and settings are the sourcing script's globals
# start-zk.sh's embedded server (sourced, not run): ZK_VERSION=embedded runs zklock's own
# ZooKeeper-protocol server, the workspace's `zklock-server` binary, instead of a JVM, in the
# same work-dir layout as an Apache standalone server ($ZK_WORKDIR/<port>/ with zoo.cfg, zk.pid,
# server.log), so that stop-zk.sh, test.sh and the tests' fixtures treat both alike.
#
# The binary: ZK_EMBEDDED_BIN if set (scripts/test.sh builds it once per run and sets it),
# else built here with `cargo build -p zklock-server --bin zklock-server` (the dev profile,
# ZK_EMBEDDED_PROFILE=release for an optimised one) in the repository these scripts are in.
#
# It serves one standalone node in memory: an ensemble, --sasl, --tls or a snapshot to edit
# cannot be had from it, and asking for one is an error saying so. Its settings follow the
# Apache servers' zoo.cfg (tickTime=200, sessions negotiated between 400 ms and 60 s), and
# these JVM options of ZK_JVM_OPTS: -Dznode.container.checkIntervalMs,
# -Dznode.container.maxNeverUsedIntervalMs and -Dzookeeper.extendedTypesEnabled; any other
# is refused, so that a test never runs on settings it did not get.

# dies unless the mode and flags asked for are ones the embedded server can honour
embedded_check_flags() {
    [[ $mode == standalone ]] ||
        die "ZK_VERSION=embedded serves one standalone node: no ensemble (--ensemble, --ensemble-member, ZK_ENSEMBLE); use an Apache release"
    ((!sasl)) || die "ZK_VERSION=embedded has no SASL (--sasl); use an Apache release"
    ((!tls)) || die "ZK_VERSION=embedded has no TLS port (--tls); use an Apache release"
}

# prints the server's extra arguments for ZK_JVM_OPTS, dying on an option it cannot honour
embedded_args_of_jvm_opts() {
    local opt
    local -a opts=()
    [[ -z "$ZK_JVM_OPTS" ]] || read -r -a opts <<<"$ZK_JVM_OPTS"
    for opt in "${opts[@]}"; do
        case "$opt" in
            -Dznode.container.checkIntervalMs=*)
                is_uint "${opt#*=}" || die "bad $opt"
                printf '%s\n' --container-check-interval "${opt#*=}"
                ;;
            -Dznode.container.maxNeverUsedIntervalMs=*)
                is_uint "${opt#*=}" || die "bad $opt"
                printf '%s\n' --container-max-never-used "${opt#*=}"
                ;;
            -Dzookeeper.extendedTypesEnabled=true) printf '%s\n' --extended-types ;;
            -Dzookeeper.extendedTypesEnabled=false) ;;
            -Dzookeeper.digest.enabled=*)
                die "ZK_VERSION=embedded keeps no snapshot to edit (ZK_JVM_OPTS $opt); use an Apache release"
                ;;
            *) die "ZK_VERSION=embedded cannot honour the JVM option '$opt' (ZK_JVM_OPTS)" ;;
        esac
    done
}

# the path of the zklock-server binary, built first unless ZK_EMBEDDED_BIN names one
embedded_bin() {
    if [[ -n "${ZK_EMBEDDED_BIN:-}" ]]; then
        [[ -x "$ZK_EMBEDDED_BIN" ]] || die "ZK_EMBEDDED_BIN=$ZK_EMBEDDED_BIN is not an executable"
        printf '%s\n' "$ZK_EMBEDDED_BIN"
        return 0
    fi
    local root profile="${ZK_EMBEDDED_PROFILE:-dev}" target dir
    root="$(cd "$here/.." && pwd)"
    case "$profile" in
        dev | debug) profile=dev dir=debug ;;
        release) dir=release ;;
        *) die "ZK_EMBEDDED_PROFILE must be dev or release, got '$profile'" ;;
    esac
    [[ -f "$root/server/Cargo.toml" ]] || die "no server/ crate in $root: this checkout has no embedded server"
    command -v cargo >/dev/null 2>&1 || die "ZK_VERSION=embedded needs cargo to build zklock-server"
    log "building zklock-server ($profile profile) ..."
    # cargo's output goes to stderr: stdout is reserved for the connect string.
    (cd "$root" && cargo build --quiet --profile "$profile" -p zklock-server --bin zklock-server) >&2 ||
        die "building zklock-server failed"
    target="${CARGO_TARGET_DIR:-$root/target}"
    printf '%s\n' "$target/$dir/zklock-server"
}

# the embedded standalone server on ZK_PORT; an already serving one is accepted as it is
embedded_standalone() {
    local port="$ZK_PORT" dir="$ZK_WORKDIR/$ZK_PORT" m start bin pid="" i
    local -a extra settings=(--tick-time 200 --min-session-timeout 400 --max-session-timeout 60000)
    embedded_check_flags
    # In this shell first: a die in the process substitution below would only end a subshell.
    embedded_args_of_jvm_opts >/dev/null
    mapfile -t extra < <(embedded_args_of_jvm_opts)
    m="$(zk_mode "$port")"
    if [[ -n "$m" ]]; then
        local name
        name="$(zk_served_name "$port")"
        log "$name already serves on 127.0.0.1:$port (Mode: $m)"
        [[ $name == zklock-server* ]] ||
            log "WARNING: 127.0.0.1:$port runs $name, not zklock-server (stop it first to change servers)"
        printf '127.0.0.1:%s\n' "$port"
        return 0
    fi
    bin="$(embedded_bin)"
    [[ -x "$bin" ]] || die "no zklock-server binary at $bin"
    start="$(now_ms)" # the start timeout does not count the build
    mark_workdir
    lock_dir "$dir" create
    : >"$dir/.zklock-zk"
    if ! running_pid "$dir" >/dev/null; then
        # Not read by the server: the settings it runs with, where stop-zk.sh looks for the port.
        {
            echo "# generated by start-zk.sh -- zklock's embedded server (ZK_VERSION=embedded), for zklock tests"
            echo "clientPort=$port"
            echo "tickTime=200"
            echo "args=--port $port ${settings[*]} ${extra[*]}"
        } >"$dir/zoo.cfg.new"
        install_cfg "$dir"
        port_in_use "$port" && die "port $port is in use by something that is not a serving ZooKeeper"
        rm -f "$dir/zk.pid"
        printf '==== %s start-zk.sh: starting zklock-server (%s) ====\n' "$(date '+%F %T')" "$bin" \
            >>"$dir/server.log"
        local -a detach=(nohup)
        command -v setsid >/dev/null 2>&1 && detach=(setsid nohup)
        # As for a JVM: the wrapper writes its own pid and execs the server, whose working
        # directory is its server dir (running_pid tells it from other servers by that).
        (
            cd "$dir" || exit 1
            # shellcheck disable=SC2016 # expanded by the wrapper shell
            exec "${detach[@]}" bash -c 'echo $$ >"$1.tmp" && mv -f "$1.tmp" "$1" && shift && exec "$@"' \
                _ "$dir/zk.pid" "$bin" --port "$port" "${settings[@]}" "${extra[@]}" \
                </dev/null >>"$dir/server.log" 2>&1 9>&-
        ) &
        for ((i = 0; i < 200; i++)); do
            if pid="$(running_pid "$dir")"; then
                log "started zklock-server on port $port (pid $pid)"
                break
            fi
            [[ -s "$dir/zk.pid" ]] && sleep 0.1 && ! running_pid "$dir" >/dev/null && break
            sleep 0.05
        done
        if [[ -z "$pid" ]]; then
            rm -f "$dir/zk.pid"
            tail_log "$dir"
            die "zklock-server in $dir did not start (see $dir/server.log)"
        fi
    else
        log "server in $dir is already starting (pid $(running_pid "$dir")); waiting"
    fi
    m="$(await_serving "$dir" "$port" "$start" zklock-server 0.02)" || exit 1
    log "$(zk_served_name "$port") serving on 127.0.0.1:$port (Mode: $m) after $(elapsed "$start"); log: $dir/server.log"
    printf '127.0.0.1:%s\n' "$port"
}
