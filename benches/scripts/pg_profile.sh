#!/usr/bin/env bash
# Where a PostgreSQL turn's work goes, for one server build: a fresh
# database, a warm-up (50 x 2), then RUNS runs of 200 sessions x 30 turns,
# and per turn: statements and their rows (pg_stat_statements, when the
# cluster preloads it), commits (pg_stat_database), WAL records, bytes,
# full-page images and flushes (pg_stat_wal), and the CPU of the database's
# processes and of the runtime. Deterministic figures, unlike turns/s: they
# hardly move with the machine's load, so compare builds on these.
#
# Usage: benches/scripts/pg_profile.sh BINARY [RUNS]
#   PGHOST, PGPORT, PGUSER as for pg_ratio.sh. For per-statement figures the
#   cluster needs `shared_preload_libraries = 'pg_stat_statements'` and the
#   extension created in the `postgres` database; without it those lines
#   are skipped.
#   SESSIONS, TURNS (default 200, 30).
set -euo pipefail
source "$(dirname "$0")/common.sh"
binary=${1:?usage: pg_profile.sh BINARY [RUNS]}
runs=${2:-3}
sessions=${SESSIONS:-200}
turns_each=${TURNS:-30}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
port=${PORT:-7413}

database="ar_pgprofile_$$_$RANDOM"
sql "CREATE DATABASE $database"
trap 'sql "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
env RUST_LOG=warn SERVER__PORT="$port" DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/$database" \
  "$binary" serve >/dev/null 2>&1 &
pid=$!
wait_for_server "$port" 20 || { kill "$pid"; exit 1; }
warm_up "$port"
sql "CHECKPOINT"
sql "SELECT pg_stat_reset_shared('wal')" >/dev/null
sql "SELECT pg_stat_statements_reset()" >/dev/null 2>&1 || true
sql "SELECT pg_stat_reset()" "$database" >/dev/null
sleep 0.6 # the statistics collector's interval
cpu_before=$(postgres_cpu)
turns=0
runtime_cpu=0
rates=()
for run in $(seq 1 "$runs"); do
  read -r rate done used < <("$loadgen" turns --url "http://127.0.0.1:$port" --sessions "$sessions" \
    --turns "$turns_each" --prefix "p$run-$RANDOM" --pid "$pid" |
    awk '/^overall/ { for (i = 1; i <= NF; i++) { if ($i == "turns/s,") t = $(i - 1); if ($i == "turns" && $(i + 1) == "in") n = $(i - 1) } }
         /^server CPU/ { c = $3 }
         END { print t, n, c }')
  rates+=("$rate")
  turns=$((turns + done))
  runtime_cpu=$(awk -v a="$runtime_cpu" -v b="$used" 'BEGIN { print a + b }')
done
cpu_after=$(postgres_cpu)
kill "$pid"
wait "$pid" 2>/dev/null || true
sleep 0.6
echo "build: $binary; $turns turns; turns/s ${rates[*]}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v t="$turns" -v c0="$cpu_before" -v c1="$cpu_after" -v r="$runtime_cpu" 'BEGIN {
  printf "CPU a turn: PostgreSQL %.4f ms, runtime %.4f ms\n", (c1 - c0) * 1e3 / t, r * 1e3 / t }'
sql "SELECT 'commits a turn: ' || round(xact_commit::numeric / $turns, 3)
            || ', rollbacks ' || xact_rollback
            || ', tuples inserted a turn ' || round(tup_inserted::numeric / $turns, 2)
            || ', updated ' || round(tup_updated::numeric / $turns, 2)
     FROM pg_stat_database WHERE datname = '$database'"
sql "SELECT 'WAL a turn: ' || round(wal_bytes / $turns) || ' B in ' || round(wal_records::numeric / $turns, 2)
            || ' records, ' || round(wal_fpi::numeric / $turns, 3) || ' full-page images; flushes a turn '
            || round(wal_sync::numeric / $turns, 3) || ', writes ' || round(wal_write::numeric / $turns, 3)
     FROM pg_stat_wal"
sql "SELECT 'HOT updates: ' || n_tup_hot_upd || ' of ' || n_tup_upd FROM pg_stat_user_tables
     WHERE relname = 'sessions'" "$database"
if sql "SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'" | grep -q 1; then
  echo "statements (per turn: calls, exec ms, plan ms, rows, WAL B; per call: rows; text):"
  sql "SELECT round(calls::numeric / $turns, 3), round((total_exec_time / $turns)::numeric, 4),
              round((total_plan_time / $turns)::numeric, 4), round(rows::numeric / $turns, 2),
              round(wal_bytes / $turns), round(rows::numeric / greatest(calls, 1), 1),
              left(regexp_replace(query, '\s+', ' ', 'g'), 70)
       FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$database')
       ORDER BY total_exec_time DESC LIMIT 10"
fi
