#!/usr/bin/env bash
# Installs the stock Socket.IO clients used by tests/api/socketio_protocol.rs:
# python-socketio into tests/clients/.venv and socket.io-client into
# tests/clients/node_modules. Idempotent: each half is skipped when present.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! "$here/.venv/bin/python" -c 'import socketio, websocket, requests' 2>/dev/null; then
    python3 -m venv "$here/.venv"
    "$here/.venv/bin/pip" install -q -r "$here/requirements.txt"
fi

if [ ! -f "$here/node_modules/socket.io-client/package.json" ]; then
    npm install --prefix "$here" --no-audit --no-fund
fi

# The AG-UI client (tests/api/agui.rs) has its own package.
bash "$here/agui/install.sh"

# Headless Chromium and playwright-core (tests/api/playground.rs), and the
# page bundle of the stock clients (tests/api/cors.rs).
bash "$here/browser/install.sh"
