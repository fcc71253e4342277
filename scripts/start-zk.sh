#!/usr/bin/env bash
# start-zk.sh -- start throwaway ZooKeeper server(s) on loopback for zklock tests.
#
# Usage:
#   scripts/start-zk.sh                         standalone server on 127.0.0.1:${ZK_PORT:-2181}
#   scripts/start-zk.sh --ensemble              3-member ensemble (ports 2281,2282,2283)
#   scripts/start-zk.sh --ensemble-member N     (re)start member N of the ensemble, using
#                                               its existing config/data, if it is not running
#   scripts/start-zk.sh --help
#
#   The LAST line on stdout is the connect string (everything else goes to stderr), so
#       ZK=$(scripts/start-zk.sh | tail -1)
#   works.  Standalone: "127.0.0.1:2181".  Ensemble and --ensemble-member:
#   "127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283".
#
#   Idempotent: if the server(s) already serve (4lw "srvr" shows "Mode:"), nothing is
#   started and the connect string is printed.  Stop with scripts/stop-zk.sh (same flags).
#   Standalone servers (one per port) and the ensemble can run at the same time.
#
# Environment:
#   ZK_PORT            standalone client port                      (default 2181)
#   ZK_ENSEMBLE        ensemble size; >=2 means ensemble mode even without --ensemble
#                      (default for --ensemble: 3)
#   ZK_ENSEMBLE_BASE   first ensemble client port                  (default 2281)
#   ZK_WORKDIR         root of all server dirs        (default ${TMPDIR:-/tmp}/zklock-zk)
#   ZK_START_TIMEOUT   seconds to wait until the server(s) serve   (default 60)
#   ZK_HEAP            JVM max heap per server                     (default 256m)
#   ZK_LOG_LEVEL       log4j root level: WARN, INFO, DEBUG ...     (default INFO)
#   ZK_JVM_OPTS        extra JVM options (word-split)
#   JAVA               java binary (default $JAVA_HOME/bin/java, else java on PATH)
#
# Layout (everything throwaway, never under /var):
#   $ZK_WORKDIR/.zklock-zk                       marker: directory was created by this script
#   $ZK_WORKDIR/<port>/                          standalone server on client port <port>
#       zoo.cfg  log4j.properties  data/  datalog/  server.log  zk.pid  .lock
#   $ZK_WORKDIR/ensemble/                        the ensemble (.lock lives here)
#   $ZK_WORKDIR/ensemble/<id>/                   member <id> = 1..N
#       zoo.cfg  log4j.properties  data/myid  datalog/  server.log  zk.pid
#
# Ports (ensemble, i = id-1, B = ZK_ENSEMBLE_BASE):
#   client B+i (2281..2283), quorum B+100+i (2381..2383), election B+200+i (2481..2483),
#   all bound to 127.0.0.1 ("server.<id>=127.0.0.1:<quorum>:<election>").
#
# Server settings: tickTime=200 (minSessionTimeout=400ms, maxSessionTimeout=60000ms),
#   initLimit=25/syncLimit=10 ticks (5 s/2 s), forceSync=no, preAllocSize=4 MB,
#   maxClientCnxns=0, 4lw.commands.whitelist=*, admin server off, reconfigEnabled=false;
#   ensemble members also leaderConnectDelayDuringRetryMs=300 (see gen_member_cfg).
#   An already running server keeps its config; after changing settings stop it first
#   (start-zk.sh refuses to start a member whose running config differs).
#
# Process: the JVM runs org.apache.zookeeper.server.quorum.QuorumPeerMain directly with
#   the Debian jars (zookeeper.jar's manifest Class-Path pulls in its dependencies; the
#   slf4j->log4j 1.2 binding is added explicitly), detached with setsid/nohup; its
#   stdout/stderr and log4j output go to server.log.  The 4lw probe sends exactly 4 bytes
#   via bash /dev/tcp ("echo srvr | nc" sends a 5th byte, which makes the server reset
#   the connection and occasionally loses the answer).
set -euo pipefail

ZK_PORT="${ZK_PORT:-2181}"
ZK_ENSEMBLE_BASE="${ZK_ENSEMBLE_BASE:-2281}"
ZK_WORKDIR="${ZK_WORKDIR:-${TMPDIR:-/tmp}/zklock-zk}"
ZK_START_TIMEOUT="${ZK_START_TIMEOUT:-60}"
ZK_HEAP="${ZK_HEAP:-256m}"
ZK_LOG_LEVEL="${ZK_LOG_LEVEL:-INFO}"
ZK_JVM_OPTS="${ZK_JVM_OPTS:-}"
JAVA_DIR=/usr/share/java
ZK_JAR="$JAVA_DIR/zookeeper.jar"

log() { printf 'start-zk: %s\n' "$*" >&2; }
die() { printf 'start-zk: ERROR: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; }

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

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

# ---------------------------------------------------------------- arguments
mode=standalone
member=""
ens_size=3
if [[ -n "${ZK_ENSEMBLE:-}" && "${ZK_ENSEMBLE}" != 0 ]]; then
    is_uint "$ZK_ENSEMBLE" && ((10#$ZK_ENSEMBLE >= 2 && 10#$ZK_ENSEMBLE <= 99)) ||
        die "ZK_ENSEMBLE must be an integer 2..99 (or 0/unset for standalone), got '$ZK_ENSEMBLE'"
    mode=ensemble
    ens_size=$((10#$ZK_ENSEMBLE))
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
        -h | --help) usage; exit 0 ;;
        *) usage; die "unknown argument: $1" ;;
    esac
    shift
done
is_uint "$ZK_PORT" && ((10#$ZK_PORT > 0 && 10#$ZK_PORT < 65536)) || die "bad ZK_PORT '$ZK_PORT'"
is_uint "$ZK_ENSEMBLE_BASE" && ((10#$ZK_ENSEMBLE_BASE > 0 && 10#$ZK_ENSEMBLE_BASE + 200 + ens_size < 65536)) ||
    die "bad ZK_ENSEMBLE_BASE '$ZK_ENSEMBLE_BASE'"
is_uint "$ZK_START_TIMEOUT" || die "bad ZK_START_TIMEOUT '$ZK_START_TIMEOUT'"
ZK_PORT=$((10#$ZK_PORT))
ZK_ENSEMBLE_BASE=$((10#$ZK_ENSEMBLE_BASE))
ZK_START_TIMEOUT=$((10#$ZK_START_TIMEOUT))
if [[ $mode == member ]]; then
    is_uint "$member" && ((10#$member >= 1)) || die "bad ensemble member id '$member'"
    member=$((10#$member))
fi
[[ -n "$ZK_WORKDIR" && "$ZK_WORKDIR" != / ]] || die "bad ZK_WORKDIR '$ZK_WORKDIR'"

# ---------------------------------------------------------------- installation
java_bin() {
    if [[ -n "${JAVA:-}" ]]; then
        printf '%s\n' "$JAVA"
    elif [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
        printf '%s\n' "$JAVA_HOME/bin/java"
    else
        command -v java || true
    fi
}

ensure_installed() {
    local pkgs=()
    if [[ ! -d /usr/share/zookeeper || ! -f "$ZK_JAR" ]]; then
        pkgs+=(zookeeper)
    fi
    if [[ -z "$(java_bin)" ]]; then
        pkgs+=(default-jre-headless)
    fi
    ((${#pkgs[@]})) || return 0

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
    [[ -f "$ZK_JAR" ]] || die "$ZK_JAR still missing after installing zookeeper"
    [[ -n "$(java_bin)" ]] || die "java still missing after installing default-jre-headless"
}

classpath() {
    # zookeeper.jar's manifest Class-Path lists zookeeper-jute, slf4j-api, netty, jetty,
    # metrics, snappy, commons-cli, jackson ... (all /usr/share/java).  What it lacks is
    # an slf4j binding; without one the server logs nothing at all.
    local cp="$ZK_JAR"
    if [[ -f "$JAVA_DIR/slf4j-log4j12.jar" && -f "$JAVA_DIR/log4j-1.2.jar" ]]; then
        cp+=":$JAVA_DIR/slf4j-log4j12.jar:$JAVA_DIR/log4j-1.2.jar"
    elif [[ -f "$JAVA_DIR/slf4j-simple.jar" ]]; then
        cp+=":$JAVA_DIR/slf4j-simple.jar"
    fi
    printf '%s\n' "$cp"
}

# ---------------------------------------------------------------- helpers
# four-letter-word command; prints the answer, fails if nothing could be sent
zk_4lw() { # host port word
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1; printf "%s" "$3" >&3; cat <&3' \
        _ "$1" "$2" "$3" 2>/dev/null
}

# prints the server's mode (standalone/leader/follower/observer), or nothing
zk_mode() { # port
    zk_4lw 127.0.0.1 "$1" srvr | sed -n 's/^Mode: *//p' | tr -d '\r' || true
}

port_in_use() { # port
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

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

tail_log() { # dir
    if [[ -f "$1/server.log" ]]; then
        log "---- last lines of $1/server.log ----"
        { grep -v 'Processing srvr command' "$1/server.log" || true; } | tail -n 40 >&2
        log "----"
    fi
}

# the .zklock-zk marker allows stop-zk.sh --clean to delete a directory; the root only
# gets it if this script creates it (or finds it empty), never a pre-existing dir
mark_workdir() {
    if [[ ! -d "$ZK_WORKDIR" ]] || [[ -z "$(ls -A "$ZK_WORKDIR")" ]]; then
        mkdir -p "$ZK_WORKDIR"
        : >"$ZK_WORKDIR/.zklock-zk"
    fi
}

# take an exclusive lock for <dir> (released when the script exits; fd 9 is closed in
# the server's environment so the JVM does not inherit it)
lock_dir() { # dir
    mkdir -p "$1"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$1/.lock"
        flock -w 120 9 || die "could not lock $1/.lock"
    fi
}

write_log4j() { # dir
    cat >"$1/log4j.properties" <<EOF
# generated by start-zk.sh; stdout of the JVM is redirected to server.log
log4j.rootLogger=$ZK_LOG_LEVEL, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Target=System.out
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
EOF
}

# common zoo.cfg settings
cfg_common() { # dir client_port
    cat <<EOF
# generated by start-zk.sh -- throwaway server for zklock tests
tickTime=200
initLimit=25
syncLimit=10
minSessionTimeout=400
maxSessionTimeout=60000
dataDir=$1/data
dataLogDir=$1/datalog
clientPort=$2
clientPortAddress=127.0.0.1
maxClientCnxns=0
forceSync=no
preAllocSize=4096
autopurge.purgeInterval=0
4lw.commands.whitelist=*
admin.enableServer=false
reconfigEnabled=false
standaloneEnabled=true
EOF
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

launch() { # dir
    local dir="$1" java cp i pid=""
    java="$(java_bin)"
    cp="$(classpath)"
    mkdir -p "$dir/data" "$dir/datalog"
    write_log4j "$dir"
    rm -f "$dir/zk.pid"
    printf '==== %s start-zk.sh: starting server (%s) ====\n' "$(date '+%F %T')" "$dir/zoo.cfg" \
        >>"$dir/server.log"
    local -a cmd=("$java" "-Xmx$ZK_HEAP" -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError
        -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true
        -Dzookeeper.admin.enableServer=false -Dzookeeper.jmx.log4j.disable=true
        "-Dzookeeper.log.dir=$dir" "-Dlog4j.configuration=file:$dir/log4j.properties"
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=${ZK_LOG_LEVEL,,}")
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
        cd "$dir"
        exec "${detach[@]}" bash -c 'echo $$ >"$1.tmp" && mv -f "$1.tmp" "$1" && shift && exec "$@"' \
            _ "$dir/zk.pid" "${cmd[@]}" </dev/null >>"$dir/server.log" 2>&1 9>&-
    ) &
    for ((i = 0; i < 200; i++)); do
        if pid="$(running_pid "$dir")"; then
            log "started server $dir/zoo.cfg (pid $pid)"
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

# ---------------------------------------------------------------- standalone
standalone() {
    local port="$ZK_PORT" dir="$ZK_WORKDIR/$ZK_PORT" m start
    start="$(now_ms)"
    m="$(zk_mode "$port")"
    if [[ -n "$m" ]]; then
        log "a ZooKeeper server already serves on 127.0.0.1:$port (Mode: $m)"
        printf '127.0.0.1:%s\n' "$port"
        return 0
    fi
    ensure_installed
    mark_workdir
    lock_dir "$dir"
    : >"$dir/.zklock-zk"
    if ! running_pid "$dir" >/dev/null; then
        cfg_common "$dir" "$port" >"$dir/zoo.cfg.new"
        install_cfg "$dir"
        port_in_use "$port" && die "port $port is in use by something that is not a serving ZooKeeper"
        launch "$dir"
    else
        log "server in $dir is already starting (pid $(running_pid "$dir")); waiting"
    fi
    while :; do
        m="$(zk_mode "$port")"
        [[ -z "$m" ]] || break
        if ! running_pid "$dir" >/dev/null; then
            rm -f "$dir/zk.pid"
            tail_log "$dir"
            die "server in $dir exited during startup"
        fi
        if timed_out "$start"; then
            tail_log "$dir"
            die "server on 127.0.0.1:$port not serving after ${ZK_START_TIMEOUT}s"
        fi
        sleep 0.2
    done
    log "serving on 127.0.0.1:$port (Mode: $m) after $(elapsed "$start"); log: $dir/server.log"
    printf '127.0.0.1:%s\n' "$port"
}

# ---------------------------------------------------------------- ensemble
ens_dir="$ZK_WORKDIR/ensemble"
client_port() { echo $((ZK_ENSEMBLE_BASE + $1 - 1)); }
quorum_port() { echo $((ZK_ENSEMBLE_BASE + 100 + $1 - 1)); }
election_port() { echo $((ZK_ENSEMBLE_BASE + 200 + $1 - 1)); }

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

gen_member_cfg() { # id
    local id="$1" dir="$ens_dir/$1" j
    mkdir -p "$dir/data" "$dir/datalog"
    : >"$dir/.zklock-zk"
    printf '%s\n' "$id" >"$dir/data/myid"
    {
        cfg_common "$dir" "$(client_port "$id")"
        echo "quorumListenOnAllIPs=false"
        # A follower gives up connecting to a freshly elected leader after 5 tries spaced
        # by this delay (default 100 ms); when the new leader is slow to open its quorum
        # port, the leader then waits initLimit for a quorum before re-electing, i.e.
        # failover takes seconds instead of <1 s.  300 ms gives it ~1.5 s.
        echo "leaderConnectDelayDuringRetryMs=300"
        for ((j = 1; j <= ens_size; j++)); do
            echo "server.$j=127.0.0.1:$(quorum_port "$j"):$(election_port "$j")"
        done
    } >"$dir/zoo.cfg.new"
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

ensemble() {
    local start id ids
    start="$(now_ms)"
    if ensemble_serves; then
        log "ensemble already serving"
        connect_string
        return 0
    fi
    ensure_installed
    mark_workdir
    lock_dir "$ens_dir"
    : >"$ens_dir/.zklock-zk"
    mapfile -t ids < <(member_ids)
    for id in "${ids[@]}"; do ensure_member "$id" 0; done
    wait_members "$start" "${ids[@]}"
    for id in "${ids[@]}"; do
        log "member $id: 127.0.0.1:$(member_port "$id") Mode: $(zk_mode "$(member_port "$id")")"
    done
    log "ensemble serving after $(elapsed "$start"); logs: $ens_dir/<id>/server.log"
    connect_string
}

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
    mark_workdir
    lock_dir "$ens_dir"
    : >"$ens_dir/.zklock-zk"
    ensure_member "$id" 1
    wait_members "$start" "$id"
    log "member $id serving on 127.0.0.1:$port (Mode: $(zk_mode "$port")) after $(elapsed "$start")"
    connect_string
}

case "$mode" in
    standalone) standalone ;;
    ensemble) ensemble ;;
    member) ensemble_member ;;
esac
