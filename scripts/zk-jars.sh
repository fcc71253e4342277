#!/usr/bin/env bash
# zk-jars.sh -- print the directory holding a ZooKeeper release's jars (and its Curator's),
# fetching them first if needed (scripts/lib/dist.sh): for tests/interop.rs and anyone who
# wants a Java client of the same release.
#
# Usage:
#   scripts/zk-jars.sh [--version 3.9.5|3.6.3|3.8.0|debian] [--curator 5.9.0|5.4.0|2.13.0]
#
#   --version   the release (default ZK_VERSION, else 3.9.5); ZK_DIST is honoured as by
#               start-zk.sh
#   --curator   instead, the release whose jars carry this Curator: 5.9.0 (pyspark 4.3.0,
#               with ZooKeeper 3.9.5), 5.4.0 (Debian's libcurator-*-java, 3.8.0), 2.13.0
#               (pyspark 3.5.9, 3.6.3)
#
#   Prints two lines: the jar dir (/usr/share/java for Debian's), then the ZooKeeper release
#   in it.  Debian's jars must be installed already (scripts/test.sh does).
set -euo pipefail
log() { printf 'zk-jars: %s\n' "$*" >&2; }
die() { printf 'zk-jars: ERROR: %s\n' "$*" >&2; exit 1; }
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/zk-lib.sh
source "$here/zk-lib.sh" # usage
# shellcheck source=scripts/lib/dist.sh
source "$here/lib/dist.sh"

while (($#)); do
    case "$1" in
        --version) ZK_VERSION="${2:?--version needs a release}"; shift ;;
        --curator)
            case "${2:?--curator needs a version}" in
                5.9.0) ZK_VERSION=3.9.5 ;;
                5.4.0) ZK_VERSION=debian ;;
                2.13.0) ZK_VERSION=3.6.3 ;;
                *) die "no pinned jars carry Curator '$2': give 5.9.0, 5.4.0 or 2.13.0" ;;
            esac
            unset ZK_DIST
            shift
            ;;
        -h | --help) usage; exit 0 ;;
        *) usage; die "unknown argument: $1" ;;
    esac
    shift
done
dir="$(zk_jar_dir)"
[[ -f "$dir/zookeeper.jar" || -n "$(ls "$dir"/zookeeper-[0-9]*.jar 2>/dev/null)" ]] ||
    die "no ZooKeeper jars in $dir (Debian: apt-get install zookeeper libcurator-recipes-java)"
printf '%s\n%s\n' "$dir" "$(zk_release_of "$dir")"
