#!/usr/bin/env bash
# Start time of the agent: from exec to the first /healthz 200, standalone
# on the embedded sim runtime with no pods, RUNS times (default 5); prints
# each run and the median in ms. It polls /healthz every 5 ms with curl, so
# a figure carries ~5-10 ms of polling and curl start-up: compare binaries
# in the same run, not against figures taken elsewhere.
#
# Usage: hack/start-time.sh BINARY [RUNS]
set -euo pipefail
bin=${1:?usage: hack/start-time.sh BINARY [RUNS]}
runs=${2:-5}
[ -x "$bin" ] || { echo "start-time: $bin is not an executable" >&2; exit 2; }
command -v curl >/dev/null || { echo "start-time: needs curl" >&2; exit 2; }
port=${START_TIME_HEALTHZ_PORT:-10348}
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
times=()
for i in $(seq 1 "$runs"); do
	rm -rf "$work/root"
	t0=$(date +%s%N)
	"$bin" --container-runtime-endpoint sim:// --root-dir "$work/root" --pod-logs-dir "$work/root/pods" \
		--hostname-override start-time --address 127.0.0.1 --port 0 --read-only-port 0 \
		--healthz-bind-address 127.0.0.1 --healthz-port "$port" >"$work/log" 2>&1 &
	pid=$!
	until curl -fs -o /dev/null "http://127.0.0.1:$port/healthz"; do
		kill -0 "$pid" 2>/dev/null || { echo "start-time: the agent exited:" >&2; tail -20 "$work/log" >&2; exit 1; }
		sleep 0.005
	done
	t1=$(date +%s%N)
	ms=$(( (t1 - t0) / 1000000 ))
	times+=("$ms")
	echo "run $i: ${ms} ms"
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "median: %d ms over %d runs\n", a[int((NR+1)/2)], NR}'
