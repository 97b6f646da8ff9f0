#!/usr/bin/env bash
# Turns per second of the server against the bare actix-web handler of
# `loadgen bare`, side by side: RUNS runs, each a fresh bare handler then a
# fresh server, each warmed up with 50 sessions x 2 turns and then measured
# with SESSIONS sessions x TURNS turns x ROUNDS rounds. Prints each run's
# turns/s, server CPU per turn and ratio, then the median ratio. Needs
# release builds (`cargo build --release --workspace`).
#
# Usage: [SESSIONS=100 TURNS=10 ROUNDS=40] [COMPARE=BINARY_B] \
#          benches/scripts/bare_ratio.sh SERVER_BINARY [RUNS] [pinned]
#   SESSIONS, TURNS, ROUNDS: the measured load (defaults 100 x 10 x 40);
#     SESSIONS=200 TURNS=50 ROUNDS=10 is the long-conversation shape.
#   COMPARE: a second server build measured in the same runs against the
#     same bare figure, the order of the two swapped every run, so that
#     two builds are compared side by side (each with its own median).
#   pinned: the server (or the bare handler) on CPU 0 and the load generator
#     on CPU 1 (taskset), so that neither takes the other's CPU time; on a
#     machine of two cores they otherwise share both, and how the scheduler
#     splits them is part of every figure. Either way a shared machine moves
#     single runs by a fifth or more: compare medians of alternating runs.
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: bare_ratio.sh SERVER_BINARY [RUNS] [pinned]}
runs=${2:-5}
pinning "${3:-}"
sessions=${SESSIONS:-100}
turns=${TURNS:-10}
rounds=${ROUNDS:-40}
compare=${COMPARE:-}
server_port=${PORT:-7400}
bare_port=$((server_port - 2))

echo "load: $sessions sessions x $turns turns x $rounds rounds, after 50 x 2"

# Runs the measured load against PORT and prints "TURNS_PER_SECOND CPU_MS_PER_TURN".
measure() {
  local port=$1 pid=$2
  warm_up "$port" "${client_cpu[@]}"
  "${client_cpu[@]}" "$loadgen" turns --url "http://127.0.0.1:$port" --sessions "$sessions" \
    --turns "$turns" --rounds "$rounds" --pid "$pid" |
    awk '/^overall/ { for (i = 1; i <= NF; i++) if ($i == "turns/s,") t = $(i - 1) }
         /^server CPU/ { for (i = 1; i <= NF; i++) if ($i == "ms" && !c) c = $(i - 1) }
         END { print t, c }'
}

# Serves BINARY on the server port, measures it and stops it.
measure_server() {
  local pid result
  env RUST_LOG=warn SERVER__PORT="$server_port" "${server_cpu[@]}" "$1" serve \
    >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$server_port" || { kill "$pid"; exit 1; }
  result=$(measure "$server_port" "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$result"
}

# Fails the script when a measurement printed nothing (a server that did
# not answer prints its reason on stderr).
need() {
  [ -n "$1" ] || { echo "no figure from $2" >&2; exit 1; }
}

ratio() { awk -v s="$1" -v b="$2" 'BEGIN { printf "%.3f", s / b }'; }

ratios=()
compared=()
for run in $(seq 1 "$runs"); do
  "${server_cpu[@]}" "$loadgen" bare --port "$bare_port" >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$bare_port" || { kill "$pid"; exit 1; }
  read -r bare bare_cpu < <(measure "$bare_port" "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true

  if [ -n "$compare" ] && [ $((run % 2)) -eq 0 ]; then
    read -r other other_cpu < <(measure_server "$compare")
    read -r served served_cpu < <(measure_server "$binary")
  else
    read -r served served_cpu < <(measure_server "$binary")
    if [ -n "$compare" ]; then
      read -r other other_cpu < <(measure_server "$compare")
    fi
  fi
  need "$bare" bare
  need "$served" "$binary"
  [ -z "$compare" ] || need "$other" "$compare"

  ratios+=("$(ratio "$served" "$bare")")
  line="run $run: bare $bare turns/s ($bare_cpu ms CPU a turn), server $served ($served_cpu ms), ratio ${ratios[-1]}"
  if [ -n "$compare" ]; then
    compared+=("$(ratio "$other" "$bare")")
    line="$line; COMPARE $other ($other_cpu ms), ratio ${compared[-1]}"
  fi
  echo "$line"
done
echo "median ratio of $runs runs: $(median "${ratios[@]}")"
if [ -n "$compare" ]; then
  echo "COMPARE ($compare) median ratio of $runs runs: $(median "${compared[@]}")"
fi
