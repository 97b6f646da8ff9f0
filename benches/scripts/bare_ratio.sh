#!/usr/bin/env bash
# Turns per second of the server against the bare actix-web handler of
# `loadgen bare`, side by side: RUNS alternating pairs,
# each process fresh and warmed up with 50 sessions x 2 turns, then measured
# with 100 sessions x 10 turns x 40 rounds. Prints each pair's ratio and
# their median. Needs release builds (`cargo build --release --workspace`).
#
# Usage: benches/scripts/bare_ratio.sh SERVER_BINARY [RUNS] [pinned]
#   pinned: the server (or the bare handler) on CPU 0 and the load generator
#   on CPU 1 (taskset), so that neither takes the other's CPU time; on a
#   machine of two cores they otherwise share both, and how the scheduler
#   splits them is part of every figure. Either way a shared machine moves
#   single runs by a fifth or more: compare medians of alternating runs.
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: bare_ratio.sh SERVER_BINARY [RUNS] [pinned]}
runs=${2:-5}
pinning "${3:-}"
bare_port=7398
server_port=7400

# Runs the measured load against PORT and prints its turns per second.
measure() {
  local port=$1 pid=$2
  warm_up "$port" "${client_cpu[@]}"
  "${client_cpu[@]}" "$loadgen" turns --url "http://127.0.0.1:$port" --sessions 100 \
    --turns 10 --rounds 40 --pid "$pid" |
    awk '/^overall/ { for (i = 1; i <= NF; i++) if ($i == "turns/s,") print $(i - 1) }'
}

ratios=()
for run in $(seq 1 "$runs"); do
  "${server_cpu[@]}" "$loadgen" bare --port "$bare_port" >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$bare_port" || { kill "$pid"; exit 1; }
  bare=$(measure "$bare_port" "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true

  env RUST_LOG=warn SERVER__PORT="$server_port" "${server_cpu[@]}" "$binary" serve \
    >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$server_port" || { kill "$pid"; exit 1; }
  served=$(measure "$server_port" "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true

  ratio=$(awk -v s="$served" -v b="$bare" 'BEGIN { printf "%.3f", s / b }')
  ratios+=("$ratio")
  echo "run $run: bare $bare turns/s, server $served turns/s, ratio $ratio"
done
echo "median ratio of $runs runs: $(median "${ratios[@]}")"
