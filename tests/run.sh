#!/usr/bin/env bash
# The whole test suite: installs the stock Socket.IO / AG-UI clients the
# black-box tests drive, runs every test of the workspace, then builds the
# TypeScript client (clients/typescript) and runs its tests against the
# server binary just built.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f tests/clients/install.sh ]; then
  bash tests/clients/install.sh
fi
cargo test --workspace --all-targets "$@"

# The TypeScript client, installed from its lockfile. Its build also writes
# the playground's bundle (src/playground/assets/assistant-client.js).
(
  cd clients/typescript
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
    npm ci --no-audit --no-fund
  fi
  npm run build
  ASSISTANT_RUNTIME_BIN="$PWD/../../target/debug/assistant-runtime" npm test
)
