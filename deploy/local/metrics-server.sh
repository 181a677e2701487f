#!/bin/bash
# metrics-server.sh — a real metrics-server (sigs.k8s.io/metrics-server, built from the Go module
# proxy) for the local control plane of controlplane.sh, so that `kubectl top node` and
# `kubectl top pod` work against actorlet nodes. It runs as a host process (no pods, no registry)
# and is registered through the API server's aggregation layer:
#
#   APIService v1beta1.metrics.k8s.io -> Service kube-system/metrics-server (no selector, port 443)
#     -> EndpointSlice kube-system/metrics-server-host: <this host's non-loopback IP>:<port>
#
# kube-apiserver (--enable-aggregator-routing=true: there is no kube-proxy) dials that endpoint
# with its front-proxy client certificate; metrics-server trusts it through the
# extension-apiserver-authentication ConfigMap. Endpoints on loopback are refused by the API's
# validation, hence the host's own address.
#
#   metrics-server.sh build    build the binary once; it is cached outside the repo
#   metrics-server.sh up       build if needed, bring the control plane up (controlplane.sh up),
#                              get metrics-server a client certificate (a CertificateSigningRequest
#                              for kubernetes.io/kube-apiserver-client, approved by the admin,
#                              signed by kube-controller-manager with the cluster CA), apply
#                              upstream's RBAC for it, start it, register it and wait until the
#                              APIService is Available; a healthy one is left as it is
#   metrics-server.sh status   print the lines below and exit 0 if running and Available, else 1
#   metrics-server.sh down     unregister it (APIService, Service, EndpointSlice, RBAC) and stop it
#
# On success `up` and `status` print exactly these lines on stdout (everything else goes to stderr):
#   METRICS_SERVER=https://<host ip>:<port>   where it serves (TLS, self-signed: --cert-dir)
#   METRICS_SERVER_KUBECONFIG=<path>          its identity (user metrics-server, a client
#                                             certificate of the cluster CA): kubeconfig,
#                                             authentication- and authorization-kubeconfig, and
#                                             what it presents to kubelets
#   METRICS_SERVER_LOG=<path>                 its log (-v=2: one "Scraping node" line per node and
#                                             scrape, errors per node)
#
# It scrapes each node's /metrics/resource on the port the Node reports
# (status.daemonEndpoints.kubeletEndpoint, --kubelet-use-node-status-port) at its InternalIP
# (--kubelet-preferred-address-types=InternalIP), without verifying the kubelet's serving
# certificate (--kubelet-insecure-tls), every 15 s (--metric-resolution). A kubelet checks its
# client certificate against --client-ca-file and asks the API server (SubjectAccessReview) whether
# user metrics-server may get nodes/metrics: the system:metrics-server ClusterRole grants it.
#
# The process lives in the control plane's state dir, so `controlplane.sh down` (or an `up` that
# restarts the control plane from scratch) stops it too. While it is registered but not running,
# discovery of metrics.k8s.io fails (kubectl warns, namespace deletion waits): run `up` or `down`.
#
# Exit codes: 0 ok, 1 not running (status) or failure, 2 usage, 3 this machine cannot run it
# (as controlplane.sh's, or no non-loopback IPv4 address).
#
# Version: pinned by deploy/metricsserver/go.mod (its own module). Builds use the default Go module
# and build caches. Cold (empty caches, 2 cores): ~2.5 min, ~1.2 GB peak RSS.
#
# Environment:
#   ACTORLET_CONTROLPLANE_DIR     the control plane's state dir (see controlplane.sh); metrics-server's
#                                 state goes to <dir>/metrics-server, its pid and log next to the others
#   ACTORLET_CACHE                binary cache root (as controlplane.sh); the binary goes to
#                                 <root>/metrics-server/metrics-server-<version>/bin
#   ACTORLET_METRICS_SERVER_IP    the address to serve on (default: the source address of the default
#                                 route, else the first global IPv4 address)
#   ACTORLET_METRICS_SERVER_PORT  first port tried (default 64443, in 61000-65535; a busy one is skipped)
#   ACTORLET_METRIC_RESOLUTION    --metric-resolution (default 15s; metrics-server refuses < 10s)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODDIR=$ROOT/deploy/metricsserver
CACHE=${ACTORLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/actorlet}
CACHE=${CACHE%/}/metrics-server
CPDIR=${ACTORLET_CONTROLPLANE_DIR:-/tmp/actorlet-controlplane}
CPDIR=${CPDIR%/}
case $CPDIR in "" | / | "$HOME") echo "metrics-server.sh: refusing state dir '$CPDIR'" >&2 && exit 2 ;; esac
DIR=$CPDIR/metrics-server
LOCK=$CPDIR.lock # controlplane.sh's: neither script changes the state dir under the other
PIDFILE=$CPDIR/metrics-server.pid
LOGFILE=$CPDIR/metrics-server.log
STATE=$DIR/state.env
KUBECONFIG_OUT=$DIR/metrics-server.kubeconfig
USER_NAME=metrics-server
CSR_NAME=actorlet-metrics-server
APISERVICE=v1beta1.metrics.k8s.io
RESOLUTION=${ACTORLET_METRIC_RESOLUTION:-15s}
export PATH=$PATH:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

PROG=metrics-server.sh
# log, die, cannot_run, now_ms, check_machine, lock, b64, write_kubeconfig, pid_for
# shellcheck source=lib.sh
. "$HERE/lib.sh"

version() {
  [ -f "$MODDIR/go.mod" ] || die "missing $MODDIR/go.mod"
  MS_VERSION=$(awk '($1 == "sigs.k8s.io/metrics-server" && $2 ~ /^v/) {print $2; exit}
    ($1 == "require" && $2 == "sigs.k8s.io/metrics-server") {print $3; exit}' "$MODDIR/go.mod")
  [ -n "$MS_VERSION" ] || die "cannot read the pinned metrics-server version from $MODDIR/go.mod"
  BIN=$CACHE/metrics-server-$MS_VERSION/bin/metrics-server
}

# ---------------------------------------------------------------------------------------------
# build

build() {
  version
  [ -x "$BIN" ] && return 0
  command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH (needed to build metrics-server)"
  local out tmp t0 ld
  out=$(dirname "$BIN")
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX") # a killed build leaves nothing behind
  # As upstream's Makefile: the version is client-go's.
  ld="-s -w -X k8s.io/client-go/pkg/version.gitVersion=$MS_VERSION -X k8s.io/client-go/pkg/version.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.buildDate=1970-01-01T00:00:00Z"
  log "building metrics-server $MS_VERSION into $out (cold caches: ~2.5 min on 2 cores, ~1.2 GB peak)"
  t0=$(now_ms)
  if ! (cd "$MODDIR" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off \
    go build -trimpath -ldflags="$ld" -o "$tmp/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server >&2); then
    rm -rf "$tmp"
    die "go build sigs.k8s.io/metrics-server/cmd/metrics-server failed (in $MODDIR)"
  fi
  mv -f "$tmp/metrics-server" "$BIN"
  rmdir "$tmp"
  log "built metrics-server in $(( ($(now_ms) - t0) / 1000 ))s"
}

# ---------------------------------------------------------------------------------------------
# the control plane


kc() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout 20s "$@"; }

# ---------------------------------------------------------------------------------------------
# address and port

host_ip() {
  local ip=${ACTORLET_METRICS_SERVER_IP:-}
  if [ -z "$ip" ] && command -v ip >/dev/null 2>&1; then
    ip=$(ip -4 route get 1.0.0.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n1)
    [ -n "$ip" ] || ip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub(/\/.*/, "", $4); print $4; exit}')
  fi
  if [ -z "$ip" ] && command -v hostname >/dev/null 2>&1; then
    ip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -n1) || true
  fi
  case $ip in
    "" | 127.* | 169.254.* | 0.0.0.0)
      cannot_run "no non-loopback IPv4 address (the API server's Endpoint validation refuses loopback; set ACTORLET_METRICS_SERVER_IP)" ;;
  esac
  echo "$ip"
}

port_busy() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Htln "( sport = :$1 )" 2>/dev/null)" ]
  else
    (: </dev/tcp/"$IP"/"$1") 2>/dev/null
  fi
}

free_port() {
  local p=${ACTORLET_METRICS_SERVER_PORT:-64443}
  [[ $p -ge 61000 && $p -le 65535 ]] || die "port $p is outside the private range 61000-65535"
  for ((; p <= 65535; p++)); do
    port_busy "$p" || { echo "$p"; return 0; }
  done
  die "no free port at or above ${ACTORLET_METRICS_SERVER_PORT:-64443}"
}

# ---------------------------------------------------------------------------------------------
# process

# ours: the pid in the pid file, if that process is alive and serves from this DIR.
ours() { pid_for "$PIDFILE" "$DIR"; }

stop_proc() {
  local pid i
  pid=$(ours) || { rm -f "$PIDFILE"; return 0; }
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    ours >/dev/null || { rm -f "$PIDFILE"; return 0; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
}

# ---------------------------------------------------------------------------------------------
# identity: a client certificate of the cluster CA through the certificates API

make_identity() {
  local i cert
  command -v openssl >/dev/null 2>&1 || cannot_run "openssl is missing"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DIR/client.key" 2>/dev/null ||
    die "openssl could not make a key"
  openssl req -new -key "$DIR/client.key" -subj "/CN=$USER_NAME" -out "$DIR/client.csr" 2>/dev/null ||
    die "openssl could not make a CSR"
  kc delete csr "$CSR_NAME" --ignore-not-found >/dev/null
  kc apply -f - >/dev/null <<EOF
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: $CSR_NAME
spec:
  request: $(b64 "$DIR/client.csr")
  signerName: kubernetes.io/kube-apiserver-client
  usages: ["digital signature", "key encipherment", "client auth"]
EOF
  kc certificate approve "$CSR_NAME" >/dev/null
  for ((i = 0; i < 300; i++)); do
    cert=$(kc get csr "$CSR_NAME" -o 'jsonpath={.status.certificate}' 2>/dev/null) || cert=
    [ -n "$cert" ] && break
    sleep 0.1
  done
  [ -n "$cert" ] || die "kube-controller-manager did not sign CSR $CSR_NAME within 30s"
  base64 -d <<<"$cert" >"$DIR/client.crt"
  kc delete csr "$CSR_NAME" --ignore-not-found >/dev/null
  rm -f "$DIR/client.csr"
  write_kubeconfig "$KUBECONFIG_OUT" "$APISERVER" "$CLUSTER_CA" "$USER_NAME" "$DIR/client.crt" "$DIR/client.key"
}

# rbac: upstream's manifests/base/rbac.yaml, bound to the user metrics-server instead of the
# kube-system/metrics-server ServiceAccount.
rbac() {
  cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:aggregated-metrics-reader
  labels:
    rbac.authorization.k8s.io/aggregate-to-view: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
rules:
- apiGroups: ["metrics.k8s.io"]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:metrics-server
rules:
- apiGroups: [""]
  resources: ["nodes/metrics"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:metrics-server
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:metrics-server}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: $USER_NAME}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-server:system:auth-delegator
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: $USER_NAME}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: metrics-server-auth-reader
  namespace: kube-system
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: $USER_NAME}
EOF
}

# registration: the APIService and where it leads (a Service without selector and its
# EndpointSlice on this host).
registration() {
  cat <<EOF
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
  labels: {k8s-app: metrics-server}
spec:
  ports:
  - {name: https, port: 443, protocol: TCP, targetPort: $PORT}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server-host
  namespace: kube-system
  labels:
    kubernetes.io/service-name: metrics-server
    endpointslice.kubernetes.io/managed-by: metrics-server.sh.actorlet.dev
addressType: IPv4
endpoints:
- addresses: ["$IP"]
  conditions: {ready: true}
ports:
- {name: https, port: $PORT, protocol: TCP}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: $APISERVICE
  labels: {k8s-app: metrics-server}
spec:
  service: {name: metrics-server, namespace: kube-system, port: 443}
  group: metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
EOF
}

# available: the APIService's Available condition (True, or the reason it is not).
available() {
  kc get apiservice "$APISERVICE" \
    -o 'jsonpath={range .status.conditions[?(@.type=="Available")]}{.status} {.reason}: {.message}{end}' 2>/dev/null
}

start_proc() {
  local t0 i a=""
  t0=$(now_ms)
  setsid "$BIN" \
    --secure-port="$PORT" --bind-address="$IP" --cert-dir="$DIR/certs" \
    --kubeconfig="$KUBECONFIG_OUT" \
    --authentication-kubeconfig="$KUBECONFIG_OUT" --authorization-kubeconfig="$KUBECONFIG_OUT" \
    --kubelet-insecure-tls --kubelet-preferred-address-types=InternalIP --kubelet-use-node-status-port \
    --metric-resolution="$RESOLUTION" --v=2 \
    </dev/null >"$LOGFILE" 2>&1 9>&- &
  echo $! >"$PIDFILE"
  exec_wait $!
  printf 'APISERVER=%s\nIP=%s\nPORT=%s\nVERSION=%s\n' "$APISERVER" "$IP" "$PORT" "$MS_VERSION" >"$STATE"
  apply "the APIService $APISERVICE, its Service and EndpointSlice" < <(registration)
  for ((i = 0; i < 1200; i++)); do
    a=$(available)
    [[ $a == True* ]] && break
    if ! ours >/dev/null; then
      tail -n 30 "$LOGFILE" >&2
      die "metrics-server exited (log $LOGFILE)"
    fi
    sleep 0.1
  done
  if [[ $a != True* ]]; then
    tail -n 30 "$LOGFILE" >&2
    die "APIService $APISERVICE not Available after 120s: ${a:-no condition} (log $LOGFILE)"
  fi
  log "metrics-server $MS_VERSION on $IP:$PORT, APIService $APISERVICE Available in $(($(now_ms) - t0)) ms"
}

# healthy: ours runs for the running control plane on the address this host would pick now, and
# its APIService is Available.
healthy() {
  local want_ip
  ours >/dev/null && [ -f "$STATE" ] && [ -s "$KUBECONFIG_OUT" ] || return 1
  want_ip=$(host_ip)
  (
    # shellcheck disable=SC1090
    . "$STATE"
    [ "$APISERVER" = "$1" ] && [ "$IP" = "$want_ip" ] && [ "$VERSION" = "$MS_VERSION" ]
  ) || return 1
  [[ $(available) == True* ]]
}

print_lines() {
  # shellcheck disable=SC1090
  . "$STATE"
  echo "METRICS_SERVER=https://$IP:$PORT"
  echo "METRICS_SERVER_KUBECONFIG=$KUBECONFIG_OUT"
  echo "METRICS_SERVER_LOG=$LOGFILE"
}

up() {
  check_machine
  version
  control_plane up
  build
  lock
  if healthy "$APISERVER"; then
    print_lines
    return 0
  fi
  [ -d "$CPDIR" ] || die "the control plane's state dir $CPDIR is gone"
  IP=$(host_ip)
  # A registration left by an earlier run may still say Available: start from none, so that the
  # wait below sees this process answer.
  kc delete apiservice "$APISERVICE" --ignore-not-found >/dev/null || die "could not delete the APIService $APISERVICE"
  stop_proc
  rm -rf --one-file-system "$DIR"
  mkdir -p "$DIR/certs"
  chmod 700 "$DIR"
  PORT=$(free_port)
  make_identity
  apply "metrics-server's RBAC" < <(rbac)
  start_proc
  print_lines
}

status() {
  version
  control_plane status || return 1
  healthy "$APISERVER" || return 1
  print_lines
}

down() {
  check_machine
  lock
  # Unregister first, so that the API server's discovery never points at a stopped process.
  if control_plane status 2>/dev/null; then
    kc delete apiservice "$APISERVICE" --ignore-not-found --wait=false >/dev/null || true
    kc -n kube-system delete service metrics-server --ignore-not-found --wait=false >/dev/null || true
    kc -n kube-system delete endpointslice metrics-server-host --ignore-not-found --wait=false >/dev/null || true
    kc delete csr "$CSR_NAME" --ignore-not-found --wait=false >/dev/null || true
    rbac | kc delete -f - --ignore-not-found --wait=false >/dev/null || true
  fi
  stop_proc
  rm -rf --one-file-system "$DIR"
  rm -f "$LOGFILE"
  log "down"
}

case "${1:-}" in
  build)
    check_machine
    build
    log "binary: $BIN"
    ;;
  up) up ;;
  status) status ;;
  down) down ;;
  *)
    echo "usage: $0 build|up|status|down" >&2
    exit 2
    ;;
esac
