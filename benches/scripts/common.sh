# Shared by the benchmark scripts here: sourced, not run. Sets `root` (the
# repository) and `loadgen` (its release build).
# Every script but instructions.sh (its third argument) and hold_many.sh
# takes the port its server listens on from PORT, so two can run at once.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
loadgen="$root/target/release/loadgen"

# Waits until POST /api/chat answers on PORT, at most SECONDS (default 10).
wait_for_server() {
  local port=$1 deadline=$((SECONDS + ${2:-10}))
  until curl -s -o /dev/null -X POST "http://127.0.0.1:$port/api/chat" -d '{}'; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "nothing answers on port $port" >&2
      return 1
    fi
    sleep 0.1
  done
}

# The warm-up every measurement here follows: 50 sessions x 2 turns against
# PORT, run under the command prefix given after PORT (e.g. taskset -c 1).
warm_up() {
  local port=$1
  shift
  "$@" "$loadgen" turns --url "http://127.0.0.1:$port" --sessions 50 --turns 2 \
    --prefix warm >/dev/null
}

# Sets `server_cpu` and `client_cpu`, command prefixes that put the server on
# CPU 0 and the load generator on CPU 1 (taskset) when MODE is "pinned", and
# nothing otherwise (on a machine of two cores they then share both).
pinning() {
  server_cpu=()
  client_cpu=()
  if [ "${1:-}" = pinned ]; then
    server_cpu=(taskset -c 0)
    client_cpu=(taskset -c 1)
  fi
}

# The median of its arguments (numbers), to three decimals when it is the
# mean of the middle two.
median() {
  printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END {
    if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# Runs one SQL statement (in DATABASE, default postgres) on the cluster that
# PGHOST, PGPORT and PGUSER name, printing its rows unaligned.
sql() { psql -X -Atq -d "${2:-postgres}" -c "$1"; }

# Seconds of CPU (user + system) of that cluster: its postmaster, its live
# children, and the children it has reaped (the postmaster's cutime, cstime).
# Run on the cluster's machine.
postgres_cpu() {
  local postmaster total pid ticks
  ticks=$(getconf CLK_TCK)
  postmaster=$(sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'" |
    xargs -I{} awk '{ print $4 }' /proc/{}/stat)
  total=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat")
  for pid in $(pgrep -P "$postmaster"); do
    total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  awk -v t="$total" -v hz="$ticks" 'BEGIN { printf "%.3f", t / hz }'
}
