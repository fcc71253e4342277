#!/usr/bin/env bash
# Runs the whole test suite against real ZooKeeper servers on loopback, installing what the
# tests need on a fresh Debian machine first:
#   - ZooKeeper (scripts/start-zk.sh installs Debian's zookeeper package when missing);
#   - a JDK and Apache Curator's jars for the interop tests (tests/interop.rs);
#   - openssl for the certificates of the TLS test server (tests/secure_servers.rs).
# Extra arguments go to `cargo test` (e.g. scripts/test.sh --test mutex).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in openjdk-17-jdk-headless libcurator-recipes-java libcurator-framework-java \
    libcurator-client-java libzookeeper-java libguava-java libslf4j-java openssl; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    echo "test.sh: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

scripts/start-zk.sh >/dev/null
cargo test --all-features "$@"
