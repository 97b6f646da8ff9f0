#!/usr/bin/env bash
# Installs what tests/api/cors.rs and tests/api/playground.rs need: Debian's chromium (apt) when absent,
# playwright-core to drive it, and the page's bundle of the stock clients
# (@ag-ui/client, socket.io-client) built with esbuild. Idempotent: skipped
# when the bundle exists and package.json is unchanged since it was built.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q chromium
fi
stamp="$here/dist/.package.json.sha256"
want="$(sha256sum "$here/package.json" "$here/page_entry.mjs" | sha256sum | cut -d' ' -f1)"
if [ -f "$here/dist/clients.js" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
npm install --prefix "$here" --no-audit --no-fund
node "$here/build.mjs"
echo "$want" > "$stamp"
