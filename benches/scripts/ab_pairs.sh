#!/usr/bin/env bash
# Two server builds side by side: RUNS pairs of fresh processes, each
# warmed up with 50 sessions x 2 turns, then measured with 100 sessions x 10
# turns x 40 rounds. The order of the two is swapped every pair: run in a
# fixed order, pairs were off by a few percent either way. Prints each pair
# and the medians of B / A for turns per second and for server CPU per turn.
# Needs release builds.
#
# Usage: benches/scripts/ab_pairs.sh BINARY_A BINARY_B [RUNS] [pinned]
#   pinned: the server on CPU 0 and the load generator on CPU 1 (taskset).
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary_a=${1:?usage: ab_pairs.sh BINARY_A BINARY_B [RUNS] [pinned]}
binary_b=${2:?usage: ab_pairs.sh BINARY_A BINARY_B [RUNS] [pinned]}
runs=${3:-10}
pinning "${4:-}"
port=${PORT:-7401}

# Serves BINARY, measures it, and prints "TURNS_PER_SECOND CPU_MS_PER_TURN".
measure() {
  local binary=$1 pid
  env RUST_LOG=warn SERVER__PORT="$port" "${server_cpu[@]}" "$binary" serve >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$port" || { kill "$pid"; exit 1; }
  warm_up "$port" "${client_cpu[@]}"
  "${client_cpu[@]}" "$loadgen" turns --url "http://127.0.0.1:$port" --sessions 100 \
    --turns 10 --rounds 40 --pid "$pid" |
    awk '/^overall/ { for (i = 1; i <= NF; i++) if ($i == "turns/s,") t = $(i - 1) }
         /^server CPU/ { for (i = 1; i <= NF; i++) if ($i == "ms" && !c) c = $(i - 1) }
         END { print t, c }'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

throughput=()
cpu=()
for run in $(seq 1 "$runs"); do
  if [ $((run % 2)) = 1 ]; then
    a=$(measure "$binary_a")
    b=$(measure "$binary_b")
  else
    b=$(measure "$binary_b")
    a=$(measure "$binary_a")
  fi
  read -r a_turns a_cpu <<<"$a"
  read -r b_turns b_cpu <<<"$b"
  throughput+=("$(awk -v a="$a_turns" -v b="$b_turns" 'BEGIN { printf "%.3f", b / a }')")
  cpu+=("$(awk -v a="$a_cpu" -v b="$b_cpu" 'BEGIN { printf "%.3f", b / a }')")
  echo "pair $run: A $a_turns turns/s ($a_cpu ms CPU a turn), B $b_turns turns/s ($b_cpu ms)"
done
echo "B / A, median of $runs pairs: turns/s $(median "${throughput[@]}"), CPU a turn $(median "${cpu[@]}")"
