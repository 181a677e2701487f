#!/usr/bin/env bash
# The agent's CPU at rest with N pods on the embedded sim runtime: start a
# standalone agent, push N pods with `actorlet-bench --endpoint`, let it settle, and
# read its utime+stime over a window. What a dense node pays every second
# for relists, GC and the rest, with nothing starting or stopping.
#
#   hack/rest-cpu.sh [BINARY] [PODS] [WINDOW_SECONDS]   (defaults: bin/actorlet 1000 30)
#
# BINARY is the agent; the pods go in through the actorlet-bench beside it
# (make bench builds both into bin/), or REST_CPU_BENCH.
# Prints one line: pods running, cores over the window, VmRSS at its end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-bin/actorlet}")
BENCH=${REST_CPU_BENCH:-$(dirname "$BIN")/actorlet-bench}
[ -x "$BENCH" ] || { echo "rest-cpu: no $BENCH: run make bench (or set REST_CPU_BENCH)" >&2; exit 2; }
PODS=${2:-1000}
WINDOW=${3:-30}
PORT=${REST_CPU_PORT:-20250}
ROOT=$(mktemp -d)
LOG=$ROOT.log
agent=""
cleanup() {
  if [ -n "$agent" ]; then
    kill "$agent" 2>/dev/null || true
    wait "$agent" 2>/dev/null || true
  fi
  rm -rf "$ROOT" "$ROOT.json" "$LOG"
}
trap cleanup EXIT

"$BIN" --container-runtime-endpoint "sim://?node-memory=1Ti" --max-pods $((PODS + 100)) \
  --root-dir "$ROOT" --port "$PORT" --read-only-port 0 --healthz-port $((PORT - 2)) >"$LOG" 2>&1 &
agent=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$((PORT - 2))/healthz" >/dev/null && break
  kill -0 "$agent" 2>/dev/null || { echo "rest-cpu: the agent exited:" >&2; tail -5 "$LOG" >&2; exit 1; }
  sleep 0.2
done
"$BENCH" --scenario standalone-sim --endpoint "https://127.0.0.1:$PORT" --agent-pid "$agent" \
  --pods "$PODS" --timeout 10m --quiet --out "$ROOT.json" >/dev/null
running=$(sed -n 's/.*"running": *\([0-9]*\).*/\1/p' "$ROOT.json" | head -1)
# The memory upkeep releases after the count held 10 s; the window starts after it.
sleep 20
ticks() { awk '{print $14 + $15}' "/proc/$agent/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
sleep "$WINDOW"
t1=$(ticks)
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$agent/status")
awk -v p="$PODS" -v r="$running" -v d=$((t1 - t0)) -v hz="$hz" -v w="$WINDOW" -v rss="$rss" \
  'BEGIN { printf "pods %d running %d rest_cores %.4f rss_mib %.0f\n", p, r, d / hz / w, rss / 1024 }'
