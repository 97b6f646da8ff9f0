#!/usr/bin/env bash
# Host action round trips per second against chat turns per second (the
# goal is at least 0.4), side by side: RUNS pairs, each load on a
# fresh server, `loadgen turns` then `loadgen roundtrips`, both 50 sessions x
# 20 x 30 rounds. Prints each pair's ratio and their median. Needs release
# builds (`cargo build --release --workspace`).
#
# Usage: benches/scripts/roundtrip_ratio.sh SERVER_BINARY [RUNS]
# A shared machine moves single runs by a tenth or more: compare medians.
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: roundtrip_ratio.sh SERVER_BINARY [RUNS]}
runs=${2:-5}
port=7401

# Serves a fresh process, runs load MODE against it, prints its rate.
measure() {
  local mode=$1 pid rate
  env RUST_LOG=warn SERVER__PORT="$port" "$binary" serve >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$port" || { kill "$pid"; exit 1; }
  rate=$("$loadgen" "$mode" --url "http://127.0.0.1:$port" --sessions 50 --turns 20 \
    --rounds 30 --pid "$pid" |
    awk '/^overall/ { for (i = 1; i <= NF; i++) if ($i == "=") print $(i + 1) }')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$rate"
}

ratios=()
for run in $(seq 1 "$runs"); do
  turns=$(measure turns)
  trips=$(measure roundtrips)
  ratio=$(awk -v r="$trips" -v t="$turns" 'BEGIN { printf "%.3f", r / t }')
  ratios+=("$ratio")
  echo "run $run: $turns turns/s, $trips round trips/s, ratio $ratio"
done
echo "median ratio of $runs runs: $(median "${ratios[@]}")"
