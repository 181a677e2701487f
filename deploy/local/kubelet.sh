#!/bin/bash
# kubelet.sh — the upstream kubelet of the control plane's Kubernetes version, built from the Go module
# proxy for `actorlet-bench --against upstream` (docs/BENCHMARKS.md, "Against the upstream kubelet").
#
#   kubelet.sh build    build k8s.io/kubernetes/cmd/kubelet once (module deploy/controlplane, the same
#                       pins and staging replaces as the control plane) into the binary cache; prints
#                       exactly KUBELET=<path> on stdout
#   kubelet.sh path     print KUBELET=<path> if it is built, exit 1 otherwise
#
# Cost on 2 cores with the Go build cache warmed by controlplane.sh's build (most packages are shared):
# a few minutes; cold, ~10 min. ~85 MB binary.
#
# Environment: ACTORLET_CACHE as controlplane.sh (the binary goes to
# <root>/controlplane/k8s-<version>/bin/kubelet, beside kube-apiserver).
#
# Exit codes: 0 ok, 1 failure (path: not built), 2 usage, 3 this machine cannot run it (not Linux, no
# Go toolchain).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODDIR=$ROOT/deploy/controlplane
CACHE=${ACTORLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/actorlet}
CACHE=${CACHE%/}/controlplane
export PATH=$PATH:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

PROG=kubelet.sh
# log, die, cannot_run, now_ms, k8s_ldflags
# shellcheck source=lib.sh
. "$HERE/lib.sh"

version() {
  [ -f "$MODDIR/go.mod" ] || die "missing $MODDIR/go.mod"
  K8S_VERSION=$(awk '($1 == "require" && $2 == "k8s.io/kubernetes") {print $3; exit}
    ($1 == "k8s.io/kubernetes" && $2 ~ /^v/) {print $2; exit}' "$MODDIR/go.mod")
  [ -n "$K8S_VERSION" ] || die "cannot read the pinned k8s.io/kubernetes version from $MODDIR/go.mod"
  KUBELET=$CACHE/k8s-$K8S_VERSION/bin/kubelet
}

build() {
  [ "$(uname -s)" = Linux ] || cannot_run "needs Linux"
  version
  if [ ! -x "$KUBELET" ]; then
    command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH (needed to build the kubelet)"
    local out tmp t0
    out=$(dirname "$KUBELET")
    mkdir -p "$out"
    tmp=$(mktemp -d "$out/.build-kubelet.XXXXXX")
    log "building kubelet $K8S_VERSION into $out (warm Go build cache: minutes; cold: ~10 min on 2 cores)"
    t0=$(now_ms)
    # Built into a temporary directory and moved: a killed build leaves nothing.
    if ! (cd "$MODDIR" && GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off \
      go build -trimpath -ldflags="$(k8s_ldflags "$K8S_VERSION")" -o "$tmp/kubelet" k8s.io/kubernetes/cmd/kubelet >&2); then
      rm -rf "$tmp"
      die "go build k8s.io/kubernetes/cmd/kubelet failed (in $MODDIR)"
    fi
    mv -f "$tmp/kubelet" "$KUBELET"
    rmdir "$tmp"
    log "built kubelet in $(( ($(now_ms) - t0) / 1000 ))s"
  fi
  echo "KUBELET=$KUBELET"
}

case "${1:-}" in
  build) build ;;
  path)
    version
    [ -x "$KUBELET" ] || exit 1
    echo "KUBELET=$KUBELET"
    ;;
  *)
    echo "usage: $0 build|path" >&2
    exit 2
    ;;
esac
