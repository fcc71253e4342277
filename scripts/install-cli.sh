#!/usr/bin/env bash
# install-cli.sh -- install the `zklock` command-line tool from this checkout.
#
#   scripts/install-cli.sh [--root DIR] [other `cargo install` options]
#
# The tool is the workspace's `zklock-cli` crate (cli/), so that library users never compile
# its dependencies; this script installs it with the checked-in Cargo.lock and fails if no
# binary was installed. From crates.io: `cargo install zklock-cli`.
# Shell completions and man pages come from the installed binary afterwards:
#   zklock completions bash > ~/.local/share/bash-completion/completions/zklock
#   zklock man --dir ~/.local/share/man/man1
set -euo pipefail
cd "$(dirname "$0")/.."

root=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --root) root="${args[i + 1]:-}" ;;
        --root=*) root="${args[i]#--root=}" ;;
    esac
done

cargo install --locked --path cli "$@"

bin="${root:-${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}}/bin/zklock"
if [[ ! -x "$bin" ]]; then
    echo "install-cli.sh: cargo reported success but $bin is missing" >&2
    exit 1
fi
echo "install-cli.sh: installed $("$bin" --version) as $bin"
