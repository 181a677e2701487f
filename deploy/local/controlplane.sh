#!/bin/bash
# controlplane.sh — a private, offline Kubernetes control plane on loopback for actorlet's tests:
# etcd, kube-apiserver (TLS, client certificates, Node+RBAC, NodeRestriction),
# kube-controller-manager and kube-scheduler, built from the Go module proxy (no registry).
#
#   controlplane.sh build                 build the binaries once; they are cached outside the repo
#   controlplane.sh up                    build if needed, start the four processes, wait until the
#                                         apiserver is ready and the default ServiceAccount exists; a
#                                         running control plane made by an older version of this script
#                                         (CONFIG_VERSION) gets the new kube-apiserver flags and RBAC in
#                                         place: only kube-apiserver restarts, PKI and etcd are kept
#                                         (from before version 4 kube-controller-manager restarts too)
#   controlplane.sh status                print the lines below and exit 0 if running, else exit 1
#   controlplane.sh node-kubeconfig NAME  a kubeconfig for the node NAME (system:node:NAME in group
#                                         system:nodes); prints NODE_KUBECONFIG=<path>
#   controlplane.sh bootstrap-kubeconfig OUT
#                                         TLS bootstrapping as `kubeadm init` sets it up: a new bootstrap
#                                         token (Secret bootstrap-token-<id> in kube-system, group
#                                         system:bootstrappers) and a kubeconfig using it written to OUT
#                                         (mode 600; a kubelet's --bootstrap-kubeconfig); waits until the
#                                         API server accepts the token; prints the lines further below
#   controlplane.sh down                  stop the four processes (ours only) and remove the state dir
#   controlplane.sh stop-apiserver        stop kube-apiserver only (an API server outage): etcd, the
#                                         controller manager, the scheduler, the PKI and the port stay
#   controlplane.sh start-apiserver       start kube-apiserver again on the same port, PKI and etcd; waits
#                                         until /readyz is ok and prints the lines below
#   controlplane.sh gomod                 regenerate deploy/controlplane/go.mod from k8s.io/kubernetes's
#                                         own go.mod (K8S_VERSION_NEW=v1.X.Y for another version; the
#                                         module of ACTORLET_K8S_VERSION's control plane when that is
#                                         set), then go mod tidy
#
# kube-apiserver serves /debug/pprof (its default; only system:masters may read it, as the admin
# kubeconfig): `actorlet-bench --against upstream --api-server-profile` profiles it while each agent's
# pods start (what a node agent costs the API server, by request; see docs/BENCHMARKS.md).
# kube-controller-manager and kube-scheduler keep --profiling=false.
#
# On success `up` and `status` print exactly these lines on stdout (everything else goes to stderr):
#   ADMIN_KUBECONFIG=<path>    system:masters; certificates embedded
#   KUBECTL=<path>
#   APISERVER=https://127.0.0.1:<port>
#   CLUSTER_CA=<path>          the cluster CA (PEM): a kubelet's --client-ca-file; it signed every
#                              client certificate, kube-apiserver's kubelet client certificate included
#
# TLS bootstrapping is on, as `kubeadm init` sets it up: kube-apiserver has
# --enable-bootstrap-token-auth, kube-controller-manager runs the bootstrapsigner and tokencleaner
# controllers (--controllers=*,bootstrapsigner,tokencleaner) besides the CSR approving and signing ones
# (the cluster CA signs), and RBAC lets group system:bootstrappers create CSRs
# (system:node-bootstrapper) and auto-approves node client CSRs: a bootstrap token's
# (certificatesigningrequests:nodeclient, group system:bootstrappers) and a node renewing its own
# (certificatesigningrequests:selfnodeclient, group system:nodes). Serving certificates
# (kubernetes.io/kubelet-serving CSRs, a kubelet's --rotate-server-certificates) are not auto-approved,
# as upstream: an admin approves them,
#   kubectl get csr; kubectl certificate approve <name>
# `bootstrap-kubeconfig OUT` prints on success exactly:
#   BOOTSTRAP_KUBECONFIG=<OUT>   cluster CA embedded, user = the token
#   BOOTSTRAP_TOKEN_ID=<id>      the CSRs it makes are by user system:bootstrap:<id>
#
# The aggregation layer is on (for deploy/local/metrics-server.sh and `kubectl top`): a front-proxy CA
# of its own (pki/front-proxy-ca.crt) signed kube-apiserver's proxy client certificate (CN
# front-proxy-client), the --requestheader-* flags name them (kube-apiserver publishes them in
# kube-system/extension-apiserver-authentication), and --enable-aggregator-routing=true makes it dial
# an APIService's endpoints directly, as there is no kube-proxy.
#
# kube-apiserver advertises 127.0.0.1 and keeps no endpoints for the kubernetes Service
# (--endpoint-reconciler-type=none): v1.37 refuses a loopback address for the endpoint reconciler
# ("may not be in the loopback range"), and with no kube-proxy the Service's cluster IP reaches
# nothing anyway; clients use APISERVER.
#
# kube-apiserver reaches kubelets (kubectl logs, exec, /proxy) as CN kube-apiserver-kubelet-client,
# bound to the ClusterRole system:kubelet-api-admin (as kubeadm does), so kubelets with
# --authorization-mode=Webhook allow it; it prefers a node's InternalIP, then its Hostname.
#
# Exit codes: 0 ok, 1 not running (status) or failure, 2 usage, 3 this machine cannot run it
# (not Linux, no flock, no Go toolchain when a build is needed, openssl or curl missing and not
# installable).
#
# Versions: k8s.io/kubernetes and etcd are pinned by the modules in deploy/controlplane/ (go.mod,
# go.sum; etcd in its own module deploy/controlplane/etcd so it keeps its own dependencies).
# Builds use the default Go module and build caches.
#
# Version skew (ACTORLET_K8S_VERSION): a control plane one minor version older than the pinned one,
# for the skew test (test/e2e/skew_cluster_test.go; upstream's skew policy lets a kubelet of v1.N
# join a control plane of v1.N-1, down to v1.N-3). ACTORLET_K8S_VERSION=v1.36.4 takes the module
# deploy/controlplane-v1.36/ (its go.mod pins k8s.io/kubernetes v1.36.4; there is one such module
# per older minor kept) and its own binary cache <root>/controlplane/k8s-v1.36.4/bin. Such a skew
# control plane is etcd and kube-apiserver only, so its cold build is kube-apiserver and kubectl
# (see docs/KUBEADM.md, "Version skew", for the time): no kube-controller-manager and no
# kube-scheduler. `up` makes what a pod needs of them itself: the default ServiceAccount and the
# kube-root-ca.crt ConfigMap in namespace default (the ServiceAccount admission refuses pods
# without the first; a service account token volume projects the second). Pods are bound by their
# creator (spec.nodeName, or the binding subresource as kube-scheduler does); bootstrap-kubeconfig
# (CSR signing) is refused. A skew control plane never takes the default state dir: it defaults to
# /tmp/actorlet-controlplane-<version>. `up` restarts from scratch a state dir whose kube-apiserver
# runs another version's binary.
#
# Environment:
#   ACTORLET_CONTROLPLANE_DIR  state dir (default /tmp/actorlet-controlplane): PKI, kubeconfigs,
#                              etcd data, logs, pid files
#   ACTORLET_K8S_VERSION       the Kubernetes version (default: the pin of deploy/controlplane/go.mod,
#                              v1.37.2); another one is a skew control plane (above)
#   ACTORLET_CACHE             binary cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/actorlet);
#                              binaries go to <root>/controlplane/k8s-<version>/bin and
#                              <root>/controlplane/etcd-<version>/bin
#   ACTORLET_APISERVER_PORT    first port tried for the apiserver (default 62443)
#   ACTORLET_ETCD_PORT         first port tried for etcd's client URL (default 62379; peer = next)
#   ACTORLET_SERVICE_CIDR      service cluster IP range (default 10.96.0.0/16)
#   ACTORLET_SIGNING_DURATION  kube-controller-manager's --cluster-signing-duration (a Go duration such
#                              as 3m: short-lived node certificates for rotation tests) of a control
#                              plane that `up` creates; refused for the default state dir (the shared
#                              instance keeps upstream's default, one year): set it with a private
#                              ACTORLET_CONTROLPLANE_DIR. Kept in <dir>/signing-duration for restarts.
#   ACTORLET_BOOTSTRAP_TOKEN_TTL  lifetime of a bootstrap-kubeconfig token in seconds (default 7200)
# Ports are taken on 127.0.0.1 from 61000-65535 (private, above Linux's default ephemeral range);
# a busy port is skipped for the next free one.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODDIR=$ROOT/deploy/controlplane
ETCDMOD=$ROOT/deploy/controlplane/etcd
CACHE=${ACTORLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/actorlet}
CACHE=${CACHE%/}/controlplane

# modver FILE MODULE: the version FILE's go.mod requires of MODULE.
modver() {
  awk -v m="$2" '($1 == m && $2 ~ /^v/) {print $2; exit} ($1 == "require" && $2 == m) {print $3; exit}' "$1" 2>/dev/null
}

PINNED_VERSION=$(modver "$MODDIR/go.mod" k8s.io/kubernetes)
WANT_VERSION=${ACTORLET_K8S_VERSION:-$PINNED_VERSION}
SKEW=false
if [ -n "$WANT_VERSION" ] && [ "$WANT_VERSION" != "$PINNED_VERSION" ]; then
  SKEW=true
  if ! [[ $WANT_VERSION =~ ^v1\.([0-9]+)\.[0-9]+$ ]]; then
    echo "controlplane.sh: ACTORLET_K8S_VERSION=$WANT_VERSION is not a version v1.X.Y" >&2
    exit 2
  fi
  MODDIR=$ROOT/deploy/controlplane-v1.${BASH_REMATCH[1]}
  if [ "$(modver "$MODDIR/go.mod" k8s.io/kubernetes)" != "$WANT_VERSION" ]; then
    echo "controlplane.sh: no control plane module for ACTORLET_K8S_VERSION=$WANT_VERSION; there are" \
      "$PINNED_VERSION (deploy/controlplane)" \
      "$(for m in "$ROOT"/deploy/controlplane-v1.*/go.mod; do modver "$m" k8s.io/kubernetes; done | tr '\n' ' ')" >&2
    exit 2
  fi
fi
if $SKEW; then
  DIR=${ACTORLET_CONTROLPLANE_DIR:-/tmp/actorlet-controlplane-$WANT_VERSION}
else
  DIR=${ACTORLET_CONTROLPLANE_DIR:-/tmp/actorlet-controlplane}
fi
DIR=${DIR%/}
case $DIR in "" | / | "$HOME") echo "controlplane.sh: refusing state dir '$DIR'" >&2 && exit 2 ;; esac
PKI=$DIR/pki
LOCK=$DIR.lock
PORTS=$DIR/ports.env
ADMIN_KUBECONFIG=$DIR/admin.kubeconfig
SERVICE_CIDR=${ACTORLET_SERVICE_CIDR:-10.96.0.0/16}
PROCS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
KBINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
ALL_PROCS=("${PROCS[@]}") # what down stops, whatever made the state dir
if $SKEW; then
  PROCS=(etcd kube-apiserver)
  KBINS=(kube-apiserver kubectl)
fi
# Started in DIR by other scripts (deploy/local/metrics-server.sh), with their pid files next to ours:
# not part of the control plane's health, but stopped with it (they would outlive their cluster).
ADDONS=(metrics-server)
STAGING_SKIP='k8s.io/sample-cli-plugin|k8s.io/sample-controller' # replaced upstream, never required
# Bump when start_apiserver's flags, the PKI or the RBAC objects change: `up` then brings a running
# control plane up to date in place (see upgrade). 2: kubelet client cert + RBAC, preferred addresses.
# 3: the aggregation layer (front-proxy CA and client cert, --requestheader-*, aggregator routing).
# 4: TLS bootstrapping (--enable-bootstrap-token-auth, bootstrapsigner and tokencleaner, bootstrap RBAC;
# kube-controller-manager restarts too). 5: kube-apiserver's /debug/pprof on (--profiling=true).
# 6: --endpoint-reconciler-type=none (v1.37 refuses a loopback advertise address with a reconciler).
CONFIG_VERSION=6
STAMP=$DIR/config.version
KUBELET_CLIENT_CN=kube-apiserver-kubelet-client
SIGNING_DURATION=${ACTORLET_SIGNING_DURATION:-}
SIGNING_FILE=$DIR/signing-duration
BOOTSTRAP_TOKEN_TTL=${ACTORLET_BOOTSTRAP_TOKEN_TTL:-7200}
export PATH=$PATH:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

PROG=controlplane.sh
# log, die, cannot_run, now_ms, check_machine, lock, b64, write_kubeconfig, pid_for
# shellcheck source=lib.sh
. "$HERE/lib.sh"

versions() {
  [[ -f $MODDIR/go.mod && -f $ETCDMOD/go.mod ]] || die "missing $MODDIR/go.mod or $ETCDMOD/go.mod"
  K8S_VERSION=$(modver "$MODDIR/go.mod" k8s.io/kubernetes)
  ETCD_VERSION=$(modver "$ETCDMOD/go.mod" go.etcd.io/etcd/server/v3)
  [[ -n $K8S_VERSION && -n $ETCD_VERSION ]] || die "cannot read the pinned versions from deploy/controlplane"
  KBIN=$CACHE/k8s-$K8S_VERSION/bin
  EBIN=$CACHE/etcd-$ETCD_VERSION/bin
  KUBECTL=$KBIN/kubectl
}

# ---------------------------------------------------------------------------------------------
# checks

check_go() {
  command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH (needed to build the control plane)"
}

install_pkgs() {
  local missing=()
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  [ ${#missing[@]} -eq 0 ] && return 0
  { [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; } ||
    cannot_run "missing ${missing[*]} and this is not a Debian-like system (no apt-get)"
  [ "$(id -u)" = 0 ] || cannot_run "missing ${missing[*]}; installing needs root"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; } ||
    cannot_run "apt-get could not install ${missing[*]}"
}

# ---------------------------------------------------------------------------------------------
# build

all_built() {
  local b
  for b in "${KBINS[@]}"; do
    [ -x "$KBIN/$b" ] || return 1
  done
  [ -x "$EBIN/etcd" ]
}

# go_build MODDIR OUTDIR LDFLAGS OUT PKG...: build into OUTDIR atomically (a killed build leaves
# nothing); OUT names the binary of a single PKG, or is empty for one binary per PKG.
go_build() {
  local mod=$1 out=$2 ld=$3 name=$4 tmp f
  shift 4
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  # One go build for several commands shares their common packages and links them in parallel.
  if ! (cd "$mod" && GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off go build -trimpath -ldflags="$ld" -o "$tmp/$name" "$@" >&2); then
    rm -rf "$tmp"
    die "go build $* failed (in $mod)"
  fi
  for f in "$tmp"/*; do mv -f "$f" "$out/"; done
  rmdir "$tmp"
}

build() {
  versions
  all_built && return 0
  check_go
  local b missing=() t0 ld
  for b in "${KBINS[@]}"; do
    [ -x "$KBIN/$b" ] || missing+=("k8s.io/kubernetes/cmd/$b")
  done
  if [ ! -x "$EBIN/etcd" ]; then
    log "building etcd $ETCD_VERSION into $EBIN"
    t0=$(now_ms)
    go_build "$ETCDMOD" "$EBIN" "-s -w" etcd go.etcd.io/etcd/server/v3
    log "built etcd in $(( ($(now_ms) - t0) / 1000 ))s"
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    ld=$(k8s_ldflags "$K8S_VERSION")
    log "building ${missing[*]##*/} $K8S_VERSION into $KBIN (cold caches: 10-15 min on 2 cores, ~2 GB peak)"
    t0=$(now_ms)
    go_build "$MODDIR" "$KBIN" "$ld" "" "${missing[@]}"
    log "built ${missing[*]##*/} in $(( ($(now_ms) - t0) / 1000 ))s"
  fi
  all_built || die "build finished but binaries are missing in $KBIN / $EBIN"
}

# gomod: rewrite deploy/controlplane/go.mod for K8S_VERSION (default: the pinned one), replacing
# every staging module k8s.io/kubernetes replaces with ./staging/... by its published v0.X.Y.
gomod() {
  check_go
  versions
  local want=${K8S_VERSION_NEW:-$K8S_VERSION} staging kmod
  staging=v0.${want#v1.}
  kmod=$(cd "$MODDIR" && GOWORK=off go mod download -json "k8s.io/kubernetes@$want" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -s "$kmod" ] || die "could not download k8s.io/kubernetes@$want"
  {
    echo "// Generated by deploy/local/controlplane.sh gomod; do not edit by hand."
    echo "// k8s.io/kubernetes cannot be required as is: its go.mod replaces the staging"
    echo "// modules with ./staging/src/..., so replace each with the published release."
    echo "module github.com/actorlet/actorlet/deploy/$(basename "$MODDIR")"
    echo
    echo "go 1.26.0"
    echo
    echo "godebug default=go1.26"
    echo
    echo "require k8s.io/kubernetes $want"
    echo
    echo "replace ("
    sed -n '/^replace (/,/^)/p' "$kmod" | awk '/=>/ {print $1}' | grep -vE "$STAGING_SKIP" |
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
    echo ")"
  } >"$MODDIR/go.mod"
  rm -f "$MODDIR/go.sum"
  (cd "$MODDIR" && GOWORK=off go mod tidy >&2)
  $SKEW || (cd "$ETCDMOD" && GOWORK=off go mod tidy >&2)
  log "wrote $MODDIR/go.mod for k8s.io/kubernetes $want (staging $staging)"
}

# ---------------------------------------------------------------------------------------------
# ports

port_busy() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Htln "( sport = :$1 )" 2>/dev/null)" ]
  else
    (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null
  fi
}

# free_port FIRST [EXCLUDE...]: the first free port at or above FIRST, in 61000-65535.
free_port() {
  local p=$1 x
  shift
  [[ $p -ge 61000 && $p -le 65535 ]] || die "port $p is outside the private range 61000-65535"
  for ((; p <= 65535; p++)); do
    for x in "$@"; do [ "$p" = "$x" ] && continue 2; done
    port_busy "$p" || { echo "$p"; return 0; }
  done
  die "no free port on 127.0.0.1 at or above $1"
}

pick_ports() {
  ETCD_PORT=$(free_port "${ACTORLET_ETCD_PORT:-62379}")
  ETCD_PEER_PORT=$(free_port $((ETCD_PORT + 1)) "$ETCD_PORT")
  API_PORT=$(free_port "${ACTORLET_APISERVER_PORT:-62443}" "$ETCD_PORT" "$ETCD_PEER_PORT")
  printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPI_PORT=%s\n' "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" >"$PORTS"
}

load_ports() {
  [ -f "$PORTS" ] || return 1
  # shellcheck disable=SC1090
  . "$PORTS"
}

# ---------------------------------------------------------------------------------------------
# PKI: one CA signs everything (serving, clients, cluster signing); EC P-256 keys are instant.

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME SUBJECT EXT [CA]: NAME.key + NAME.crt signed by CA (default ca: the cluster CA).
sign() {
  local name=$1 subj=$2 ext=$3 ca=${4:-ca}
  newkey "$PKI/$name.key"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  printf '%s\n' "$ext" >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null ||
    die "openssl could not sign $name"
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

CLIENT_EXT='basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth'

first_service_ip() {
  local net=${SERVICE_CIDR%/*}
  echo "${net%.*}.$((${net##*.} + 1))"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  newkey "$PKI/ca.key"
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=actorlet-controlplane-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt" 2>/dev/null || die "openssl could not make the CA"
  sign apiserver "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$(first_service_ip),DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign admin "/O=system:masters/CN=actorlet-admin" "$CLIENT_EXT"
  sign controller-manager "/CN=system:kube-controller-manager" "$CLIENT_EXT"
  sign scheduler "/CN=system:kube-scheduler" "$CLIENT_EXT"
  sign_kubelet_client
  front_proxy_pki
  newkey "$PKI/sa.key"
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  rm -f "$PKI/ca.srl"
}

# front_proxy_pki: the aggregation layer's own CA and kube-apiserver's client certificate towards
# extension API servers (kept apart from the cluster CA, as kubeadm does: a certificate of this CA
# lets its holder assert any user through the X-Remote-* headers). Made once; an older control plane
# gets it on its next kube-apiserver start.
front_proxy_pki() {
  [ -s "$PKI/front-proxy-client.crt" ] && [ -s "$PKI/front-proxy-ca.crt" ] && return 0
  newkey "$PKI/front-proxy-ca.key"
  openssl req -x509 -new -key "$PKI/front-proxy-ca.key" -subj "/CN=actorlet-front-proxy-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/front-proxy-ca.crt" 2>/dev/null || die "openssl could not make the front-proxy CA"
  sign front-proxy-client "/CN=front-proxy-client" "$CLIENT_EXT" front-proxy-ca
  rm -f "$PKI/front-proxy-ca.srl"
}

# sign_kubelet_client: kube-apiserver's client certificate towards kubelets; not system:masters, its
# rights come from the system:kubelet-api-admin binding (apply_rbac).
sign_kubelet_client() {
  sign apiserver-kubelet-client "/CN=$KUBELET_CLIENT_CN" "$CLIENT_EXT"
  rm -f "$PKI/ca.srl"
}

# kubeconfig OUT USER CERT KEY: certificates embedded, so the file stands alone.
kubeconfig() { write_kubeconfig "$1" "https://127.0.0.1:$API_PORT" "$PKI/ca.crt" "$2" "$3" "$4"; }

# ---------------------------------------------------------------------------------------------
# processes

# ours PROC: the pid in PROC's pid file, if that process is alive and was started for this DIR.
ours() { pid_for "$DIR/$1.pid" "$DIR"; }

api_get() {
  curl -fsS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$API_PORT$1" 2>/dev/null
}

healthy() {
  [ -f "$ADMIN_KUBECONFIG" ] && load_ports || return 1
  local p pid
  for p in "${PROCS[@]}"; do ours "$p" >/dev/null || return 1; done
  # Another version's control plane in this state dir (ACTORLET_K8S_VERSION changed, or the pin did)
  # is not this one.
  pid=$(ours kube-apiserver)
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$KBIN/kube-apiserver" ] || return 1
  [ "$(api_get /readyz)" = ok ]
}

print_lines() {
  echo "ADMIN_KUBECONFIG=$ADMIN_KUBECONFIG"
  echo "KUBECTL=$KUBECTL"
  echo "APISERVER=https://127.0.0.1:$API_PORT"
  echo "CLUSTER_CA=$PKI/ca.crt"
}

# current: the running control plane was made (or upgraded) with this CONFIG_VERSION.
current() { [ "$(cat "$STAMP" 2>/dev/null)" = "$CONFIG_VERSION" ]; }

# start PROC ARGS...: in its own session, so it outlives the caller; fd 9 (our lock) stays here.
start() {
  local name=$1
  shift
  setsid "$@" </dev/null >"$DIR/$name.log" 2>&1 9>&- &
  echo $! >"$DIR/$name.pid"
  exec_wait $!
}

# wait_until WHAT SECONDS PROC CMD...: poll CMD every 0.1s while PROC lives.
wait_until() {
  local what=$1 secs=$2 proc=$3 i
  shift 3
  for ((i = 0; i < secs * 10; i++)); do
    "$@" && return 0
    if ! ours "$proc" >/dev/null; then
      tail -n 30 "$DIR/$proc.log" >&2
      die "$proc exited while waiting for $what (log $DIR/$proc.log)"
    fi
    sleep 0.1
  done
  tail -n 30 "$DIR/$proc.log" >&2
  die "timed out after ${secs}s waiting for $what (log $DIR/$proc.log)"
}

etcd_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }
api_ready() { [ "$(api_get /readyz)" = ok ]; }
sa_ready() {
  api_get /api/v1/namespaces/default/serviceaccounts/default >/dev/null &&
    api_get /api/v1/namespaces/default/configmaps/kube-root-ca.crt >/dev/null
}

# start_apiserver: start kube-apiserver and wait until it is ready.
start_apiserver() {
  local t1
  t1=$(now_ms)
  front_proxy_pki
  start kube-apiserver "$KBIN/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --cert-dir="$DIR/apiserver-certs" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --enable-bootstrap-token-auth=true \
    --endpoint-reconciler-type=none \
    --allow-privileged=true --profiling=true
  wait_until "kube-apiserver /readyz" 120 kube-apiserver api_ready
  log "kube-apiserver ready on 127.0.0.1:$API_PORT in $(($(now_ms) - t1)) ms"
}

# apply_rbac: what kubeadm grants kube-apiserver's kubelet client, and the TLS bootstrapping bindings
# (idempotent: kubectl apply).
apply_rbac() {
  local i
  for ((i = 0; i < 50; i++)); do
    if "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" apply -f - >/dev/null 2>"$DIR/rbac.err" <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: actorlet:kube-apiserver-kubelet-client
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:kubelet-api-admin
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: $KUBELET_CLIENT_CN
$(bootstrap_rbac)
EOF
    then
      rm -f "$DIR/rbac.err"
      return 0
    fi
    sleep 0.2 # a fresh apiserver may still be bootstrapping its policy
  done
  cat "$DIR/rbac.err" >&2
  die "could not bind $KUBELET_CLIENT_CN to system:kubelet-api-admin"
}

# bootstrap_rbac: what kubeadm init binds for TLS bootstrapping, to every bootstrap token (group
# system:bootstrappers): create CSRs, and auto-approval of node client CSRs by the controller manager's
# csrapproving controller (a token's first one, and a node's renewal with its own certificate).
bootstrap_rbac() {
  crb actorlet:node-bootstrapper system:node-bootstrapper system:bootstrappers
  crb actorlet:node-autoapprove-bootstrap system:certificates.k8s.io:certificatesigningrequests:nodeclient system:bootstrappers
  crb actorlet:node-autoapprove-certificate-rotation system:certificates.k8s.io:certificatesigningrequests:selfnodeclient system:nodes
}

# reap PID: wait up to 10s for a TERMed PID to go (or be a zombie), then KILL it.
reap() {
  local i
  for ((i = 0; i < 100; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    [ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" = Z ] && return 0
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null || true
}

# stop_one PROC: TERM our PROC, KILL it after 10s.
stop_one() {
  local pid
  pid=$(ours "$1") || { rm -f "$DIR/$1.pid"; return 0; }
  kill "$pid" 2>/dev/null || true
  reap "$pid"
  rm -f "$DIR/$1.pid"
}

# upgrade: bring a healthy control plane of an older CONFIG_VERSION up to date, disturbing its users
# no more than a kube-apiserver restart does (clients reconnect; the CA, the node kubeconfigs and
# etcd stay).
upgrade() {
  log "upgrading the running control plane to config version $CONFIG_VERSION (restarting kube-apiserver only)"
  sign_kubelet_client
  stop_one kube-apiserver
  start_apiserver
  apply_rbac
  if ! $SKEW && [ "$(cat "$STAMP" 2>/dev/null || echo 0)" -lt 4 ]; then
    # TLS bootstrapping (config version 4) needs the bootstrapsigner and tokencleaner controllers.
    log "restarting kube-controller-manager too (bootstrap token controllers)"
    stop_one kube-controller-manager
    start_controller_manager
  fi
  echo "$CONFIG_VERSION" >"$STAMP"
}

start_all() {
  local t0 t1
  t0=$(now_ms)
  pick_ports
  make_pki
  if [ -n "$SIGNING_DURATION" ]; then echo "$SIGNING_DURATION" >"$SIGNING_FILE"; fi
  kubeconfig "$ADMIN_KUBECONFIG" actorlet-admin "$PKI/admin.crt" "$PKI/admin.key"
  kubeconfig "$DIR/controller-manager.kubeconfig" system:kube-controller-manager \
    "$PKI/controller-manager.crt" "$PKI/controller-manager.key"
  kubeconfig "$DIR/scheduler.kubeconfig" system:kube-scheduler "$PKI/scheduler.crt" "$PKI/scheduler.key"

  t1=$(now_ms)
  start etcd "$EBIN/etcd" --name actorlet --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "actorlet=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level warn
  wait_until "etcd health" 30 etcd etcd_healthy
  log "etcd ready on 127.0.0.1:$ETCD_PORT in $(($(now_ms) - t1)) ms"

  start_apiserver
  apply_rbac

  t1=$(now_ms)
  if $SKEW; then
    skew_defaults
    log "skew control plane $K8S_VERSION (etcd and kube-apiserver only) up in $(($(now_ms) - t0)) ms"
    echo "$CONFIG_VERSION" >"$STAMP"
    return 0
  fi
  start_controller_manager
  start kube-scheduler "$KBIN/kube-scheduler" \
    --kubeconfig="$DIR/scheduler.kubeconfig" --secure-port=0 --leader-elect=false --profiling=false
  wait_until "the default ServiceAccount and kube-root-ca.crt in default" 120 kube-controller-manager sa_ready
  ours kube-scheduler >/dev/null || { tail -n 30 "$DIR/kube-scheduler.log" >&2; die "kube-scheduler exited"; }
  log "kube-controller-manager made the default ServiceAccount in $(($(now_ms) - t1)) ms; up in $(($(now_ms) - t0)) ms"
  echo "$CONFIG_VERSION" >"$STAMP"
}

# skew_defaults: what kube-controller-manager would make that a pod needs, for a skew control plane
# that runs none: the default ServiceAccount (serviceaccounts controller) and the kube-root-ca.crt
# ConfigMap (root-ca-cert-publisher) in namespace default.
skew_defaults() {
  {
    printf 'apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: default\n  namespace: default\n---\n'
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-root-ca.crt\n  namespace: default\n'
    printf 'data:\n  ca.crt: |\n'
    sed 's/^/    /' "$PKI/ca.crt"
  } | "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout 20s apply -f - >/dev/null ||
    die "could not create the default ServiceAccount and kube-root-ca.crt in default"
  wait_until "the default ServiceAccount and kube-root-ca.crt in default" 30 kube-apiserver sa_ready
}

# start_controller_manager: start kube-controller-manager (not waiting), with the bootstrap token
# controllers and the signing duration of this control plane (SIGNING_FILE) if it has one.
start_controller_manager() {
  local extra=()
  if [ -s "$SIGNING_FILE" ]; then
    extra+=(--cluster-signing-duration="$(cat "$SIGNING_FILE")")
  fi
  start kube-controller-manager "$KBIN/kube-controller-manager" \
    --kubeconfig="$DIR/controller-manager.kubeconfig" --secure-port=0 --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --controllers='*,bootstrapsigner,tokencleaner' ${extra[@]+"${extra[@]}"} \
    --service-cluster-ip-range="$SERVICE_CIDR" --cluster-name=actorlet --profiling=false
}

# check_signing_duration: ACTORLET_SIGNING_DURATION is a Go duration and is not asked of the shared
# instance (exit 2 otherwise).
check_signing_duration() {
  [ -n "$SIGNING_DURATION" ] || return 0
  [[ $SIGNING_DURATION =~ ^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$ ]] || {
    log "ACTORLET_SIGNING_DURATION=$SIGNING_DURATION is not a duration (e.g. 3m, 1h30m)"
    exit 2
  }
  if [ "$DIR" = /tmp/actorlet-controlplane ]; then
    log "ACTORLET_SIGNING_DURATION is for a private control plane: set ACTORLET_CONTROLPLANE_DIR too (the shared one keeps the default)"
    exit 2
  fi
}

# stop_all: TERM our processes and the add-ons (newest first), KILL what is left after 10s.
stop_all() {
  local p pid pids=() i all=("${ALL_PROCS[@]}" "${ADDONS[@]}")
  for ((i = ${#all[@]} - 1; i >= 0; i--)); do
    p=${all[i]}
    if pid=$(ours "$p"); then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$DIR/$p.pid"
  done
  for pid in "${pids[@]}"; do
    reap "$pid"
  done
}

up() {
  check_machine
  check_signing_duration
  lock
  versions
  if healthy; then
    current || upgrade
    print_lines
    return 0
  fi
  install_pkgs
  build
  # Anything left half-running is restarted from scratch: state is cheap, a stale PKI is not.
  if [ -f "$PORTS" ]; then
    local p dead=()
    for p in "${PROCS[@]}"; do ours "$p" >/dev/null || dead+=("$p"); done
    log "not healthy (not running: ${dead[*]:-none}; apiserver not ready otherwise): restarting from scratch"
  fi
  stop_all
  if [ -d "$DIR" ]; then rm -rf --one-file-system "$DIR"; fi
  mkdir -p "$DIR"
  chmod 700 "$DIR"
  start_all
  print_lines
}

status() {
  versions
  healthy || return 1
  print_lines
}

node_kubeconfig() {
  local name=${1:-}
  [[ $name =~ ^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$ ]] || {
    log "usage: $0 node-kubeconfig NAME (a DNS subdomain)"
    exit 2
  }
  lock
  versions
  healthy || die "the control plane is not running (run: $0 up)"
  local d=$DIR/nodes/$name
  if [ ! -s "$d/kubeconfig" ]; then
    mkdir -p "$d"
    sign "node-$name" "/O=system:nodes/CN=system:node:$name" "$CLIENT_EXT"
    mv "$PKI/node-$name.crt" "$d/node.crt"
    mv "$PKI/node-$name.key" "$d/node.key"
    rm -f "$PKI/ca.srl"
    kubeconfig "$d/kubeconfig" "system:node:$name" "$d/node.crt" "$d/node.key"
  fi
  echo "NODE_KUBECONFIG=$d/kubeconfig"
}

# bootstrap_kubeconfig OUT: a new bootstrap token and a kubeconfig using it at OUT (see the header).
bootstrap_kubeconfig() {
  local out=${1:-} id secret exp i code=
  [ -n "$out" ] || {
    log "usage: $0 bootstrap-kubeconfig OUT"
    exit 2
  }
  [[ $BOOTSTRAP_TOKEN_TTL =~ ^[0-9]+$ && $BOOTSTRAP_TOKEN_TTL -ge 60 ]] || {
    log "ACTORLET_BOOTSTRAP_TOKEN_TTL=$BOOTSTRAP_TOKEN_TTL: want seconds, at least 60"
    exit 2
  }
  case $out in /*) ;; *) out=$PWD/$out ;; esac
  $SKEW && die "a skew control plane ($WANT_VERSION) runs no kube-controller-manager to sign bootstrap CSRs"
  lock
  versions
  healthy || die "the control plane is not running (run: $0 up)"
  current || die "the control plane predates TLS bootstrapping (config version $(cat "$STAMP" 2>/dev/null)): run $0 up to upgrade it"
  mkdir -p "$(dirname "$out")" || die "cannot make the directory of $out"
  # A token is [a-z0-9]{6}.[a-z0-9]{16}; hex digits are a subset. Quoted in YAML: all digits would be
  # a number.
  id=$(openssl rand -hex 3)
  secret=$(openssl rand -hex 8)
  exp=$(date -u -d "@$(($(date +%s) + BOOTSTRAP_TOKEN_TTL))" +%Y-%m-%dT%H:%M:%SZ)
  token_secret "$id" "$secret" "$exp" "actorlet controlplane.sh bootstrap-kubeconfig: TLS bootstrapping of a node" |
    "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout 20s apply -f - >/dev/null ||
    die "could not create the bootstrap token Secret bootstrap-token-$id"
  cat >"$out.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: actorlet
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: tls-bootstrap-token-user
  user:
    token: "$id.$secret"
contexts:
- name: tls-bootstrap-token-user@actorlet
  context:
    cluster: actorlet
    user: tls-bootstrap-token-user
current-context: tls-bootstrap-token-user@actorlet
EOF
  chmod 600 "$out.tmp"
  mv "$out.tmp" "$out"
  # The token authenticator reads Secrets through an informer: wait until it knows the new token (a
  # bootstrapper may list CSRs).
  for ((i = 0; i < 100; i++)); do
    code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$PKI/ca.crt" \
      -H "Authorization: Bearer $id.$secret" \
      "https://127.0.0.1:$API_PORT/apis/certificates.k8s.io/v1/certificatesigningrequests?limit=1" 2>/dev/null || true)
    [ "$code" = 200 ] && break
    sleep 0.1
  done
  [ "$code" = 200 ] || die "kube-apiserver does not accept the new bootstrap token $id (HTTP $code listing CSRs with it)"
  log "bootstrap token $id (expires $exp) in $out"
  echo "BOOTSTRAP_KUBECONFIG=$out"
  echo "BOOTSTRAP_TOKEN_ID=$id"
}

down() {
  lock
  stop_all
  if [ -d "$DIR" ]; then rm -rf --one-file-system "$DIR"; fi
  log "down"
}

# stop_apiserver: an API server outage. Only kube-apiserver goes; clients see connection refused
# on its port until start_apiserver.
stop_apiserver() {
  lock
  versions
  load_ports || die "no control plane in $DIR (run: $0 up)"
  ours kube-apiserver >/dev/null || die "kube-apiserver is not running"
  stop_one kube-apiserver
  log "kube-apiserver stopped (port $API_PORT closed)"
}

# start_apiserver_again: the end of the outage, with the same flags, port, PKI and etcd as before.
start_apiserver_again() {
  lock
  versions
  load_ports || die "no control plane in $DIR (run: $0 up)"
  ours etcd >/dev/null || die "etcd is not running (run: $0 up)"
  ours kube-apiserver >/dev/null || start_apiserver
  print_lines
}

case "${1:-}" in
  stop-apiserver) stop_apiserver ;;
  start-apiserver) start_apiserver_again ;;
  build)
    check_machine
    build
    versions
    log "binaries: $KBIN $EBIN"
    ;;
  up) up ;;
  status) status ;;
  node-kubeconfig) node_kubeconfig "${2:-}" ;;
  bootstrap-kubeconfig) bootstrap_kubeconfig "${2:-}" ;;
  down) down ;;
  gomod) gomod ;;
  *)
    echo "usage: $0 build|up|status|node-kubeconfig NAME|bootstrap-kubeconfig OUT|down|stop-apiserver|start-apiserver|gomod" >&2
    exit 2
    ;;
esac
