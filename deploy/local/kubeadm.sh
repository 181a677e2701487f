#!/bin/bash
# kubeadm.sh — kubeadm (built from the Go module proxy) and what `kubeadm init` would have set up
# for joins, on the local control plane of controlplane.sh, so that `kubeadm join` can bring a new
# node — actorlet as its kubelet — into that cluster.
#
#   kubeadm.sh build           build kubeadm once; it is cached outside the repo. Prints KUBEADM=<path>
#   kubeadm.sh init-artifacts  bring the control plane up (controlplane.sh up), then set up, as
#                              `kubeadm init` does (idempotent; kubectl apply):
#                              - the cluster-info ConfigMap in kube-public (a kubeconfig with the API
#                                server's URL and the cluster CA) readable by system:anonymous
#                                (Role/RoleBinding kubeadm:bootstrap-signer-clusterinfo);
#                              - the kubeadm-config ConfigMap (ClusterConfiguration) and the
#                                kubelet-config ConfigMap (the KubeletConfiguration every joining
#                                node gets as /var/lib/kubelet/config.yaml) in kube-system, readable
#                                by bootstrap tokens and nodes (kubeadm:nodes-kubeadm-config,
#                                kubeadm:kubelet-config);
#                              - the bootstrap RBAC: kubeadm:get-nodes, kubeadm:kubelet-bootstrap
#                                (system:node-bootstrapper), kubeadm:node-autoapprove-bootstrap
#                                (nodeclient) and kubeadm:node-autoapprove-certificate-rotation
#                                (selfnodeclient);
#                              - a bootstrap token (Secret bootstrap-token-<id> in kube-system, group
#                                system:bootstrappers:kubeadm:default-node-token, usages
#                                authentication and signing), reused while it has more than 15 min
#                                left; it waits until kube-controller-manager's bootstrapsigner has
#                                signed cluster-info for it (the JWS that `kubeadm join` checks);
#                              and prints the lines below.
#   kubeadm.sh join-env        init-artifacts, printed as `export` lines for a shell, and the join
#                              command: eval "$(deploy/local/kubeadm.sh join-env)"
#   kubeadm.sh gomod           regenerate deploy/kubeadm/go.mod from deploy/controlplane/go.mod (the
#                              same k8s.io/kubernetes version and staging replaces), then go mod tidy
#
# On success `init-artifacts` prints exactly these lines on stdout (everything else goes to stderr):
#   KUBEADM=<path>                        kubeadm of the control plane's version
#   KUBEADM_API_ENDPOINT=127.0.0.1:<port> the [api-server-endpoint] argument of kubeadm join
#   KUBEADM_TOKEN=<id>.<secret>           --token
#   KUBEADM_CA_CERT_HASH=sha256:<hex>     --discovery-token-ca-cert-hash (SHA-256 of the cluster
#                                         CA's SubjectPublicKeyInfo, as kubeadm computes it)
#   KUBEADM_CLUSTER_DNS=<ip>              the clusterDNS of the kubelet-config ConfigMap
#
# The kubelet-config ConfigMap is what `kubeadm config print init-defaults --component-configs
# KubeletConfiguration` prints for v1.36 (durations left at 0s for the kubelet to default, as
# kubeadm uploads them), with cgroupDriver cgroupfs (the local containerd of containerd.sh and the
# simulated runtime use cgroupfs; kubeadm's default is systemd) and clusterDNS the 10th address of
# the service range. Needs, from controlplane.sh: kube-apiserver with --enable-bootstrap-token-auth
# and kube-controller-manager running the bootstrapsigner controller; says so if they are missing.
#
# Exit codes: 0 ok, 1 failure, 2 usage, 3 this machine cannot run it (as controlplane.sh's, or no Go
# toolchain to build kubeadm).
#
# Version: pinned by deploy/kubeadm/go.mod (its own module; k8s.io/kubernetes as
# deploy/controlplane). Cold build (empty build cache, module cache filled): ~100 s on 2 cores,
# ~1.2 GB peak RSS.
#
# Environment:
#   ACTORLET_CONTROLPLANE_DIR      the control plane's state dir (see controlplane.sh); the token is
#                                  remembered in <dir>/kubeadm/token.env
#   ACTORLET_CACHE                 binary cache root (as controlplane.sh); kubeadm goes to
#                                  <root>/kubeadm/kubeadm-<version>/bin/kubeadm
#   ACTORLET_SERVICE_CIDR          as controlplane.sh (default 10.96.0.0/16): clusterDNS is its .10
#   ACTORLET_KUBEADM_TOKEN_TTL     a new token's lifetime in seconds (default 7200)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODDIR=$ROOT/deploy/kubeadm
CACHE=${ACTORLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/actorlet}
CACHE=${CACHE%/}/kubeadm
CPDIR=${ACTORLET_CONTROLPLANE_DIR:-/tmp/actorlet-controlplane}
CPDIR=${CPDIR%/}
case $CPDIR in "" | / | "$HOME") echo "kubeadm.sh: refusing state dir '$CPDIR'" >&2 && exit 2 ;; esac
DIR=$CPDIR/kubeadm
LOCK=$CPDIR.lock # controlplane.sh's: neither script changes the state dir under the other
TOKEN_ENV=$DIR/token.env
SERVICE_CIDR=${ACTORLET_SERVICE_CIDR:-10.96.0.0/16}
TOKEN_TTL=${ACTORLET_KUBEADM_TOKEN_TTL:-7200}
TOKEN_GROUP=system:bootstrappers:kubeadm:default-node-token
export PATH=$PATH:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

PROG=kubeadm.sh
# log, die, cannot_run, now_ms, check_machine, lock, b64
# shellcheck source=lib.sh
. "$HERE/lib.sh"

version() {
  [ -f "$MODDIR/go.mod" ] || die "missing $MODDIR/go.mod"
  K8S_VERSION=$(awk '($1 == "k8s.io/kubernetes" && $2 ~ /^v/) {print $2; exit}
    ($1 == "require" && $2 == "k8s.io/kubernetes") {print $3; exit}' "$MODDIR/go.mod")
  [ -n "$K8S_VERSION" ] || die "cannot read the pinned k8s.io/kubernetes version from $MODDIR/go.mod"
  KUBEADM=$CACHE/kubeadm-$K8S_VERSION/bin/kubeadm
}

# ---------------------------------------------------------------------------------------------
# build

build() {
  version
  [ -x "$KUBEADM" ] && return 0
  command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH (needed to build kubeadm)"
  local out tmp t0 ld
  out=$(dirname "$KUBEADM")
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX") # a killed build leaves nothing behind
  # The version in the binary, as controlplane.sh (else kubeadm reports v0.0.0-master).
  ld=$(k8s_ldflags "$K8S_VERSION")
  log "building kubeadm $K8S_VERSION into $out (cold caches: ~100 s on 2 cores, ~1.2 GB peak)"
  t0=$(now_ms)
  if ! (cd "$MODDIR" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off \
    go build -trimpath -ldflags="$ld" -o "$tmp/kubeadm" k8s.io/kubernetes/cmd/kubeadm >&2); then
    rm -rf "$tmp"
    die "go build k8s.io/kubernetes/cmd/kubeadm failed (in $MODDIR)"
  fi
  mv -f "$tmp/kubeadm" "$KUBEADM"
  rmdir "$tmp"
  log "built kubeadm in $(( ($(now_ms) - t0) / 1000 ))s"
}

# gomod: deploy/kubeadm/go.mod = deploy/controlplane/go.mod's k8s.io/kubernetes and replaces.
gomod() {
  command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH"
  local cp=$ROOT/deploy/controlplane/go.mod want
  want=$(awk '($1 == "require" && $2 == "k8s.io/kubernetes") {print $3; exit}' "$cp")
  [ -n "$want" ] || die "cannot read k8s.io/kubernetes from $cp"
  {
    echo "// Generated by deploy/local/kubeadm.sh gomod; do not edit by hand."
    echo "// kubeadm lives in k8s.io/kubernetes, which cannot be required as is: its go.mod"
    echo "// replaces the staging modules with ./staging/src/..., so replace each with the"
    echo "// published release (the same list as deploy/controlplane)."
    echo "module github.com/actorlet/actorlet/deploy/kubeadm"
    echo
    echo "go 1.26.0"
    echo
    echo "godebug default=go1.26"
    echo
    echo "require k8s.io/kubernetes $want"
    echo
    sed -n '/^replace (/,/^)/p' "$cp"
  } >"$MODDIR/go.mod"
  rm -f "$MODDIR/go.sum"
  (cd "$MODDIR" && GOWORK=off GOFLAGS=-mod=mod go mod tidy >&2) || die "go mod tidy failed in $MODDIR"
  log "wrote $MODDIR/go.mod for k8s.io/kubernetes $want"
}

# ---------------------------------------------------------------------------------------------
# the control plane

kc() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout 20s "$@"; }

# indent N: every line of stdin indented by N spaces (a file as a YAML block scalar).
indent() { sed "s/^/$(printf '%*s' "$1" '')/"; }

cluster_dns() {
  local net=${SERVICE_CIDR%/*}
  echo "${net%.*}.$((${net##*.} + 10))"
}

ca_cert_hash() {
  local h
  h=$(openssl x509 -in "$CLUSTER_CA" -noout -pubkey | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1) ||
    die "cannot hash the public key of $CLUSTER_CA"
  echo "sha256:$h"
}

# cluster_info_kubeconfig: what kubeadm init puts in cluster-info (clientcmd.Write of a Config
# with one unnamed cluster: the API server's URL and the CA).
cluster_info_kubeconfig() {
  cat <<EOF
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: $(b64 "$CLUSTER_CA")
    server: $APISERVER
  name: ""
contexts: null
current-context: ""
kind: Config
preferences: {}
users: null
EOF
}

cluster_configuration() {
  cat <<EOF
apiServer: {}
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: actorlet
controlPlaneEndpoint: ${APISERVER#https://}
controllerManager: {}
dns: {}
encryptionAlgorithm: ECDSA-P256
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: $K8S_VERSION
networking:
  dnsDomain: cluster.local
  serviceSubnet: $SERVICE_CIDR
proxy: {}
scheduler: {}
EOF
}

kubelet_configuration() {
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: cgroupfs
clusterDNS:
- $(cluster_dns)
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
EOF
}

# role NAMESPACE NAME RESOURCE RESOURCENAME SUBJECTS: a Role granting get on one named object and
# its RoleBinding to SUBJECTS (YAML list items).
role() {
  cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: $2
  namespace: $1
rules:
- apiGroups: [""]
  resources: [$3]
  resourceNames: [$4]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: $2
  namespace: $1
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: $2
subjects:
$5
---
EOF
}

# objects: everything kubeadm init's bootstrap-token, upload-config and kubelet phases create for
# joins (cmd/kubeadm/app/phases/{bootstraptoken,uploadconfig,kubelet}), but the token.
objects() {
  local groups="- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: $TOKEN_GROUP
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:nodes"
  cat <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-info
  namespace: kube-public
data:
  kubeconfig: |
$(cluster_info_kubeconfig | indent 4)
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kubeadm-config
  namespace: kube-system
data:
  ClusterConfiguration: |
$(cluster_configuration | indent 4)
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kubelet-config
  namespace: kube-system
data:
  kubelet: |
$(kubelet_configuration | indent 4)
---
EOF
  role kube-public kubeadm:bootstrap-signer-clusterinfo configmaps cluster-info "- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:anonymous"
  role kube-system kubeadm:nodes-kubeadm-config configmaps kubeadm-config "$groups"
  role kube-system kubeadm:kubelet-config configmaps kubelet-config "$groups"
  cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubeadm:get-nodes
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get]
---
EOF
  crb kubeadm:get-nodes kubeadm:get-nodes "$TOKEN_GROUP"
  crb kubeadm:kubelet-bootstrap system:node-bootstrapper "$TOKEN_GROUP"
  crb kubeadm:node-autoapprove-bootstrap system:certificates.k8s.io:certificatesigningrequests:nodeclient "$TOKEN_GROUP"
  crb kubeadm:node-autoapprove-certificate-rotation system:certificates.k8s.io:certificatesigningrequests:selfnodeclient system:nodes
}

# ---------------------------------------------------------------------------------------------
# the bootstrap token

# token_valid: TOKEN_ENV names a token whose Secret exists and that has more than 15 min left.
token_valid() {
  [ -f "$TOKEN_ENV" ] || return 1
  # shellcheck disable=SC1090
  . "$TOKEN_ENV"
  [[ ${TOKEN_ID:-} =~ ^[a-z0-9]{6}$ && ${TOKEN_SECRET:-} =~ ^[a-z0-9]{16}$ && ${TOKEN_EXPIRES:-0} -gt $(($(date +%s) + 900)) ]] || return 1
  [ "$(kc -n kube-system get secret "bootstrap-token-$TOKEN_ID" -o 'jsonpath={.data.token-secret}' 2>/dev/null | base64 -d 2>/dev/null)" = "$TOKEN_SECRET" ]
}

# rand N: N random characters of [0-9a-f] (a token's alphabet is [a-z0-9]).
rand() { openssl rand -hex "$(($1 / 2))"; }

new_token() {
  TOKEN_ID=$(rand 6)
  TOKEN_SECRET=$(rand 16)
  TOKEN_EXPIRES=$(($(date +%s) + TOKEN_TTL))
  apply "the bootstrap token Secret bootstrap-token-$TOKEN_ID" < <(token_secret "$TOKEN_ID" "$TOKEN_SECRET" \
    "$(date -u -d "@$TOKEN_EXPIRES" +%Y-%m-%dT%H:%M:%SZ)" "actorlet kubeadm.sh init-artifacts: for kubeadm join" "$TOKEN_GROUP")
  printf 'TOKEN_ID=%s\nTOKEN_SECRET=%s\nTOKEN_EXPIRES=%s\n' "$TOKEN_ID" "$TOKEN_SECRET" "$TOKEN_EXPIRES" >"$TOKEN_ENV.tmp"
  chmod 600 "$TOKEN_ENV.tmp"
  mv "$TOKEN_ENV.tmp" "$TOKEN_ENV"
  log "made bootstrap token $TOKEN_ID (expires $(date -u -d "@$TOKEN_EXPIRES" +%H:%M:%SZ))"
}

# http_as_token PATH: the HTTP status of GET PATH with the bootstrap token.
http_as_token() {
  curl -sS -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$CLUSTER_CA" \
    -H "Authorization: Bearer $TOKEN_ID.$TOKEN_SECRET" "$APISERVER$1" 2>/dev/null || true
}

# check_token_auth: the API server authenticates the token (bootstrap token auth is on); the
# authenticator reads Secrets through an informer, so a new token may take a moment.
check_token_auth() {
  local i code=
  for ((i = 0; i < 100; i++)); do
    code=$(http_as_token /api/v1/nodes/kubeadm-sh-probe)
    case $code in
      404 | 200 | 403) return 0 ;;
    esac
    sleep 0.1
  done
  die "kube-apiserver does not accept the bootstrap token (HTTP $code for GET nodes as the token): it needs --enable-bootstrap-token-auth (controlplane.sh's bootstrap support)"
}

# wait_signed: kube-controller-manager's bootstrapsigner has signed cluster-info for our token.
wait_signed() {
  local i
  for ((i = 0; i < 600; i++)); do
    [ -n "$(kc -n kube-public get configmap cluster-info -o "jsonpath={.data.jws-kubeconfig-$TOKEN_ID}" 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  die "cluster-info has no signature for token $TOKEN_ID after 60s: kube-controller-manager needs the bootstrapsigner controller (--controllers=*,bootstrapsigner,tokencleaner; controlplane.sh's bootstrap support)"
}

# ---------------------------------------------------------------------------------------------

init_artifacts() {
  check_machine
  command -v openssl >/dev/null 2>&1 || cannot_run "openssl is missing (controlplane.sh up installs it)"
  command -v curl >/dev/null 2>&1 || cannot_run "curl is missing (controlplane.sh up installs it)"
  version
  control_plane up
  build
  lock
  [ -d "$CPDIR" ] || die "the control plane's state dir $CPDIR is gone"
  mkdir -p "$DIR"
  chmod 700 "$DIR"
  local t0
  t0=$(now_ms)
  apply "cluster-info, kubeadm-config, kubelet-config and the kubeadm RBAC" < <(objects)
  token_valid || new_token
  check_token_auth
  wait_signed
  log "join artifacts ready in $(($(now_ms) - t0)) ms (token $TOKEN_ID)"
  echo "KUBEADM=$KUBEADM"
  echo "KUBEADM_API_ENDPOINT=${APISERVER#https://}"
  echo "KUBEADM_TOKEN=$TOKEN_ID.$TOKEN_SECRET"
  echo "KUBEADM_CA_CERT_HASH=$(ca_cert_hash)"
  echo "KUBEADM_CLUSTER_DNS=$(cluster_dns)"
}

join_env() {
  local out k v
  out=$(init_artifacts)
  while IFS='=' read -r k v; do
    [ -n "$k" ] || continue
    printf 'export %s=%q\n' "$k" "$v"
    printf -v "$k" '%s' "$v"
  done <<<"$out"
  echo "# then, on the new node (root; actorlet installed by deploy/install.sh):"
  echo "# \$KUBEADM join \$KUBEADM_API_ENDPOINT --token \$KUBEADM_TOKEN --discovery-token-ca-cert-hash \$KUBEADM_CA_CERT_HASH --cri-socket unix:///run/containerd/containerd.sock --ignore-preflight-errors=KubeletVersion"
}

case "${1:-}" in
  build)
    check_machine
    build
    echo "KUBEADM=$KUBEADM"
    ;;
  init-artifacts) init_artifacts ;;
  join-env) join_env ;;
  gomod) gomod ;;
  *)
    echo "usage: $0 build|init-artifacts|join-env|gomod" >&2
    exit 2
    ;;
esac
