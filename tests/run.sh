#!/usr/bin/env bash
# The whole test suite: installs the stock Socket.IO / AG-UI clients the
# black-box tests drive, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f tests/clients/install.sh ]; then
  bash tests/clients/install.sh
fi
cargo test --workspace --all-targets "$@"
