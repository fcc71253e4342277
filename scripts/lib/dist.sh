# shellcheck shell=bash
# The ZooKeeper releases the scripts run, and where their jars come from (sourced, not run;
# by start-zk.sh, nemesis.sh and zk-jars.sh; die and log come from the sourcing script).
#
#   ZK_VERSION=3.9.5   (the default) Apache's jars from the pinned PyPI sdist pyspark 4.3.0:
#                      ZooKeeper 3.9.5, Curator 5.9.0, netty 4.2.13, log4j 2 as slf4j binding
#   ZK_VERSION=3.6.3   the same from pyspark 3.5.9: ZooKeeper 3.6.3, Curator 2.13.0, netty 4.1
#   ZK_VERSION=debian  Debian's zookeeper package (3.8.0 in Debian 12) and its Curator 5.4.0
#                      (libcurator-*-java), from /usr/share/java; "3.8.0" means the same
#   ZK_VERSION=embedded  no jars: zklock's own server, the workspace's zklock-server binary
#                      (start-zk.sh only, standalone; scripts/lib/embedded.sh)
#   ZK_DIST=PATH       instead, an Apache binary tarball (apache-zookeeper-X-bin.tar.gz) or a
#                      directory of its jars (its lib/, or the dir itself): every jar in it
#                      goes on the class path; ZK_VERSION, if set, must match its zookeeper jar
#
# A pyspark sdist is fetched once (`pip download --no-deps --no-binary :all:`), or taken from
# ZK_SDIST_DIR when that dir holds it, checked against its pinned sha256, and only the jars
# listed below are extracted into ZK_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/zklock);
# the sdist itself is not kept.  The cache survives between runs; a lock file makes
# concurrent first uses (the tests start servers in parallel) wait for one extraction.

zk_version_asked="${ZK_VERSION:-}" # set by parse_flags too (--version)
ZK_VERSION="${ZK_VERSION:-3.9.5}"
ZK_CACHE_DIR="${ZK_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/zklock}"
ZK_JAVA_DIR=/usr/share/java
ZK_JAR="$ZK_JAVA_DIR/zookeeper.jar"

# the pinned sdists: version -> "pyspark version, sha256 of its sdist, the jars only it has"
declare -A ZK_PYSPARK=(
    [3.9.5]="4.3.0 e8c517948eff7088a7aa07449aa8eafa4a15a8d50319de2525a6fd26622476c6 netty-codec-base failureaccess"
    [3.6.3]="3.5.9 ea27adc39ddac9413b8951e45aa748cbed6c785971b81386efc41938f6243d93"
)
# the jars taken from the sdist's deps/jars/ (names before the version): the server, its
# netty (4.2's netty-all is an empty aggregator, so the modules one by one), logging through
# log4j 2, and Curator with guava for the interop peer
ZK_SDIST_JARS=(zookeeper zookeeper-jute netty-handler netty-common netty-buffer netty-transport
    netty-codec netty-resolver netty-transport-native-unix-common netty-transport-classes-epoll
    slf4j-api log4j-api log4j-core log4j-slf4j2-impl metrics-core snappy-java commons-io
    commons-cli audience-annotations curator-client curator-framework curator-recipes guava)

# Normalises ZK_VERSION (3.8.0 -> debian) and dies on an unknown one.
zk_check_version() {
    if [[ -n "${ZK_DIST:-}" ]]; then
        return 0
    fi
    [[ $ZK_VERSION != 3.8.0 ]] || ZK_VERSION=debian
    [[ $ZK_VERSION == debian || $ZK_VERSION == embedded || -n "${ZK_PYSPARK[$ZK_VERSION]:-}" ]] ||
        die "unknown ZooKeeper release '$ZK_VERSION': give 3.9.5, 3.6.3, 3.8.0, debian or embedded, or name Apache's jars with ZK_DIST=<tarball or dir>"
}

# the jar dir of ZK_DIST (a tarball is unpacked into the cache once)
zk_dist_dir() {
    local dist="$ZK_DIST" key dir tmp
    if [[ -d "$dist" ]]; then
        [[ -d "$dist/lib" ]] && dist="$dist/lib"
        printf '%s\n' "$(cd "$dist" && pwd)"
        return 0
    fi
    [[ -f "$dist" ]] || die "ZK_DIST=$dist is neither a directory nor a file"
    key="$(basename "$dist" .tar.gz)-$(stat -c %s "$dist")"
    dir="$ZK_CACHE_DIR/dist/$key"
    if [[ ! -d "$dir" ]]; then
        mkdir -p "$ZK_CACHE_DIR/dist"
        tmp="$(mktemp -d "$dir.XXXXXX")"
        tar -xzf "$dist" -C "$tmp" --wildcards --no-anchored '*/lib/*.jar' ||
            die "could not unpack the jars of $dist (an Apache apache-zookeeper-X-bin.tar.gz?)"
        find "$tmp" -name '*.jar' -exec mv -t "$tmp" {} +
        mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp" # another run got there first
    fi
    printf '%s\n' "$dir"
}

# the pip to download with; installs python3-pip on a fresh Debian machine
zk_pip() {
    local p
    for p in pip3 pip; do
        if command -v "$p" >/dev/null 2>&1; then echo "$p"; return 0; fi
    done
    if ! python3 -m pip --version >/dev/null 2>&1; then
        log "installing python3-pip (apt-get) to fetch Apache's jars from PyPI ..."
        local sudo=()
        ((EUID == 0)) || sudo=(sudo)
        "${sudo[@]}" apt-get update >&2
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-pip >&2
    fi
    echo "python3 -m pip"
}

# the jar dir of a pinned release, fetched and extracted on first use
zk_pyspark_dir() { # version
    local pyspark sha dir sdist tmp got pip pattern extra
    read -r pyspark sha extra <<<"${ZK_PYSPARK[$1]}"
    dir="$ZK_CACHE_DIR/pyspark-$pyspark"
    [[ -f "$dir/jars/.complete" ]] && { printf '%s\n' "$dir/jars"; return 0; }
    mkdir -p "$dir"
    exec 8>"$dir/.lock"
    flock -w 900 8 || die "could not lock $dir/.lock"
    if [[ ! -f "$dir/jars/.complete" ]]; then
        tmp="$(mktemp -d "$dir/tmp.XXXXXX")"
        sdist="${ZK_SDIST_DIR:-/nonexistent}/pyspark-$pyspark.tar.gz"
        if [[ ! -f "$sdist" ]]; then
            pip="$(zk_pip)"
            log "downloading pyspark $pyspark's sdist (456 MB, once) for ZooKeeper $1's jars into $ZK_CACHE_DIR ..."
            # shellcheck disable=SC2086 # "python3 -m pip" is three words
            $pip download --quiet --no-deps --no-binary :all: "pyspark==$pyspark" -d "$tmp" >&2 ||
                { rm -rf "$tmp"; die "pip download pyspark==$pyspark failed"; }
            sdist="$tmp/pyspark-$pyspark.tar.gz"
        fi
        got="$(sha256sum "$sdist" | cut -d' ' -f1)"
        [[ $got == "$sha" ]] || { rm -rf "$tmp"; die "$sdist has sha256 $got, not the pinned $sha"; }
        local -a patterns=()
        # shellcheck disable=SC2086 # extra is a list of names
        for pattern in "${ZK_SDIST_JARS[@]}" $extra; do
            patterns+=("pyspark-$pyspark/deps/jars/$pattern-[0-9]*.jar")
        done
        log "extracting ${#patterns[@]} jars from $(basename "$sdist") ..."
        tar -xzf "$sdist" -C "$tmp" --wildcards "${patterns[@]}" ||
            { rm -rf "$tmp"; die "could not extract the jars from $sdist"; }
        rm -rf "$dir/jars"
        mv "$tmp/pyspark-$pyspark/deps/jars" "$dir/jars"
        rm -rf "$tmp"
        : >"$dir/jars/.complete"
    fi
    exec 8>&-
    printf '%s\n' "$dir/jars"
}

# the jar dir of ZK_VERSION / ZK_DIST (debian: /usr/share/java)
zk_jar_dir() {
    zk_check_version
    if [[ -n "${ZK_DIST:-}" ]]; then
        zk_dist_dir
    elif [[ $ZK_VERSION == embedded ]]; then
        die "ZK_VERSION=embedded is zklock's own server (zklock-server): it has no ZooKeeper jars"
    elif [[ $ZK_VERSION == debian ]]; then
        printf '%s\n' "$ZK_JAVA_DIR"
    else
        zk_pyspark_dir "$ZK_VERSION"
    fi
}

# the release a jar dir holds, from its zookeeper-X.jar (Debian: the package's version)
zk_release_of() { # jar dir
    local jar
    if [[ $1 == "$ZK_JAVA_DIR" ]]; then
        dpkg-query -W -f='${Version}' zookeeper 2>/dev/null | sed 's/-.*//'
        return 0
    fi
    for jar in "$1"/zookeeper-[0-9]*.jar; do
        [[ -f $jar ]] || continue
        jar="${jar##*/zookeeper-}"
        printf '%s\n' "${jar%.jar}"
        return 0
    done
    die "no zookeeper-<version>.jar in $1"
}

# The class path of org.apache.zookeeper.server.quorum.QuorumPeerMain from the jars of <dir>.
zk_classpath() { # jar dir, [tls: 1 adds what a TLS client port needs]
    local dir="$1" cp jar
    if [[ $dir != "$ZK_JAVA_DIR" ]]; then
        printf '%s/*\n' "$dir" # every jar: the extracted ones, or an Apache tarball's lib/
        return 0
    fi
    # Debian: zookeeper.jar's manifest Class-Path lists zookeeper-jute, slf4j-api, netty,
    # jetty, metrics, snappy, commons-cli, jackson ... (all /usr/share/java).  What it lacks is
    # an slf4j binding; without one the server logs nothing at all.
    cp="$ZK_JAR"
    if [[ -f "$ZK_JAVA_DIR/slf4j-log4j12.jar" && -f "$ZK_JAVA_DIR/log4j-1.2.jar" ]]; then
        cp+=":$ZK_JAVA_DIR/slf4j-log4j12.jar:$ZK_JAVA_DIR/log4j-1.2.jar"
    elif [[ -f "$ZK_JAVA_DIR/slf4j-simple.jar" ]]; then
        cp+=":$ZK_JAVA_DIR/slf4j-simple.jar"
    fi
    # TLS (Netty with TLS): Debian's manifest lacks netty-codec, which netty-handler's
    # SslHandler needs (NoClassDefFoundError: io/netty/handler/codec/ByteToMessageDecoder
    # on every connection otherwise), and netty-resolver.
    if [[ ${2:-0} == 1 ]]; then
        for jar in netty-codec netty-resolver; do
            [[ -f "$ZK_JAVA_DIR/$jar.jar" ]] && cp+=":$ZK_JAVA_DIR/$jar.jar"
        done
    fi
    printf '%s\n' "$cp"
}

# The JVM options that point each logging back end a release may bind slf4j to (log4j 1 for
# Debian's, log4j 2 for the sdists' jars, logback for Apache's tarballs) at <dir>'s config
# files, which write_log4j writes.
zk_log_opts() { # dir
    printf '%s\n' "-Dlog4j.configuration=file:$1/log4j.properties" \
        "-Dlog4j2.configurationFile=$1/log4j2.properties" "-Dlogback.configurationFile=$1/logback.xml"
}
