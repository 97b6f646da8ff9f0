#!/usr/bin/env bash
# Host action round trips per second against chat turns per second (the
# goal is at least 0.4), side by side: RUNS pairs, each load on a
# fresh server, `loadgen turns` then `loadgen roundtrips`, both 50 sessions x
# 20 x 30 rounds. Prints each pair's ratio and their median. Needs release
# builds (`cargo build --release --workspace`).
#
# Usage: [COMPARE=BINARY_B] benches/scripts/roundtrip_ratio.sh SERVER_BINARY [RUNS]
#   COMPARE: a second build measured in the same runs, the order of the two
#     swapped every run, each with its own median.
# A shared machine moves single runs by a tenth or more: compare medians.
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: roundtrip_ratio.sh SERVER_BINARY [RUNS]}
runs=${2:-5}
compare=${COMPARE:-}
port=${PORT:-7401}

# Serves a fresh process of BINARY, runs load MODE against it, prints its rate.
measure() {
  local binary=$1 mode=$2 pid rate
  env RUST_LOG=warn SERVER__PORT="$port" "$binary" serve >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$port" || { kill "$pid"; exit 1; }
  rate=$("$loadgen" "$mode" --url "http://127.0.0.1:$port" --sessions 50 --turns 20 \
    --rounds 30 --pid "$pid" |
    awk '/^overall/ { for (i = 1; i <= NF; i++) if ($i == "=") print $(i + 1) }')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$rate"
}

# Measures BINARY's turns then round trips; prints "TURNS TRIPS RATIO".
pair() {
  local turns trips
  turns=$(measure "$1" turns)
  trips=$(measure "$1" roundtrips)
  [ -n "$turns" ] && [ -n "$trips" ] || { echo "no figure from $1" >&2; exit 1; }
  echo "$turns $trips $(awk -v r="$trips" -v t="$turns" 'BEGIN { printf "%.3f", r / t }')"
}

ratios=()
compared=()
for run in $(seq 1 "$runs"); do
  if [ -n "$compare" ] && [ $((run % 2)) -eq 0 ]; then
    other=$(pair "$compare")
    this=$(pair "$binary")
  else
    this=$(pair "$binary")
    [ -z "$compare" ] || other=$(pair "$compare")
  fi
  [ -n "$this" ] && { [ -z "$compare" ] || [ -n "$other" ]; } || exit 1
  read -r turns trips ratio <<<"$this"
  ratios+=("$ratio")
  line="run $run: $turns turns/s, $trips round trips/s, ratio $ratio"
  if [ -n "$compare" ]; then
    read -r turns trips ratio <<<"$other"
    compared+=("$ratio")
    line="$line; COMPARE $turns turns/s, $trips round trips/s, ratio $ratio"
  fi
  echo "$line"
done
echo "median ratio of $runs runs: $(median "${ratios[@]}")"
if [ -n "$compare" ]; then
  echo "COMPARE ($compare) median ratio of $runs runs: $(median "${compared[@]}")"
fi
