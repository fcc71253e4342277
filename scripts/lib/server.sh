# shellcheck shell=bash
# shellcheck disable=SC2154 # the flags and settings are the sourcing script's globals
# start-zk.sh's plain servers (sourced, not run): installing ZooKeeper and a JRE on Debian,
# launching a server from its dir, and the standalone server.  Uses the settings and the
# mode flags that start-zk.sh sets; lib/secure.sh and lib/ensemble.sh build on it.

now_ms() { # milliseconds since the epoch
    if [[ -n "${EPOCHREALTIME:-}" ]]; then
        local t="${EPOCHREALTIME/[.,]/}"
        echo $((10#${t:0:${#t}-3}))
    else
        date +%s%3N
    fi
}
elapsed() { # start_ms -> "1.234s"
    local d=$(($(now_ms) - $1))
    printf '%d.%03ds' $((d / 1000)) $((d % 1000))
}
timed_out() { # start_ms
    (($(now_ms) - $1 >= ZK_START_TIMEOUT * 1000))
}

# the java that runs the servers: $JAVA, $JAVA_HOME/bin/java or java on PATH; empty if none
java_bin() {
    if [[ -n "${JAVA:-}" ]]; then
        printf '%s\n' "$JAVA"
    elif [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
        printf '%s\n' "$JAVA_HOME/bin/java"
    else
        command -v java || true
    fi
}

# installs what ZK_VERSION needs when missing (Debian's zookeeper package for debian, a JRE,
# openssl for --tls), then finds its jars (lib/dist.sh: fetched once for other releases) and
# sets zk_jars and zk_release
zk_jars="" zk_release=""
ensure_installed() {
    local pkgs=()
    if [[ $ZK_VERSION == debian && -z "${ZK_DIST:-}" && ! -f "$ZK_JAR" ]]; then
        pkgs+=(zookeeper)
    fi
    if [[ -z "$(java_bin)" ]]; then
        pkgs+=(default-jre-headless)
    fi
    if ((tls)) && ! command -v openssl >/dev/null 2>&1; then
        pkgs+=(openssl)
    fi
    if ((${#pkgs[@]})); then
        local sudo=()
        if ((EUID != 0)); then
            command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: ${pkgs[*]}"
            sudo=(sudo)
        fi
        log "installing ${pkgs[*]} (apt-get) ..."
        # apt output goes to stderr: stdout is reserved for the connect string.
        "${sudo[@]}" apt-get update >&2
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            "${pkgs[@]}" >&2
        [[ $ZK_VERSION != debian || -n "${ZK_DIST:-}" || -f "$ZK_JAR" ]] ||
            die "$ZK_JAR still missing after installing zookeeper"
        [[ -n "$(java_bin)" ]] || die "java still missing after installing default-jre-headless"
        ((!tls)) || command -v openssl >/dev/null 2>&1 || die "openssl still missing after installing it"
    fi
    zk_jars="$(zk_jar_dir)"
    zk_release="$(zk_release_of "$zk_jars")"
    if [[ -n "${ZK_DIST:-}" && -n "$zk_version_asked" && $ZK_VERSION != "$zk_release" ]]; then
        die "ZK_DIST=$ZK_DIST holds ZooKeeper $zk_release, not the $ZK_VERSION asked for"
    fi
}

# warns when the server on 127.0.0.1:<port> runs another release than the one asked for, or
# is zklock's embedded server, which srvr gives the release of the protocol it serves
check_served_release() { # port
    local served name want="${zk_release:-$ZK_VERSION}"
    [[ -n "$zk_release" || -z "${ZK_DIST:-}" ]] || return 0
    [[ $want != debian ]] || want=3.8.0
    served="$(zk_served_version "$1")"
    name="$(zk_served_name "$1")"
    if [[ $name == zklock-server* ]]; then
        log "WARNING: 127.0.0.1:$1 runs $name, not Apache ZooKeeper $want (stop it first to change servers)"
    elif [[ -n "$served" && $served != "$want" ]]; then
        log "WARNING: 127.0.0.1:$1 runs ZooKeeper $served, not $want (stop it first to change releases)"
    fi
}

# the last lines of <dir>/server.log on stderr, after a server failed to start
tail_log() { # dir
    if [[ -f "$1/server.log" ]]; then
        log "---- last lines of $1/server.log ----"
        { grep -v 'Processing srvr command' "$1/server.log" || true; } | tail -n 40 >&2
        log "----"
    fi
}

# waits until the server in <dir> answers srvr with a Mode: line and prints the mode; dies
# (call it as m="$(await_serving ...)" || exit 1) if its process exits first or
# ZK_START_TIMEOUT passes; <what> names the server in the messages
await_serving() { # dir port start_ms what poll_seconds
    local dir="$1" port="$2" start="$3" what="$4" poll="$5" m
    while :; do
        m="$(zk_mode "$port")"
        if [[ -n "$m" ]]; then
            printf '%s\n' "$m"
            return 0
        fi
        if ! running_pid "$dir" >/dev/null; then
            rm -f "$dir/zk.pid"
            tail_log "$dir"
            die "$what in $dir exited during startup"
        fi
        if timed_out "$start"; then
            tail_log "$dir"
            die "$what on 127.0.0.1:$port not serving after ${ZK_START_TIMEOUT}s"
        fi
        sleep "$poll"
    done
}

# the .zklock-zk marker allows stop-zk.sh --clean to delete a directory; the root only
# gets it if this script creates it (or finds it empty), never a pre-existing dir
mark_workdir() {
    if [[ ! -d "$ZK_WORKDIR" ]] || [[ -z "$(ls -A "$ZK_WORKDIR")" ]]; then
        mkdir -p "$ZK_WORKDIR"
        : >"$ZK_WORKDIR/.zklock-zk"
    fi
}

# the zoo.cfg of a start-zk.sh server in <dir> on <client_port>; key=value as for zoo_cfg
cfg_common() { # dir client_port [key=value ...]
    echo "# generated by start-zk.sh -- throwaway server for zklock tests, ZooKeeper $zk_release"
    zoo_cfg "$@"
}

# install a freshly generated config (<dir>/zoo.cfg.new) unless the server runs with a
# different one
install_cfg() { # dir
    local dir="$1"
    if [[ -f "$dir/zoo.cfg" ]] && cmp -s "$dir/zoo.cfg.new" "$dir/zoo.cfg"; then
        rm -f "$dir/zoo.cfg.new"
        return 0
    fi
    if running_pid "$dir" >/dev/null; then
        rm -f "$dir/zoo.cfg.new"
        die "the server in $dir is running with a different configuration; stop it first (scripts/stop-zk.sh)"
    fi
    mv -f "$dir/zoo.cfg.new" "$dir/zoo.cfg"
}

# extra JVM options for launch (the JAAS file of --sasl)
launch_jvm_opts=()

# starts the server of <dir> (its zoo.cfg is in place) detached; returns once its JVM runs
launch() { # dir
    local dir="$1" java cp i pid=""
    java="$(java_bin)"
    cp="$(zk_classpath "$zk_jars" "$tls")"
    mkdir -p "$dir/data" "$dir/datalog"
    write_log4j "$dir"
    rm -f "$dir/zk.pid"
    printf '==== %s start-zk.sh: starting server (%s) ====\n' "$(date '+%F %T')" "$dir/zoo.cfg" \
        >>"$dir/server.log"
    local -a cmd=("$java" "-Xmx$ZK_HEAP" -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError
        -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true
        -Dzookeeper.admin.enableServer=false -Dzookeeper.jmx.log4j.disable=true
        "-Dzookeeper.log.dir=$dir"
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=${ZK_LOG_LEVEL,,}")
    local -a logopts
    mapfile -t logopts < <(zk_log_opts "$dir")
    cmd+=("${logopts[@]}")
    if ((${#launch_jvm_opts[@]})); then
        cmd+=("${launch_jvm_opts[@]}")
    fi
    if [[ -n "$ZK_JVM_OPTS" ]]; then
        local -a extra
        read -r -a extra <<<"$ZK_JVM_OPTS"
        cmd+=("${extra[@]}")
    fi
    cmd+=(-cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg")

    # The wrapper shell writes its own pid and execs java, so the pid file holds the
    # JVM's pid no matter whether setsid had to fork.
    local -a detach=(nohup)
    command -v setsid >/dev/null 2>&1 && detach=(setsid nohup)
    (
        cd "$dir" || exit 1
        # shellcheck disable=SC2016 # expanded by the wrapper shell
        exec "${detach[@]}" bash -c 'echo $$ >"$1.tmp" && mv -f "$1.tmp" "$1" && shift && exec "$@"' \
            _ "$dir/zk.pid" "${cmd[@]}" </dev/null >>"$dir/server.log" 2>&1 9>&-
    ) &
    for ((i = 0; i < 200; i++)); do
        if pid="$(running_pid "$dir")"; then
            log "started ZooKeeper $zk_release: $dir/zoo.cfg (pid $pid)"
            return 0
        fi
        # pid file written but process gone: the JVM died right away
        [[ -s "$dir/zk.pid" ]] && sleep 0.1 && ! running_pid "$dir" >/dev/null && break
        sleep 0.05
    done
    rm -f "$dir/zk.pid"
    tail_log "$dir"
    die "server in $dir did not start (see $dir/server.log)"
}

# the plain standalone server on ZK_PORT; an already serving one is accepted as it is
standalone() {
    local port="$ZK_PORT" dir="$ZK_WORKDIR/$ZK_PORT" m start
    start="$(now_ms)"
    m="$(zk_mode "$port")"
    if [[ -n "$m" ]]; then
        log "$(zk_served_name "$port") already serves on 127.0.0.1:$port (Mode: $m)"
        check_served_release "$port"
        local v
        for v in -sasl -tls -sasl-tls; do
            if running_pid "$ZK_WORKDIR/$port$v" >/dev/null; then
                log "WARNING: it is the secure server of $ZK_WORKDIR/$port$v (started with${v//-/ --}), not a plain one"
            fi
        done
        printf '127.0.0.1:%s\n' "$port"
        return 0
    fi
    ensure_installed
    start="$(now_ms)" # the start timeout does not count a first download of the jars
    mark_workdir
    lock_dir "$dir" create
    : >"$dir/.zklock-zk"
    if ! running_pid "$dir" >/dev/null; then
        cfg_common "$dir" "$port" >"$dir/zoo.cfg.new"
        install_cfg "$dir"
        port_in_use "$port" && die "port $port is in use by something that is not a serving ZooKeeper"
        launch "$dir"
    else
        log "server in $dir is already starting (pid $(running_pid "$dir")); waiting"
    fi
    m="$(await_serving "$dir" "$port" "$start" server 0.2)" || exit 1
    log "$(zk_served_name "$port") serving on 127.0.0.1:$port (Mode: $m) after $(elapsed "$start"); log: $dir/server.log"
    check_served_release "$port"
    printf '127.0.0.1:%s\n' "$port"
}
