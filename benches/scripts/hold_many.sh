#!/usr/bin/env bash
# Socket.IO connections held at once across SERVERS server processes, each
# with CONNS connections from a load process of its own (own loopback source
# address 127.0.N.1, so each has its own ephemeral ports): one process may
# not open more files than its limit (`ulimit -n`), so many processes share
# the total. Prints each server's line of `sioload hold` and the total.
#
# Usage: benches/scripts/hold_many.sh BINARY SERVERS CONNS [HOLD_SECS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: hold_many.sh BINARY SERVERS CONNS [HOLD_SECS]}
servers=${2:?}
conns=${3:?}
hold=${4:-40}
sioload="$root/target/release/sioload"
out=$(mktemp -d)
pids=()
for n in $(seq 1 "$servers"); do
  port=$((7340 + n))
  # Pings every 20 s, 60 s to answer: the load processes answer every ping
  # while they are still opening thousands of connections on a busy machine.
  env RUST_LOG=warn SERVER__PORT=$port SOCKETIO__PING_INTERVAL_MS=20000 \
    SOCKETIO__PING_TIMEOUT_MS=60000 SOCKETIO__MAX_SESSIONS_PER_IP=0 "$binary" serve >/dev/null 2>&1 &
  pids+=($!)
done
for n in $(seq 1 "$servers"); do wait_for_server $((7340 + n)) 20; done
loaders=()
for n in $(seq 1 "$servers"); do
  "$sioload" hold --url "http://127.0.0.1:$((7340 + n))" --conns "$conns" \
    --sources "127.0.$n.1" --pid "${pids[$((n - 1))]}" --hold-secs "$hold" \
    >"$out/$n.json" 2>/dev/null &
  loaders+=($!)
done
for pid in "${loaders[@]}"; do wait "$pid" || true; done
kill "${pids[@]}"
wait 2>/dev/null || true
cat "$out"/*.json
awk -F'"held":' '{ split($2, a, ","); held += a[1] } END { print "total held:", held }' "$out"/*.json
rm -rf "$out"
