#!/usr/bin/env bash
# A flame graph of where the server's CPU time goes under the load of
# bare_ratio.sh (100 sessions x 10 turns x 40 rounds, after a warm-up), or
# of the bare actix-web handler of `loadgen bare` under the same load, to
# set the two side by side. Samples with `perf record --call-graph dwarf`
# (user and kernel stacks), folds and draws them with inferno. The folded
# stacks are kept beside the SVG: `inferno-diff-folded BEFORE AFTER |
# inferno-flamegraph` shows what a change moved.
#
# Needs: `apt-get install linux-perf` (or the machine's `perf`),
# `cargo install inferno`, release builds (`cargo build --release --workspace`).
#
# Usage: benches/scripts/flamegraph.sh SERVER_BINARY|bare [turns|roundtrips] [OUT.svg]
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: flamegraph.sh SERVER_BINARY|bare [turns|roundtrips] [OUT.svg]}
mode=${2:-turns}
svg=${3:-flamegraph-$mode.svg}
port=${PORT:-7511}
for tool in perf inferno-collapse-perf inferno-flamegraph; do
  command -v "$tool" >/dev/null || { echo "flamegraph.sh: $tool is not installed" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [ "$binary" = bare ]; then
  "$loadgen" bare --port "$port" >/dev/null 2>&1 &
else
  env RUST_LOG=warn SERVER__PORT="$port" "$binary" serve >/dev/null 2>&1 &
fi
pid=$!
wait_for_server "$port" || { kill "$pid"; exit 1; }
warm_up "$port"

perf record -F 1999 --call-graph dwarf,16384 -o "$out/perf.data" -p "$pid" 2>"$out/perf.log" &
recorder=$!
sleep 0.5
"$loadgen" "$mode" --url "http://127.0.0.1:$port" --sessions 100 --turns 10 --rounds 40 \
  --pid "$pid" | grep -E '^overall|^server CPU'
kill -INT "$recorder"
wait "$recorder" || true
kill "$pid"
wait "$pid" 2>/dev/null || true

folded=${svg%.svg}.folded
perf script -i "$out/perf.data" 2>/dev/null | inferno-collapse-perf >"$folded"
inferno-flamegraph --title "$(basename "$binary") $mode" <"$folded" >"$svg"
echo "wrote $svg and $folded ($(wc -l <"$folded") distinct stacks)"
