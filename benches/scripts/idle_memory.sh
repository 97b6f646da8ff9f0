#!/usr/bin/env bash
# Resident memory per idle session (10,000 sessions of one turn, after a
# warm-up of 50 sessions x 2 turns) and per idle Socket.IO connection
# (10,000 held 12 s), for each BINARY given, RUNS times in alternation so
# every build sees the same noise. Extra environment for the servers (an
# allocator option such as MIMALLOC_PURGE_DELAY=0) goes in SERVER_ENV.
#
# Usage: [SERVER_ENV="K=V ..."] benches/scripts/idle_memory.sh RUNS BINARY...
set -euo pipefail
source "$(dirname "$0")/common.sh"
runs=${1:?usage: idle_memory.sh RUNS BINARY...}
shift
sioload="$root/target/release/sioload"
port=${PORT:-7421}
read -r -a server_env <<<"${SERVER_ENV:-}"

# KiB per idle session of one fresh server.
sessions() {
  local binary=$1 pid
  env RUST_LOG=warn SERVER__PORT="$port" "${server_env[@]}" "$binary" serve >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$port" || { kill "$pid"; exit 1; }
  warm_up "$port"
  sleep 1
  "$loadgen" idle --url "http://127.0.0.1:$port" --pid "$pid" --sessions 10000 |
    awk '{ for (i = 1; i <= NF; i++) if ($i == "KiB" && $(i + 1) == "per") print $(i - 1) }'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

# KiB per held connection of one fresh server.
sockets() {
  local binary=$1 pid
  env RUST_LOG=warn SERVER__PORT="$port" SOCKETIO__PING_INTERVAL_MS=10000 \
    SOCKETIO__MAX_SESSIONS_PER_IP=0 "${server_env[@]}" "$binary" serve >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$port" || { kill "$pid"; exit 1; }
  sleep 1
  "$sioload" hold --url "http://127.0.0.1:$port" --conns 10000 --pid "$pid" --hold-secs 12 \
    2>/dev/null | sed -n 's/.*"closed_by_server":\([0-9]*\).*"kib_per_conn":\([0-9.]*\).*/\2 (closed \1)/p'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

for run in $(seq 1 "$runs"); do
  for binary in "$@"; do
    echo "run $run $binary: $(sessions "$binary") KiB per idle session, $(sockets "$binary") KiB per idle socket"
  done
done
