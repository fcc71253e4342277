#!/usr/bin/env bash
# start-zk.sh -- start throwaway ZooKeeper server(s) on loopback for zklock tests.
#
# Usage:
#   scripts/start-zk.sh                         standalone server on 127.0.0.1:${ZK_PORT:-2181}
#   scripts/start-zk.sh --ensemble              3-member ensemble (ports 2281,2282,2283,
#                                               or those of ZK_ENSEMBLE_PORTS)
#   scripts/start-zk.sh --ensemble-member N     (re)start member N of the ensemble, using
#                                               its existing config/data, if it is not running
#   scripts/start-zk.sh --sasl                  standalone server that requires SASL (see below)
#   scripts/start-zk.sh --tls                   standalone server with a TLS client port
#   scripts/start-zk.sh --sasl --tls            both at once
#   scripts/start-zk.sh --help
#
#   The LAST line on stdout is the connect string (everything else goes to stderr), so
#       ZK=$(scripts/start-zk.sh | tail -1)
#   works.  Standalone: "127.0.0.1:2181".  Ensemble and --ensemble-member:
#   "127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283".  --tls: the secure port,
#   "127.0.0.1:3181" (ZK_SECURE_PORT).
#
# Secure variants (standalone only; each is a server of its own, in $ZK_WORKDIR/<port>-sasl,
# <port>-tls or <port>-sasl-tls, so give it a ZK_PORT that no plain server uses):
#   --sasl   authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider,
#            a JAAS file (<dir>/jaas.conf, passed with -Djava.security.auth.login.config)
#            whose Server section uses DigestLoginModule with two users:
#                alice / alice-secret      bob / bob-secret
#            and enforce.auth.enabled=true, enforce.auth.schemes=sasl (ZooKeeper >= 3.7):
#            wrong credentials close the session at the SASL handshake
#            (SESSIONCLOSEDREQUIRESASLAUTH, an AuthFailed for clients) instead of leaving an
#            unauthenticated session, and a session without SASL is closed the same way at
#            its first request.  (An empty user name makes ZooKeeper 3.8's DIGEST-MD5 server
#            throw and drop the connection without an answer.)  Clients: SASL DIGEST-MD5
#            (zklock: feature `sasl`, ClientBuilder::sasl_digest_md5("alice", "alice-secret")).
#   --tls    serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory,
#            secureClientPort=ZK_SECURE_PORT on 127.0.0.1, ssl.keyStore.* / ssl.trustStore.*
#            (PKCS12) and ssl.clientAuth=ZK_TLS_CLIENT_AUTH (default need: clients must show
#            a certificate signed by the test CA).  The plain clientPort (ZK_PORT) stays open
#            on 127.0.0.1 for four-letter-word probes.  Generated once with openssl and
#            keytool (kept while the files exist) into the server's dir:
#                ca.pem  ca-key.pem           test CA (the server's truststore holds it)
#                server.pem  server-key.pem   server cert, CN=localhost, SAN IP:127.0.0.1,
#                                             DNS:localhost; keystore.p12 / truststore.p12
#                client.pem  client-key.pem   client cert signed by the CA, CN=zklock-client
#                other-ca.pem                 an unrelated CA, for "untrusted server" tests
#            The directory is printed on stderr ("TLS material: <dir>").  zklock: feature
#            `tls`, ClientBuilder::tls(ca.pem).tls_identity(client.pem, client-key.pem).
#   Needs, besides zookeeper and a JRE: openssl (--tls; installed like zookeeper if missing)
#   and keytool (--tls; part of the JRE).  Debian's zookeeper.jar manifest lacks
#   netty-codec, which the Netty TLS handler needs: --tls adds it to the class path.
#   A secure variant already running is reused only if it runs with the configuration it
#   would be given now (else: stop it first); a plain server on its port is an error.
#
#   Idempotent: if the server(s) already serve (4lw "srvr" shows "Mode:"), nothing is
#   started and the connect string is printed.  Stop with scripts/stop-zk.sh (same flags).
#   Standalone servers (one per port) and the ensemble can run at the same time.
#
# Environment:
#   ZK_PORT            standalone client port                      (default 2181)
#   ZK_SECURE_PORT     --tls: TLS client port                      (default ZK_PORT+1000)
#   ZK_TLS_CLIENT_AUTH --tls: ssl.clientAuth: need, want or none   (default need)
#   ZK_ENSEMBLE        ensemble size; >=2 means ensemble mode even without --ensemble
#                      (default for --ensemble: 3)
#   ZK_ENSEMBLE_BASE   first ensemble client port                  (default 2281)
#   ZK_ENSEMBLE_PORTS  the ensemble's ports, one client:quorum:election triple per member,
#                      comma-separated (e.g. "41001:41002:41003,41004:...,..."); overrides
#                      ZK_ENSEMBLE_BASE and sets the size.  Such an ensemble lives in
#                      $ZK_WORKDIR/ensemble-<client port of member 1>, so ensembles on other
#                      ports never share a dir.  Pass the same value to every start-zk.sh and
#                      stop-zk.sh call for it (the tests pick free ports and do).
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
#   $ZK_WORKDIR/<port>-sasl/, <port>-tls/, <port>-sasl-tls/   secure variants: the same,
#       plus jaas.conf (--sasl) and the TLS files listed above (--tls)
#   $ZK_WORKDIR/ensemble/                        the ensemble (.lock lives here);
#                                                ensemble-<port>/ with ZK_ENSEMBLE_PORTS
#   $ZK_WORKDIR/ensemble/<id>/                   member <id> = 1..N
#       zoo.cfg  log4j.properties  data/myid  datalog/  server.log  zk.pid
#
# Ports (ensemble, i = id-1, B = ZK_ENSEMBLE_BASE):
#   client B+i (2281..2283), quorum B+100+i (2381..2383), election B+200+i (2481..2483),
#   or the triples of ZK_ENSEMBLE_PORTS; all bound to 127.0.0.1
#   ("server.<id>=127.0.0.1:<quorum>:<election>").
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
ZK_TLS_CLIENT_AUTH="${ZK_TLS_CLIENT_AUTH:-need}"
JAVA_DIR=/usr/share/java
ZK_JAR="$JAVA_DIR/zookeeper.jar"

log() { printf 'start-zk: %s\n' "$*" >&2; }
die() { printf 'start-zk: ERROR: %s\n' "$*" >&2; exit 1; }


# shellcheck source=scripts/zk-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/zk-lib.sh"

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
sasl=0
tls=0
if [[ -n "${ZK_ENSEMBLE:-}" && "${ZK_ENSEMBLE}" != 0 ]]; then
    is_uint "$ZK_ENSEMBLE" && ((10#$ZK_ENSEMBLE >= 2 && 10#$ZK_ENSEMBLE <= 99)) ||
        die "ZK_ENSEMBLE must be an integer 2..99 (or 0/unset for standalone), got '$ZK_ENSEMBLE'"
    mode=ensemble
    ens_size=$((10#$ZK_ENSEMBLE))
fi
if [[ -n "${ZK_ENSEMBLE_PORTS:-}" ]]; then
    parse_ensemble_ports
    if [[ -n "${ZK_ENSEMBLE:-}" && "${ZK_ENSEMBLE}" != 0 ]] && ((ens_size != ${#ens_client_ports[@]})); then
        die "ZK_ENSEMBLE=$ZK_ENSEMBLE but ZK_ENSEMBLE_PORTS names ${#ens_client_ports[@]} members"
    fi
    ens_size=${#ens_client_ports[@]}
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
        --sasl) sasl=1 ;;
        --tls) tls=1 ;;
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
if ((sasl || tls)) && [[ $mode != standalone ]]; then
    die "--sasl and --tls start a standalone server; they cannot be combined with --ensemble or ZK_ENSEMBLE"
fi
ZK_SECURE_PORT="${ZK_SECURE_PORT:-$((ZK_PORT + 1000))}"
if ((tls)); then
    is_uint "$ZK_SECURE_PORT" && ((10#$ZK_SECURE_PORT > 0 && 10#$ZK_SECURE_PORT < 65536)) ||
        die "bad ZK_SECURE_PORT '$ZK_SECURE_PORT'"
    ZK_SECURE_PORT=$((10#$ZK_SECURE_PORT))
    ((ZK_SECURE_PORT != ZK_PORT)) || die "ZK_SECURE_PORT must differ from ZK_PORT"
    case "$ZK_TLS_CLIENT_AUTH" in
        need | want | none) ;;
        *) die "ZK_TLS_CLIENT_AUTH must be need, want or none, got '$ZK_TLS_CLIENT_AUTH'" ;;
    esac
fi
# the secure variants' directory suffix: <port>-sasl, <port>-tls, <port>-sasl-tls
variant=""
((sasl)) && variant+="-sasl"
((tls)) && variant+="-tls"
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
    if ((tls)) && ! command -v openssl >/dev/null 2>&1; then
        pkgs+=(openssl)
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
    ((!tls)) || command -v openssl >/dev/null 2>&1 || die "openssl still missing after installing it"
}

# keytool of the JRE that runs the server (every JRE has one, headless ones too)
keytool_bin() {
    local java dir
    java="$(java_bin)"
    if [[ -n "$java" ]]; then
        dir="$(dirname "$(readlink -f "$java")")"
        if [[ -x "$dir/keytool" ]]; then
            printf '%s\n' "$dir/keytool"
            return 0
        fi
    fi
    command -v keytool || true
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
    # --tls (Netty with TLS): Debian's manifest lacks netty-codec, which netty-handler's
    # SslHandler needs (NoClassDefFoundError: io/netty/handler/codec/ByteToMessageDecoder
    # on every connection otherwise), and netty-resolver.
    if ((tls)); then
        local jar
        for jar in netty-codec netty-resolver; do
            [[ -f "$JAVA_DIR/$jar.jar" ]] && cp+=":$JAVA_DIR/$jar.jar"
        done
    fi
    printf '%s\n' "$cp"
}

# ---------------------------------------------------------------- helpers
# (zk_4lw, zk_mode, port_in_use and lock_dir are in zk-lib.sh)

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

# ---------------------------------------------------------------- secure variants
# Password of the throwaway PKCS12 key and trust stores (test material only).
TLS_STORE_PASSWORD=zklock-test
TLS_FILES=(ca.pem ca-key.pem server.pem server-key.pem client.pem client-key.pem other-ca.pem
    keystore.p12 truststore.p12)

# JAAS login configuration of the --sasl server: SASL DIGEST-MD5 users alice and bob
write_jaas() { # dir
    cat >"$1/jaas.conf.new" <<'EOF'
// generated by start-zk.sh: SASL DIGEST-MD5 users of the throwaway --sasl server
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_alice="alice-secret"
    user_bob="bob-secret";
};
EOF
    if [[ -f "$1/jaas.conf" ]] && cmp -s "$1/jaas.conf.new" "$1/jaas.conf"; then
        rm -f "$1/jaas.conf.new"
    else
        mv -f "$1/jaas.conf.new" "$1/jaas.conf"
    fi
}

# Generates the TLS material of a --tls server in <dir> unless all of it is there: a CA, a
# server certificate (SAN IP:127.0.0.1, DNS:localhost) in keystore.p12, the CA in
# truststore.p12, a client certificate, and an unrelated CA.  EC P-256 keys, valid 10 years.
gen_tls() { # dir
    local dir="$1" f keytool tmp
    local -a missing=()
    for f in "${TLS_FILES[@]}"; do
        [[ -s "$dir/$f" ]] || missing+=("$f")
    done
    if ((${#missing[@]} == 0)); then
        log "reusing the TLS material in $dir"
        return 0
    fi
    if running_pid "$dir" >/dev/null; then
        die "TLS file(s) ${missing[*]} missing in $dir while its server runs; stop it first (scripts/stop-zk.sh with the same flags)"
    fi
    command -v openssl >/dev/null 2>&1 || die "--tls needs openssl (Debian package openssl)"
    keytool="$(keytool_bin)"
    [[ -n "$keytool" ]] || die "--tls needs keytool (part of the JRE, e.g. Debian package default-jre-headless)"
    log "generating TLS material (CA, server and client certificates) in $dir"
    tmp="$(mktemp -d "$dir/.tls.XXXXXX")"
    if ! (
        set -euo pipefail
        umask 077
        cd "$tmp"
        cat >openssl.cnf <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = zklock test
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
        newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
        ca() { # name subject
            openssl req -config openssl.cnf -x509 -new "${newkey[@]}" -days 3650 -sha256 \
                -extensions ca -subj "$2" -keyout "$1-key.pem" -out "$1.pem"
        }
        leaf() { # name subject extensions
            openssl req -config openssl.cnf -new "${newkey[@]}" -subj "$2" \
                -keyout "$1-key.pem" -out "$1.csr"
            openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
                -days 3650 -sha256 -extfile openssl.cnf -extensions "$3" -out "$1.pem"
        }
        ca ca "/O=zklock tests/CN=zklock test CA"
        ca other-ca "/O=zklock tests/CN=zklock unrelated CA"
        leaf server "/O=zklock tests/CN=localhost" server
        leaf client "/O=zklock tests/CN=zklock-client" client
        openssl pkcs12 -export -name server -in server.pem -inkey server-key.pem \
            -certfile ca.pem -out keystore.p12 -passout "pass:$TLS_STORE_PASSWORD"
        "$keytool" -importcert -noprompt -alias zklock-test-ca -file ca.pem \
            -keystore truststore.p12 -storetype PKCS12 -storepass "$TLS_STORE_PASSWORD"
        # the JVM must be able to read the keystore openssl wrote: check before it is used
        "$keytool" -list -keystore keystore.p12 -storetype PKCS12 \
            -storepass "$TLS_STORE_PASSWORD" | grep -q PrivateKeyEntry
        openssl verify -CAfile ca.pem server.pem client.pem
        chmod 644 ca.pem other-ca.pem server.pem client.pem
    ) >"$tmp.log" 2>&1; then
        cat "$tmp.log" >&2
        rm -rf -- "$tmp" "$tmp.log"
        die "could not generate the TLS material in $dir"
    fi
    for f in "${TLS_FILES[@]}"; do
        mv -f "$tmp/$f" "$dir/$f"
    done
    rm -rf -- "$tmp" "$tmp.log"
}

# the zoo.cfg lines of the secure variants, after cfg_common
cfg_secure() { # dir
    local dir="$1"
    if ((sasl)); then
        cat <<EOF
# --sasl: SASL (DIGEST-MD5 users from $dir/jaas.conf) is required of every session
authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider
enforce.auth.enabled=true
enforce.auth.schemes=sasl
EOF
    fi
    if ((tls)); then
        cat <<EOF
# --tls: TLS client port (the plain clientPort above stays open for 4lw probes)
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
secureClientPort=$ZK_SECURE_PORT
secureClientPortAddress=127.0.0.1
ssl.keyStore.location=$dir/keystore.p12
ssl.keyStore.password=$TLS_STORE_PASSWORD
ssl.keyStore.type=PKCS12
ssl.trustStore.location=$dir/truststore.p12
ssl.trustStore.password=$TLS_STORE_PASSWORD
ssl.trustStore.type=PKCS12
ssl.clientAuth=$ZK_TLS_CLIENT_AUTH
authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
EOF
    fi
}

# extra JVM options for launch (the JAAS file of --sasl)
launch_jvm_opts=()

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

# the secure variants (--sasl, --tls): a standalone server in $ZK_WORKDIR/<port><variant>.
# Unlike the plain server, an already serving one is only accepted if it is this variant's
# own server with the configuration it would be given now.
secure_standalone() {
    local port="$ZK_PORT" dir="$ZK_WORKDIR/$ZK_PORT$variant" m start what="${variant#-}"
    local connect="127.0.0.1:$port"
    ((tls)) && connect="127.0.0.1:$ZK_SECURE_PORT"
    start="$(now_ms)"
    what="${what/-/+}"
    if [[ -n "$(zk_mode "$port")" ]] && ! running_pid "$dir" >/dev/null; then
        die "a ZooKeeper server that is not the --${what/+/ --} server of $dir already serves on 127.0.0.1:$port; pick another ZK_PORT"
    fi
    ensure_installed
    mark_workdir
    lock_dir "$dir" create
    : >"$dir/.zklock-zk"
    if ((sasl)); then
        write_jaas "$dir"
        launch_jvm_opts+=("-Djava.security.auth.login.config=$dir/jaas.conf")
    fi
    if ((tls)); then
        gen_tls "$dir"
    fi
    {
        cfg_common "$dir" "$port"
        cfg_secure "$dir"
    } >"$dir/zoo.cfg.new"
    install_cfg "$dir" # refuses if the running server has another configuration
    if ! running_pid "$dir" >/dev/null; then
        port_in_use "$port" && die "port $port is in use by something that is not this $what ZooKeeper"
        if ((tls)) && port_in_use "$ZK_SECURE_PORT"; then
            die "secure port $ZK_SECURE_PORT is in use (set ZK_SECURE_PORT)"
        fi
        launch "$dir"
    elif [[ -n "$(zk_mode "$port")" ]] && { ((!tls)) || port_in_use "$ZK_SECURE_PORT"; }; then
        log "the $what server in $dir (pid $(running_pid "$dir")) already serves on 127.0.0.1:$port"
    else
        log "the $what server in $dir is already starting (pid $(running_pid "$dir")); waiting"
    fi
    while :; do
        m="$(zk_mode "$port")"
        if [[ -n "$m" ]] && { ((!tls)) || port_in_use "$ZK_SECURE_PORT"; }; then
            break
        fi
        if ! running_pid "$dir" >/dev/null; then
            rm -f "$dir/zk.pid"
            tail_log "$dir"
            die "server in $dir exited during startup"
        fi
        if timed_out "$start"; then
            tail_log "$dir"
            die "$what server on 127.0.0.1:$port not serving after ${ZK_START_TIMEOUT}s"
        fi
        sleep 0.2
    done
    log "$what server serving (Mode: $m) after $(elapsed "$start"); log: $dir/server.log"
    if ((sasl)); then
        log "SASL DIGEST-MD5 users: alice/alice-secret, bob/bob-secret ($dir/jaas.conf); sessions without SASL are refused"
    fi
    if ((tls)); then
        log "TLS on 127.0.0.1:$ZK_SECURE_PORT (ssl.clientAuth=$ZK_TLS_CLIENT_AUTH); the plain port 127.0.0.1:$port stays open for 4lw probes"
        log "TLS material: $dir (ca.pem, client.pem, client-key.pem, other-ca.pem)"
    fi
    printf '%s\n' "$connect"
}

# ---------------------------------------------------------------- ensemble
ens_dir="$(ensemble_dir)"
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
    lock_dir "$ens_dir" create
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
    lock_dir "$ens_dir" create
    : >"$ens_dir/.zklock-zk"
    ensure_member "$id" 1
    wait_members "$start" "$id"
    log "member $id serving on 127.0.0.1:$port (Mode: $(zk_mode "$port")) after $(elapsed "$start")"
    connect_string
}

case "$mode" in
    standalone) if [[ -n "$variant" ]]; then secure_standalone; else standalone; fi ;;
    ensemble) ensemble ;;
    member) ensemble_member ;;
esac
