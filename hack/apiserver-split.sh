#!/usr/bin/env bash
# What kube-apiserver's CPU went to while an agent's pods started, by kind
# of request: reads the profiles `actorlet-bench --against upstream
# --api-server-profile --cpu-profile F` writes (F-apiserver-<agent>-NNN,
# 2 s each, from the first pod create to the last pod Ready) as one
# profile, and splits its samples by the first of these that is on a
# sample's stack:
#
#   gc                the Go GC's own workers (assists stay with the request)
#   status patches    PATCH handlers: the agent's pods/status (a node
#                     status patch every 10 s besides)
#   token requests    subresource creates: serviceaccounts/token (pods are
#                     created with spec.nodeName: no bindings)
#   creates           the bench's pod creates and the agent's events
#   watch fan-out     encoding and sending watch events to every watcher
#                     (the agent, the bench, the controller manager, the
#                     scheduler), and the watch cache
#   gets, lists       GET and LIST handlers
#   etcd client       the storage's etcd calls outside a handler (its
#                     watch stream, lease keeping)
#   request filters   what every request goes through before its handler:
#                     authentication (the client certificate's signature
#                     checked), authorization, priority and fairness,
#                     tracing, timeouts
#   HTTP/2, TLS       reading requests and writing answers
#   the rest          the controllers inside the API server, the runtime
#
#   hack/apiserver-split.sh PODS FILE...
#
# Prints one line per kind: CPU seconds, share, and ms per pod (PODS: the
# pods of the fill, the JSON's ready).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
PODS=$1
shift
kinds=(
  "gc|runtime\.gcBgMarkWorker|runtime\.bgsweep|runtime\.bgscavenge"
  "status patches|handlers\.PatchResource|handlers\.\(\*patcher\)"
  "token requests|handlers\.CreateNamedResource"
  "creates|handlers\.CreateResource"
  "watch fan-out|handlers\.handleWatch|handlers\.\(\*WatchServer\)|storage/cacher\.|watch\.\(\*Broadcaster\)"
  "gets, lists|handlers\.GetResource|handlers\.ListResource|handlers\.getResourceHandler"
  "etcd client|go\.etcd\.io/etcd/client"
  "request filters|k8s\.io/apiserver/pkg/server\.DefaultBuildHandlerChain|k8s\.io/apiserver/pkg/endpoints/filters|k8s\.io/apiserver/pkg/server/filters"
  "HTTP/2, TLS|golang\.org/x/net/http2|crypto/tls"
)
# ms: the focused samples' total, from pprof's "accounting for" line with
# every node shown.
ms() {
  go tool pprof -unit=ms -top -nodecount=1000000 -nodefraction=0 -edgefraction=0 "$@" 2>/dev/null |
    sed -n 's/^Showing nodes accounting for \([0-9.]*\)ms.*/\1/p' | head -1
}
total=$(ms "$@")
if [ -z "$total" ] || [ "$total" = 0 ]; then
  echo "apiserver-split.sh: no samples in $*" >&2
  exit 1
fi
seen=""
sum=0
line() { awk -v n="$1" -v v="$2" -v t="$total" -v p="$PODS" 'BEGIN { printf "%-16s %8.2f s %6.1f %% %7.2f ms/pod\n", n, v / 1000, 100 * v / t, v / p }'; }
for k in "${kinds[@]}"; do
  name=${k%%|*}
  re=${k#*|}
  if [ -n "$seen" ]; then
    v=$(ms -focus="$re" -ignore="$seen" "$@")
  else
    v=$(ms -focus="$re" "$@")
  fi
  v=${v:-0}
  line "$name" "$v"
  sum=$(awk -v a="$sum" -v b="$v" 'BEGIN { print a + b }')
  seen=${seen:+$seen|}$re
done
line "the rest" "$(awk -v a="$total" -v b="$sum" 'BEGIN { print a - b }')"
line "all" "$total"
