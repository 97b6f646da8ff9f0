#!/usr/bin/env bash
# Installs what tests/api/playground.rs drives: Debian's chromium (apt) and
# playwright-core (npm) into tests/clients/browser/node_modules. Idempotent:
# each half is skipped when present (the npm half also when package.json is
# unchanged since the last install).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q chromium
fi

stamp="$here/node_modules/.package.json.sha256"
want="$(sha256sum "$here/package.json" | cut -d' ' -f1)"
if [ -d "$here/node_modules/playwright-core" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
npm install --prefix "$here" --no-audit --no-fund
echo "$want" > "$stamp"
