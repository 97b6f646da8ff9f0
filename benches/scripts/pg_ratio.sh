#!/usr/bin/env bash
# PostgreSQL against in-memory turns per second, two server builds side by
# side: PAIRS pairs, the order of the two swapped every pair so both see the
# same noise. For each build in a pair: one in-memory server, then one
# PostgreSQL server on a fresh database, each warmed up with 50 sessions x 2
# turns and then measured 3 times with 200 sessions x 30 turns (fresh
# sessions each run); a figure is the median of its 3 runs. For the
# PostgreSQL server it also reports the WAL bytes per turn (`pg_stat_wal`)
# and the CPU per turn of the database's processes (every child of its
# postmaster, from /proc) and of the runtime.
#
# Usage: benches/scripts/pg_ratio.sh BINARY_A BINARY_B [PAIRS]
#   PGHOST, PGPORT, PGUSER (default 127.0.0.1, 5432, postgres): a cluster
#   this script may create and drop databases in. Its postmaster's CPU is
#   found through `SELECT pg_postmaster_start_time()`'s process: run it on
#   the same machine as the cluster.
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary_a=${1:?usage: pg_ratio.sh BINARY_A BINARY_B [PAIRS]}
binary_b=${2:?usage: pg_ratio.sh BINARY_A BINARY_B [PAIRS]}
pairs=${3:-3}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
port=${PORT:-7411}
cpu_file=$(mktemp)
trap 'rm -f "$cpu_file"' EXIT

# Serves BINARY with ENV (a DATABASE_URL or nothing), warms it up, runs the
# measured load 3 times; prints "MEDIAN_TURNS_PER_SECOND TURNS RUNTIME_CPU_S".
serve_and_measure() {
  local binary=$1 database_url=$2 pid prefix rates=() turns=0 cpu=0
  env RUST_LOG=warn SERVER__PORT="$port" ${database_url:+DATABASE_URL=$database_url} \
    "$binary" serve >/dev/null 2>&1 &
  pid=$!
  wait_for_server "$port" 20 || { kill "$pid"; exit 1; }
  warm_up "$port"
  on_warm "$pid"
  for run in 1 2 3; do
    prefix="r$run-$RANDOM"
    read -r rate done used < <("$loadgen" turns --url "http://127.0.0.1:$port" --sessions 200 \
      --turns 30 --prefix "$prefix" --pid "$pid" |
      awk '/^overall/ { for (i = 1; i <= NF; i++) { if ($i == "turns/s,") t = $(i - 1); if ($i == "turns" && $(i + 1) == "in") n = $(i - 1) } }
           /^server CPU/ { c = $3 }
           END { print t, n, c }')
    rates+=("$rate")
    turns=$((turns + done))
    cpu=$(awk -v a="$cpu" -v b="$used" 'BEGIN { print a + b }')
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$(median "${rates[@]}") $turns $cpu ${rates[*]}"
}

on_warm() { :; }

# Prints "MEMORY PG RATIO WAL_BYTES_PER_TURN PG_CPU_MS_PER_TURN RUNTIME_CPU_MS_PER_TURN".
measure() {
  local binary=$1 memory pg database wal_before cpu_before
  read -r memory _ _ memory_runs < <(serve_and_measure "$binary" "")
  database="ar_pgratio_$$_$RANDOM"
  sql "CREATE DATABASE $database"
  on_warm() {
    sql "CHECKPOINT"
    sql "SELECT pg_stat_reset_shared('wal')" >/dev/null
    sql "SELECT pg_stat_statements_reset()" >/dev/null 2>&1 || true
    postgres_cpu >"$cpu_file"
  }
  read -r pg turns runtime_cpu pg_runs < <(serve_and_measure "$binary" \
    "postgres://$PGUSER@$PGHOST:$PGPORT/$database")
  local cpu_after wal cpu_before
  cpu_after=$(postgres_cpu)
  cpu_before=$(cat "$cpu_file")
  wal=$(sql "SELECT wal_bytes FROM pg_stat_wal")
  on_warm() { :; }
  if [ -n "${KEEP_STATEMENTS:-}" ]; then
    sql "SELECT calls, round(total_exec_time::numeric, 1) AS ms, wal_bytes, shared_blks_dirtied,
                left(regexp_replace(query, '\s+', ' ', 'g'), 60)
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$database')
         ORDER BY total_exec_time DESC LIMIT 8" >&2 || true
  fi
  sql "DROP DATABASE $database WITH (FORCE)"
  awk -v m="$memory" -v p="$pg" -v w="$wal" -v t="$turns" -v c0="$cpu_before" -v c1="$cpu_after" \
    -v r="$runtime_cpu" -v mr="$memory_runs" -v pr="$pg_runs" 'BEGIN {
    printf "%s %s %.3f %.0f %.3f %.3f (memory runs %s; postgres runs %s)\n",
      m, p, p / m, w / t, (c1 - c0) * 1e3 / t, r * 1e3 / t, mr, pr }'
}

echo "columns: memory turns/s, postgres turns/s, ratio, WAL bytes a turn, PostgreSQL CPU ms a turn, runtime CPU ms a turn"
for pair in $(seq 1 "$pairs"); do
  if [ $((pair % 2)) = 1 ]; then
    echo "pair $pair A: $(measure "$binary_a")"
    echo "pair $pair B: $(measure "$binary_b")"
  else
    echo "pair $pair B: $(measure "$binary_b")"
    echo "pair $pair A: $(measure "$binary_a")"
  fi
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
done
