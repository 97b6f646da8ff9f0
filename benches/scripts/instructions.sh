#!/usr/bin/env bash
# Instructions the server executes per turn (user space), counted by
# valgrind's callgrind: a figure that does not move with the machine's
# load, unlike turns per second on a shared machine, so two builds can be
# compared to a percent. Needs `apt-get install valgrind` and release builds
# (`cargo build --release --workspace`).
#
# Usage: [SESSIONS=20 TURNS=10 ROUNDS=25] benches/scripts/instructions.sh SERVER_BINARY [turns|roundtrips] [PORT]
#   bare: benches/scripts/instructions.sh bare
# Prints the count per turn over 5,000 turns (20 sessions x 10 turns x 25
# rounds, or the load SESSIONS, TURNS and ROUNDS set) after a warm-up, with
# resident actors (ASSISTANT__SESSION_IDLE_SECONDS=300): under
# valgrind a turn takes milliseconds, and hibernation would then run on a
# schedule that differs from run to run. `bare` counts the bare actix-web
# handler of `loadgen bare` for the same load. Runs of one binary agree
# within about 2 % (the dispatcher's polls and the timers vary from run to
# run): for a smaller change, compare the functions it touches in the
# output of `callgrind_annotate --inclusive=yes` instead (KEEP=DIR, a new
# directory, keeps callgrind's files there).
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: instructions.sh SERVER_BINARY|bare [turns|roundtrips] [PORT]}
mode=${2:-turns}
port=${3:-7509}
sessions=${SESSIONS:-20}
turns=${TURNS:-10}
rounds=${ROUNDS:-25}
count=$((sessions * turns * rounds))
if [ -n "${KEEP:-}" ]; then
  # Keeps callgrind's output there, for `callgrind_annotate`.
  out=$KEEP
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
if [ "$binary" = bare ]; then
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" "$loadgen" bare --port "$port" \
    >/dev/null 2>"$out/valgrind.log" &
else
  env RUST_LOG=warn SERVER__PORT="$port" ASSISTANT__SESSION_IDLE_SECONDS=300 \
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" "$binary" serve \
    >/dev/null 2>"$out/valgrind.log" &
fi
pid=$!
wait_for_server "$port" 60 || { kill "$pid"; exit 1; } # valgrind starts slowly
warm_up "$port"
callgrind_control -z "$pid" >/dev/null 2>&1
"$loadgen" "$mode" --url "http://127.0.0.1:$port" --sessions "$sessions" --turns "$turns" \
  --rounds "$rounds" | grep overall
callgrind_control -d "$pid" >/dev/null 2>&1
sleep 1
kill -INT "$pid"
wait "$pid" 2>/dev/null || true
total=$(grep -h '^summary' "$out"/cg.*.1 | awk '{print $2}')
echo "$mode: $total instructions for $count, $((total / count)) per $([ "$mode" = turns ] && echo turn || echo 'round trip')"
