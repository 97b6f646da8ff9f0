#!/usr/bin/env bash
# Installs the stock @ag-ui/client that tests/api/agui.rs drives. Idempotent:
# skipped when node_modules exists and package.json is unchanged since the
# last install (its hash is kept in node_modules/.package.json.sha256).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stamp="$here/node_modules/.package.json.sha256"
want="$(sha256sum "$here/package.json" | cut -d' ' -f1)"
if [ -d "$here/node_modules/@ag-ui/client" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
npm install --prefix "$here" --no-audit --no-fund
echo "$want" > "$stamp"
