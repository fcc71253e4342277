#!/usr/bin/env bash
# start-zk.sh -- start throwaway ZooKeeper server(s) on loopback for zklock tests.
#
# Usage:
#   scripts/start-zk.sh                         standalone server on 127.0.0.1:${ZK_PORT:-2181}
#                                               (zklock's embedded server unless --version
#                                               names an Apache release: no JVM needed)
#   scripts/start-zk.sh --ensemble              3-member ensemble (ports 2281,2282,2283,
#                                               or those of ZK_ENSEMBLE_PORTS)
#   scripts/start-zk.sh --ensemble-member N     (re)start member N of the ensemble, using
#                                               its existing config/data, if it is not running
#   scripts/start-zk.sh --sasl                  standalone server that requires SASL (see below)
#   scripts/start-zk.sh --tls                   standalone server with a TLS client port
#   scripts/start-zk.sh --sasl --tls            both at once
#   scripts/start-zk.sh --version 3.6.3 ...     any of the above on another ZooKeeper release
#   scripts/start-zk.sh --help
#
#   The LAST line on stdout is the connect string (everything else goes to stderr), so
#       ZK=$(scripts/start-zk.sh | tail -1)
#   works.  Standalone: "127.0.0.1:2181".  Ensemble and --ensemble-member:
#   "127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283".  --tls: the secure port,
#   "127.0.0.1:3181" (ZK_SECURE_PORT).
#
# Releases (--version V or ZK_VERSION=V; scripts/lib/dist.sh says where the jars come from):
#   (default) embedded for a plain standalone server; 3.9.5 for --ensemble, --sasl, --tls
#   3.9.5    Apache's jars out of PyPI's pinned `pyspark` 4.3.0 sdist: downloaded
#            once with pip (456 MB; or taken from ZK_SDIST_DIR), checked against its pinned
#            sha256, and only the needed jars (~25 MB) kept in ZK_CACHE_DIR
#   3.6.3    the same out of pyspark 3.5.9
#   debian   Debian's zookeeper package (3.8.0 on Debian 12; installed when missing); 3.8.0
#            is the same
#   embedded zklock's own ZooKeeper-protocol server (the workspace's zklock-server binary,
#            built with cargo unless ZK_EMBEDDED_BIN names it; ZK_EMBEDDED_PROFILE=release
#            for an optimised build): standalone only, in memory, in the same dir layout
#            with zk.pid and server.log; --ensemble, --sasl, --tls and JVM options other
#            than -Dznode.container.checkIntervalMs are refused (scripts/lib/embedded.sh)
#   ZK_DIST=<apache-zookeeper-X-bin.tar.gz or its lib/ dir>: Apache's own jars instead
#   The log line "ZooKeeper X serving ..." names the release that runs, or "zklock-server V
#   (ZooKeeper X protocol) serving ..." the embedded server (whose `srvr` reads "Zookeeper
#   version: X-zklock-server-V, ...", release X first for the tools that parse it).  A server
#   already serving on the port is kept, with a warning if it runs another release or server.
#
# Secure variants (standalone only; each is a server of its own, in $ZK_WORKDIR/<port>-sasl,
# <port>-tls or <port>-sasl-tls, so give it a ZK_PORT that no plain server uses):
#   --sasl   authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider,
#            a JAAS file (<dir>/jaas.conf, passed with -Djava.security.auth.login.config)
#            whose Server section uses DigestLoginModule with two users:
#                alice / alice-secret      bob / bob-secret
#            and enforce.auth.enabled=true, enforce.auth.schemes=sasl (ZooKeeper >= 3.7; for
#            3.6, -Dzookeeper.sessionRequireClientSASLAuth=true):
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
#   Needs, besides the release's jars and a JRE: openssl (--tls; installed with apt-get if
#   missing) and keytool (--tls; part of the JRE).  Debian's zookeeper.jar manifest lacks
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
#   ZK_VERSION         the release (default: see Releases), as --version
#   ZK_DIST            Apache's tarball or jar dir to run instead of a pinned release
#   ZK_CACHE_DIR       where fetched jars are kept  (default ${XDG_CACHE_HOME:-~/.cache}/zklock)
#   ZK_SDIST_DIR       a dir already holding pyspark-<version>.tar.gz (checked, not fetched)
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
#   ensemble members also leaderConnectDelayDuringRetryMs=300 (see scripts/lib/zoo-cfg.sh).
#   An already running server keeps its config; after changing settings stop it first
#   (start-zk.sh refuses to start a member whose running config differs).
#
# Process: the JVM runs org.apache.zookeeper.server.quorum.QuorumPeerMain directly with
#   the release's jars (Debian: zookeeper.jar's manifest Class-Path pulls in its dependencies
#   and the slf4j->log4j 1.2 binding is added explicitly; other releases log through log4j 2
#   or, from a tarball, logback), detached with setsid/nohup; its
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

log() { printf 'start-zk: %s\n' "$*" >&2; }
die() { printf 'start-zk: ERROR: %s\n' "$*" >&2; exit 1; }
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/zk-lib.sh
source "$here/zk-lib.sh"
# shellcheck source=scripts/lib/zoo-cfg.sh
source "$here/lib/zoo-cfg.sh"
# shellcheck source=scripts/lib/dist.sh
source "$here/lib/dist.sh"
# shellcheck source=scripts/lib/server.sh
source "$here/lib/server.sh"
# shellcheck source=scripts/lib/secure.sh
source "$here/lib/secure.sh"
# shellcheck source=scripts/lib/ensemble.sh
source "$here/lib/ensemble.sh"
# shellcheck source=scripts/lib/embedded.sh
source "$here/lib/embedded.sh"

# ---------------------------------------------------------------- arguments
ens_size=3
if [[ -n "${ZK_ENSEMBLE:-}" && "${ZK_ENSEMBLE}" != 0 ]]; then
    if ! is_uint "$ZK_ENSEMBLE" || ((10#$ZK_ENSEMBLE < 2 || 10#$ZK_ENSEMBLE > 99)); then
        die "ZK_ENSEMBLE must be an integer 2..99 (or 0/unset for standalone), got '$ZK_ENSEMBLE'"
    fi
    ens_size=$((10#$ZK_ENSEMBLE))
fi
if [[ -n "${ZK_ENSEMBLE_PORTS:-}" ]]; then
    parse_ensemble_ports
    if [[ -n "${ZK_ENSEMBLE:-}" && "${ZK_ENSEMBLE}" != 0 ]] && ((ens_size != ${#ens_client_ports[@]})); then
        die "ZK_ENSEMBLE=$ZK_ENSEMBLE but ZK_ENSEMBLE_PORTS names ${#ens_client_ports[@]} members"
    fi
    ens_size=${#ens_client_ports[@]}
fi
parse_flags "" "$@"
# The default release: zklock's embedded server for a plain standalone server (no JVM, no
# download: a first lock needs only cargo); Apache's 3.9.5 for what only Apache serves (an
# ensemble, SASL, TLS). The test suite names its release (scripts/test.sh: 3.9.5).
if [[ -z "$zk_version_asked" && -z "${ZK_DIST:-}" ]]; then
    if [[ $mode == standalone ]] && ((!sasl && !tls)); then
        ZK_VERSION=embedded
    else
        ZK_VERSION=3.9.5
    fi
fi
zk_check_version
port_ok() { is_uint "$1" && ((10#$1 > 0 && 10#$1 < 65536)); }
port_ok "$ZK_PORT" || die "bad ZK_PORT '$ZK_PORT'"
if ! is_uint "$ZK_ENSEMBLE_BASE" || ((10#$ZK_ENSEMBLE_BASE <= 0 || 10#$ZK_ENSEMBLE_BASE + 200 + ens_size >= 65536)); then
    die "bad ZK_ENSEMBLE_BASE '$ZK_ENSEMBLE_BASE'"
fi
is_uint "$ZK_START_TIMEOUT" || die "bad ZK_START_TIMEOUT '$ZK_START_TIMEOUT'"
ZK_PORT=$((10#$ZK_PORT))
if ((sasl || tls)) && [[ $mode != standalone ]]; then
    die "--sasl and --tls start a standalone server; they cannot be combined with --ensemble or ZK_ENSEMBLE"
fi
ZK_SECURE_PORT="${ZK_SECURE_PORT:-$((ZK_PORT + 1000))}"
if ((tls)); then
    port_ok "$ZK_SECURE_PORT" || die "bad ZK_SECURE_PORT '$ZK_SECURE_PORT'"
    ZK_SECURE_PORT=$((10#$ZK_SECURE_PORT))
    ((ZK_SECURE_PORT != ZK_PORT)) || die "ZK_SECURE_PORT must differ from ZK_PORT"
    case "$ZK_TLS_CLIENT_AUTH" in
        need | want | none) ;;
        *) die "ZK_TLS_CLIENT_AUTH must be need, want or none, got '$ZK_TLS_CLIENT_AUTH'" ;;
    esac
fi
ZK_ENSEMBLE_BASE=$((10#$ZK_ENSEMBLE_BASE))
ZK_START_TIMEOUT=$((10#$ZK_START_TIMEOUT))
if [[ $mode == member ]]; then
    if ! is_uint "$member" || ((10#$member < 1)); then die "bad ensemble member id '$member'"; fi
    member=$((10#$member))
fi
check_workdir
ens_dir="$(ensemble_dir)"

if [[ -z "${ZK_DIST:-}" && $ZK_VERSION == embedded ]]; then
    embedded_standalone
    exit 0
fi
case "$mode" in
    standalone) if [[ -n "$variant" ]]; then secure_standalone; else standalone; fi ;;
    ensemble) ensemble ;;
    member) ensemble_member ;;
esac
