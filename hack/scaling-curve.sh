#!/usr/bin/env bash
# Issue 14's scaling curve: the standalone-sim start of PODS pods at each
# GOMAXPROCS in LIST (the agent's and the bench's alike), one run each, in
# order; a JSON per run in OUTDIR and one line per run on stdout, then the
# ratio of the largest GOMAXPROCS to 2. Built to run as one command on a
# machine lent for a short while (16 cores: ~5 minutes for the default
# list at 10,000 pods), so it takes a binary built elsewhere:
#
#   hack/scaling-curve.sh [BINARY] [PODS] [OUTDIR] [LIST] [ROOT]
#   (defaults: bin/actorlet 10000 ./scaling "1 2 4 8 16", ROOT a temporary
#   directory)
#
# BINARY is the agent; actorlet-bench beside it (make bench builds both into
# bin/), or SCALING_BENCH, runs the load.
#
# ROOT: each run's --root-dir goes under it (ROOT/gomaxprocsN). The pods'
# directories cost what the file system's history makes them cost (ext4
# without a journal: 15-60 times more per inode after many deletions), and
# each run deletes thousands: on a tmpfs the runs do not pay for each
# other. The inode_us column is the CPU per inode made at each run's start
# (the JSON's file_system).
#
# A GOMAXPROCS above the machine's CPUs is run and marked "oversubscribed":
# on such a machine only the values up to its CPUs say anything.
set -euo pipefail
BIN=$(realpath "${1:-bin/actorlet}")
BENCH=${SCALING_BENCH:-$(dirname "$BIN")/actorlet-bench}
[ -x "$BENCH" ] || { echo "scaling-curve: no $BENCH: run make bench (or set SCALING_BENCH)" >&2; exit 2; }
PODS=${2:-10000}
OUT=${3:-./scaling}
LIST=${4:-1 2 4 8 16}
ROOT=${5:-}
mkdir -p "$OUT"
cpus=$(nproc)
field() { sed -n "s/^ *\"$1\": *\([0-9.]*\).*/\1/p" "$2" | head -1; }
printf '%-10s %-9s %-8s %-10s %-10s %-12s %-9s %s\n' gomaxprocs pods/s seconds p50_ms p99_ms cpu/pod_ms inode_us load1
declare -A rate
for n in $LIST; do
  f="$OUT/standalone-sim-$PODS-gomaxprocs$n.json"
  # node-memory: the sim's node must admit every pod (requests of the
  # bench's pods times PODS); --timeout: a 1-core run of 10,000 pods takes
  # ~30 s on 16 cores' worth of machine, ~5 min on a loaded 2-core VM.
  root=()
  [ -n "$ROOT" ] && root=(--root-dir "$ROOT/gomaxprocs$n")
  if ! "$BENCH" --actorlet "$BIN" --quiet --scenario standalone-sim --pods "$PODS" --gomaxprocs "$n" \
    --sim node-memory=256Gi --timeout 20m --out "$f" "${root[@]}"; then
    echo "gomaxprocs $n: the bench failed (JSON, if any, in $f)" >&2
    continue
  fi
  rate[$n]=$(field pods_per_second "$f")
  note=""
  [ "$n" -gt "$cpus" ] && note="oversubscribed ($cpus CPUs)"
  printf '%-10s %-9s %-8s %-10s %-10s %-12s %-9s %s %s\n' "$n" "${rate[$n]}" "$(field seconds "$f")" \
    "$(field p50 "$f")" "$(field p99 "$f")" "$(field cpu_per_pod_ms "$f")" "$(field inode_cpu_us "$f")" "$(field load_avg_1m "$f")" "$note"
done
top=$(tr ' ' '\n' <<<"$LIST" | sort -n | tail -1)
if [ -n "${rate[2]:-}" ] && [ -n "${rate[$top]:-}" ] && [ "$top" != 2 ]; then
  awk -v a="${rate[$top]}" -v b="${rate[2]}" -v n="$top" 'BEGIN { printf "gomaxprocs %d / 2: %.2fx pods/s\n", n, a / b }'
fi
