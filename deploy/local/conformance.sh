#!/bin/bash
# conformance.sh — the upstream e2e [NodeConformance] specs of Kubernetes (e2e.test of the control
# plane's version, v1.37.2) against actorlet, the only node of the local control plane, on the local
# containerd; no registry, no network: the test images are built here (docs/CONFORMANCE.md).
#
#   conformance.sh build    build e2e.test, ginkgo, agnhost and nonewprivs' nnp from the Go module
#                           proxy once (module deploy/conformance); cached outside the repo by version
#   conformance.sh images   build the test images the specs use (stand-ins, docs/CONFORMANCE.md) as
#                           "docker save" archives (cached) and import them into the containerd under
#                           their registry names (registry.k8s.io/e2e-test-images/...)
#   conformance.sh up       containerd (containerd.sh up) with the images, the control plane
#                           (controlplane.sh up), and actorlet (bin/actorlet; `make build` first)
#                           joined as node NAME with its own client certificate and the node API
#                           secured as kubeadm does (--client-ca-file, webhook authn/authz), on a
#                           non-loopback node IP; waits until the node is Ready
#   conformance.sh run [--slow|--resize]
#                           up, then the specs in parallel with ginkgo; the junit XML and ginkgo's
#                           JSON report go to the report dir (printed), then `report`. --slow: the
#                           [Slow] [NodeConformance] specs instead. --resize: the upstream in-place
#                           pod resize specs one node can run instead (test/e2e/common/node and
#                           test/e2e/node pod_resize.go: "Pod InPlace Resize ..." without the alpha,
#                           off-by-default ones; docs/CONFORMANCE.md). Exit 0 when the suite ran
#                           (failed specs included: see the report), 1 when it could not run
#   conformance.sh report [DIR [-]]
#                           docs/CONFORMANCE.md's results section from the report dir DIR (default:
#                           the last run's): passed/total by area and category, the failures with the
#                           first line of their message (hack/conformance-report); "-": print it
#                           instead. `run` writes the doc only for the whole default selection (no
#                           CONFORMANCE_FOCUS/SKIP, not --slow) and prints the report of a subset
#   conformance.sh down     stop actorlet (removing its pods), the control plane and the containerd
#                           of this script (its private state dirs only)
#
# Time on 2 cores (measured; the module cache filled, the Go build cache warmed by controlplane.sh's
# build, ~13 min cold, which shares most packages): build ~16.5 min (e2e.test 608 s; ginkgo, agnhost
# and nnp 376 s: static, CGO_ENABLED=0, so their packages build again); images ~10 s; up ~1 min
# (containerd.sh up ~35 s, controlplane.sh up ~17 s, the node Ready in seconds); the run of the 236
# specs with 4 ginkgo processes ~29 min; the images' busybox from source ~1-2 min once. A second
# `make conformance` pays the run only.
#
# Environment (defaults in brackets):
#   CONFORMANCE_FOCUS      ginkgo --focus [\[NodeConformance\]]
#   CONFORMANCE_SKIP       ginkgo --skip [\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:]
#                          (--slow: focus \[NodeConformance\].*\[Slow\]|\[Slow\].*\[NodeConformance\],
#                          skip without \[Slow\])
#   CONFORMANCE_NODES      ginkgo parallel processes [4]
#   CONFORMANCE_TIMEOUT    ginkgo --timeout [3h]
#   CONFORMANCE_DIR        state dir [/tmp/actorlet-conformance]: actorlet's root dir, logs, reports
#   CONFORMANCE_REPORT_DIR where a run writes its reports [<state dir>/report-<time>]
#   CONFORMANCE_NODE_NAME  the node's name [the host name, lowercased]
#   CONFORMANCE_NODE_IP    the node IP [the host's source address towards the default route]: not
#                          loopback, the API server refuses to proxy to it; pods reach it too
#   CONFORMANCE_E2E_ARGS   more flags for e2e.test (e.g. -v=4)
#   CONFORMANCE_AGENT_ARGS more flags for actorlet, after the script's (e.g. --image-gc-high-threshold
#                          100 on a machine whose disk is past the image GC or eviction thresholds)
#   ACTORLET_BIN           the agent [bin/actorlet]
#   CONFORMANCE_CGROUP_ROOT the agent's --cgroup-root [/actorlet-conformance]: made before it starts,
#                          removed by down; the agent runs with --fail-cgroupv1=false (cgroup v1 hosts)
#   ACTORLET_CONTAINERD_DIR, ACTORLET_CNI_BRIDGE, ACTORLET_CNI_SUBNET (containerd.sh) default here to
#   a private containerd [/tmp/actorlet-conformance-containerd, actconf0, 10.244.250.0/24];
#   ACTORLET_CONTROLPLANE_DIR (controlplane.sh) to [/tmp/actorlet-conformance-controlplane]: a run
#   never shares the containerd or the control plane of `go test ./test/e2e` (whose agents would kill
#   each other's pods as orphans). ACTORLET_CACHE as controlplane.sh (binaries in
#   <root>/conformance/k8s-<version>/bin, images in .../images).
#
# Exit codes: 0 ok, 1 failure, 2 usage, 3 this machine cannot run it (not root, no Go toolchain, as
# containerd.sh and controlplane.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODDIR=$ROOT/deploy/conformance
CACHE=${ACTORLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/actorlet}
CACHE=${CACHE%/}/conformance
DIR=${CONFORMANCE_DIR:-/tmp/actorlet-conformance}
DIR=${DIR%/}
case $DIR in "" | / | "$HOME") echo "conformance.sh: refusing state dir '$DIR'" >&2 && exit 2 ;; esac
LOCK=$DIR.lock
export ACTORLET_CONTAINERD_DIR=${ACTORLET_CONTAINERD_DIR:-/tmp/actorlet-conformance-containerd}
export ACTORLET_CNI_BRIDGE=${ACTORLET_CNI_BRIDGE:-actconf0}
export ACTORLET_CNI_SUBNET=${ACTORLET_CNI_SUBNET:-10.244.250.0/24}
export ACTORLET_CONTROLPLANE_DIR=${ACTORLET_CONTROLPLANE_DIR:-/tmp/actorlet-conformance-controlplane}
ACTORLET_BIN=${ACTORLET_BIN:-$ROOT/bin/actorlet}
CGROUP_ROOT=${CONFORMANCE_CGROUP_ROOT:-/actorlet-conformance}
CGROUP_ROOT=/${CGROUP_ROOT#/}
NODES=${CONFORMANCE_NODES:-4}
FOCUS=${CONFORMANCE_FOCUS:-'\[NodeConformance\]'}
SKIP=${CONFORMANCE_SKIP:-'\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:'}
TIMEOUT=${CONFORMANCE_TIMEOUT:-3h}
# Bump when an image's recipe below changes: the cached archives are rebuilt.
IMAGES_VERSION=4
E2E_REGISTRY=registry.k8s.io/e2e-test-images
export PATH=$PATH:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

PROG=conformance.sh
# log, die, cannot_run, now_ms, lock, k8s_ldflags, control_plane, mkimage
# shellcheck source=lib.sh
. "$HERE/lib.sh"

versions() {
  [ -f "$MODDIR/go.mod" ] || die "missing $MODDIR/go.mod"
  K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$MODDIR/go.mod")
  [ -n "$K8S_VERSION" ] || die "cannot read the k8s.io/kubernetes version from $MODDIR/go.mod"
  BIN=$CACHE/k8s-$K8S_VERSION/bin
  IMGDIR=$CACHE/k8s-$K8S_VERSION/images
  KSRC=$(cd "$MODDIR" && GOFLAGS=-mod=readonly GOWORK=off go list -m -f '{{.Dir}}' k8s.io/kubernetes 2>/dev/null) || KSRC=
}

check_root() { [ "$(id -u)" = 0 ] || cannot_run "must run as root (containerd, the node's cgroups)"; }

# ---------------------------------------------------------------------------------------------
# build

BINARIES=(e2e.test ginkgo agnhost nonewprivs)

all_built() {
  local b
  for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}

# gobuild OUTDIR CMD ARGS...: go CMD -o <dir> ARGS in the module (CMD: build, or test -c), the
# output moved into OUTDIR when all went well (a killed build leaves nothing).
gobuild() {
  local out=$1 cmd=$2 tmp f
  shift 2
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  if ! (cd "$MODDIR" && GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off go $cmd -o "$tmp/" "$@" >&2); then
    rm -rf "$tmp"
    die "go $cmd $* failed (in $MODDIR)"
  fi
  for f in "$tmp"/*; do mv -f "$f" "$out/"; done
  rmdir "$tmp"
}

build() {
  versions
  all_built && return 0
  command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH (needed to build e2e.test)"
  local ld t0
  ld=$(k8s_ldflags "$K8S_VERSION")
  if [ ! -x "$BIN/e2e.test" ]; then
    log "building e2e.test $K8S_VERSION into $BIN (~10 min on 2 cores after the control plane's build)"
    t0=$(now_ms)
    # go test -c names its output after the package (e2e.test) inside the -o directory.
    gobuild "$BIN" "test -c" -trimpath -ldflags="$ld" k8s.io/kubernetes/test/e2e
    log "built e2e.test in $((($(now_ms) - t0) / 1000))s"
  fi
  if ! { [ -x "$BIN/ginkgo" ] && [ -x "$BIN/agnhost" ] && [ -x "$BIN/nonewprivs" ]; }; then
    log "building ginkgo, agnhost and nonewprivs (static) into $BIN"
    t0=$(now_ms)
    CGO_ENABLED=0 gobuild "$BIN" build -trimpath -ldflags="$ld" github.com/onsi/ginkgo/v2/ginkgo \
      k8s.io/kubernetes/test/images/agnhost k8s.io/kubernetes/test/images/nonewprivs
    log "built ginkgo, agnhost and nonewprivs in $((($(now_ms) - t0) / 1000))s"
  fi
  all_built || die "build finished but binaries are missing in $BIN"
}

# gomod: regenerate deploy/conformance/go.mod from deploy/controlplane/go.mod (the same
# k8s.io/kubernetes and staging replaces) plus ginkgo, then go mod tidy.
gomod() {
  command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH"
  local cp=$ROOT/deploy/controlplane/go.mod
  {
    echo "// Generated like deploy/controlplane/go.mod (deploy/local/conformance.sh gomod); do not edit by hand."
    echo "// The upstream e2e suite (e2e.test), ginkgo and agnhost at the control plane's version."
    echo "module github.com/actorlet/actorlet/deploy/conformance"
    echo
    echo "go 1.26.0"
    echo
    echo "godebug default=go1.26"
    echo
    echo "require k8s.io/kubernetes $(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$cp")"
    echo
    sed -n '/^replace (/,/^)/p' "$cp"
  } >"$MODDIR/go.mod"
  rm -f "$MODDIR/go.sum"
  (cd "$MODDIR" && GOWORK=off go mod tidy >&2)
  log "wrote $MODDIR/go.mod"
}

# ---------------------------------------------------------------------------------------------
# images: stand-ins for registry.k8s.io/e2e-test-images/*, built from this machine's files (Debian
# packages) and the binaries above; what each lacks is in docs/CONFORMANCE.md.

# add_bins ROOTFS FILE...: copy each executable and the shared libraries it loads (ldd) to the same
# paths under ROOTFS.
add_bins() {
  local r=$1 f l
  shift
  for f in "$@"; do
    [ -e "$f" ] || die "missing $f (install its Debian package)"
    install -D -m 0755 "$f" "$r$f"
    for l in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
      [ -e "$r$l" ] || install -D -m 0755 "$(readlink -f "$l")" "$r$l"
    done
  done
}

# busybox_binary: upstream's busybox (the source of Debian's package, without Debian's patches),
# static, built once with Debian's static config plus nc's -u (NC_110_COMPAT, as upstream's
# defconfig); prints its path. Debian's busybox-static is not faithful: a Debian patch reverts
# upstream's ash keeping environment variables whose names are not shell identifiers (p-data-1 of
# the ConfigMap and Secret envFrom specs, which run `sh -c env`), and its nc has no -u. ash itself
# is needed: specs compare its error messages ("/bin/sh: can't create /file: Read-only file
# system").
busybox_binary() {
  local d=$IMGDIR/busybox-src src
  if [ ! -x "$d/busybox" ]; then
    log "building busybox from Debian's source package (upstream's tarball; ~3 min)"
    rm -rf "$d" && mkdir -p "$d/lists/partial" && chmod 0777 "$d"
    echo 'deb-src http://deb.debian.org/debian bookworm main' >"$d/src.list"
    local o=(-o "Dir::Etc::SourceList=$d/src.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$d/lists")
    { apt-get "${o[@]}" update -qq && (cd "$d" && apt-get "${o[@]}" source --download-only busybox); } >&2 ||
      die "could not download busybox's source package"
    tar -C "$d" -xjf "$d"/busybox_*.orig.tar.bz2
    src=$(echo "$d"/busybox-[0-9]*/)
    tar -C "$src" -xJf "$d"/busybox_*.debian.tar.xz debian/config/pkg/static
    cp "$src/debian/config/pkg/static" "$src/.config"
    sed -i 's/^# CONFIG_NC_110_COMPAT is not set$/CONFIG_NC_110_COMPAT=y/' "$src/.config"
    (cd "$src" && { yes '' || true; } | make oldconfig >/dev/null 2>&1 && make -j"$(nproc)" busybox >&2) || die "busybox build failed"
    install -m 0755 "$src/busybox" "$d/busybox"
    rm -rf "$src"
  fi
  echo "$d/busybox"
}

# base_rootfs DIR: busybox's applets and ash as sh (busybox_binary), bash at /bin/bash.
base_rootfs() {
  local r=$1 a bb
  bb=$(busybox_binary)
  rm -rf "$r" && mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,tmp,proc,sys,dev,root,home,var/run,var/tmp}
  chmod 1777 "$r/tmp" "$r/var/tmp"
  install -m 0755 "$bb" "$r/bin/busybox"
  for a in $("$bb" --list); do
    case $a in busybox | bash) ;; *) ln -s busybox "$r/bin/$a" ;; esac
  done
  install -m 0755 /bin/bash-static "$r/bin/bash"
  printf 'root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
  printf 'root:x:0:\ndaemon:x:1:\nnogroup:x:65534:\n' >"$r/etc/group"
  printf 'hosts: files dns\nnetworks: files\npasswd: files\ngroup: files\n' >"$r/etc/nsswitch.conf"
}

image_refs() {
  # ref archive
  cat <<EOF
$E2E_REGISTRY/busybox:1.37.0-2 busybox
$E2E_REGISTRY/agnhost:2.66.1 agnhost
$E2E_REGISTRY/agnhost:2.55 agnhost
$E2E_REGISTRY/nginx:1.27.0-2 nginx
$E2E_REGISTRY/nginx:1.28.0-2 nginx
$E2E_REGISTRY/nonroot:1.5 nonroot
$E2E_REGISTRY/nonewprivs:1.4 nonewprivs
$E2E_REGISTRY/glibc-dns-testing:2.1.1 glibc-dns-testing
registry.k8s.io/pause:3.10.2 pause
EOF
}

install_image_pkgs() {
  local missing=()
  command -v make >/dev/null 2>&1 || missing+=(make)
  command -v bzip2 >/dev/null 2>&1 || missing+=(bzip2)
  [ -x /bin/bash-static ] || missing+=(bash-static)
  command -v dig >/dev/null 2>&1 || missing+=(bind9-dnsutils)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  [ -x /usr/bin/nc.openbsd ] || missing+=(netcat-openbsd)
  [ -x /usr/bin/hostname ] || missing+=(hostname)
  [ ${#missing[@]} -eq 0 ] && return 0
  [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1 ||
    cannot_run "missing ${missing[*]} and this is not a Debian-like system"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; } ||
    cannot_run "apt-get could not install ${missing[*]}"
}

# nginx_binary: Debian's nginx package unpacked (not installed: its postinst would start a server on
# this host's port 80); prints the unpacked tree.
nginx_binary() {
  local d=$IMGDIR/nginx-deb
  if [ ! -x "$d/usr/sbin/nginx" ]; then
    rm -rf "$d" && mkdir -p "$d/dl" && chmod 0777 "$d/dl" # apt's _apt user writes there
    (cd "$d/dl" && apt-get download nginx >&2) || die "apt-get download nginx failed"
    dpkg-deb -x "$d"/dl/nginx_*.deb "$d"
  fi
  echo "$d"
}

build_image() {
  local name=$1 r=$IMGDIR/$1-rootfs ref
  ref=$(image_refs | awk -v n="$name" '$2 == n {print $1; exit}')
  case $name in
    busybox)
      base_rootfs "$r"
      mkimage "$r" "$ref" "$IMGDIR/$name.tar" 'null' '["sh"]'
      ;;
    agnhost)
      base_rootfs "$r"
      install -m 0755 "$BIN/agnhost" "$r/agnhost"
      ln -s agnhost "$r/agnhost-2"
      install -m 0644 "$KSRC/test/images/agnhost/porter/localhost.crt" "$r/localhost.crt"
      install -m 0644 "$KSRC/test/images/agnhost/porter/localhost.key" "$r/localhost.key"
      mkdir -p "$r/uploads"
      add_bins "$r" /usr/bin/curl /usr/bin/dig /usr/bin/nslookup /usr/bin/host /usr/bin/nc.openbsd
      # upstream's nc is netcat-openbsd: the networking specs send UDP with `nc -w 1 -u`, which
      # busybox's nc lacks
      rm -f "$r/bin/nc"
      ln -s /usr/bin/nc.openbsd "$r/bin/nc"
      echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$r/etc/passwd"
      printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$r/etc/group"
      mkdir -p "$r/home/user-defined-in-image" && chown 1000:1000 "$r/home/user-defined-in-image"
      mkimage "$r" "$ref" "$IMGDIR/$name.tar" '["/agnhost"]' '["pause"]' \
        '"ExposedPorts":{"80/tcp":{},"8080/tcp":{},"8081/tcp":{},"9376/tcp":{},"5000/tcp":{}}'
      ;;
    nginx)
      local deb
      deb=$(nginx_binary)
      base_rootfs "$r"
      install -D -m 0755 "$deb/usr/sbin/nginx" "$r/usr/sbin/nginx"
      for l in $(ldd "$deb/usr/sbin/nginx" | grep -o '/[^ ]*'); do
        [ -e "$r$l" ] || install -D -m 0755 "$(readlink -f "$l")" "$r$l"
      done
      mkdir -p "$r"/etc/nginx "$r"/var/log/nginx "$r"/var/lib/nginx "$r"/var/cache/nginx "$r"/usr/share/nginx/html "$r"/run
      # mime.types is nginx-common's (not unpacked): the types a test page needs.
      printf 'types {\n  text/html html htm;\n  text/plain txt;\n  application/json json;\n}\n' >"$r/etc/nginx/mime.types"
      echo 'nginx:x:101:101:nginx:/nonexistent:/bin/false' >>"$r/etc/passwd"
      echo 'nginx:x:101:' >>"$r/etc/group"
      cat >"$r/etc/nginx/nginx.conf" <<'EOF'
user nginx;
worker_processes auto;
error_log /var/log/nginx/error.log notice;
pid /var/run/nginx.pid;
events { worker_connections 1024; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log /var/log/nginx/access.log;
  sendfile on;
  keepalive_timeout 65;
  server {
    listen 80;
    server_name localhost;
    location / { root /usr/share/nginx/html; index index.html; }
  }
}
EOF
      ln -sf /dev/stdout "$r/var/log/nginx/access.log"
      ln -sf /dev/stderr "$r/var/log/nginx/error.log"
      echo '<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1></body></html>' >"$r/usr/share/nginx/html/index.html"
      mkimage "$r" "$ref" "$IMGDIR/$name.tar" 'null' '["nginx","-g","daemon off;"]' \
        '"ExposedPorts":{"80/tcp":{}},"StopSignal":"SIGQUIT"'
      ;;
    nonroot)
      base_rootfs "$r"
      mkimage "$r" "$ref" "$IMGDIR/$name.tar" 'null' '["sh"]' '"User":"1234"'
      ;;
    nonewprivs)
      base_rootfs "$r"
      install -D -m 4755 "$BIN/nonewprivs" "$r/usr/local/bin/nnp"
      mkimage "$r" "$ref" "$IMGDIR/$name.tar" 'null' '["nnp"]'
      ;;
    glibc-dns-testing)
      base_rootfs "$r"
      rm -f "$r/bin/hostname"
      add_bins "$r" /usr/bin/dig /usr/bin/nslookup /usr/bin/host /usr/bin/hostname
      ln -s /usr/bin/hostname "$r/bin/hostname"
      mkimage "$r" "$ref" "$IMGDIR/$name.tar" 'null' '["bash"]'
      ;;
    pause)
      build_pause "$r/pause"
      mkimage "$r" "$ref" "$IMGDIR/$name.tar" '["/pause"]' 'null'
      ;;
    *) die "unknown image $name" ;;
  esac
  rm -rf "$r"
}

# images: build the archives that are missing (or of an older IMAGES_VERSION), then import every
# ref into containerd (needs it up: CONTAINER_RUNTIME_ENDPOINT).
images() {
  versions
  build
  install_image_pkgs
  [ -n "$KSRC" ] && [ -d "$KSRC/test/images" ] || die "k8s.io/kubernetes source not found in the module cache"
  mkdir -p "$IMGDIR"
  if [ "$(cat "$IMGDIR/version" 2>/dev/null)" != "$IMAGES_VERSION" ]; then
    rm -f "$IMGDIR"/*.tar
    echo "$IMAGES_VERSION" >"$IMGDIR/version"
  fi
  local name ref t0 sock
  t0=$(now_ms)
  for name in $(image_refs | awk '{print $2}' | sort -u); do
    [ -s "$IMGDIR/$name.tar" ] && continue
    log "building image $name"
    build_image "$name"
  done
  [ -n "${CONTAINER_RUNTIME_ENDPOINT:-}" ] || containerd_up
  sock=${CONTAINER_RUNTIME_ENDPOINT#unix://}
  # Always imported (what is there already costs little): a rebuilt archive replaces its image.
  local first
  while read -r ref name; do
    # import tags the archive's own ref; the second ref of an archive (agnhost:2.55, nginx:1.28.0-2)
    # is a tag of the first.
    first=$(image_refs | awk -v n="$name" '$2 == n {print $1; exit}')
    if [ "$first" = "$ref" ]; then
      ctr -a "$sock" -n k8s.io images import "$IMGDIR/$name.tar" >/dev/null
    else
      ctr -a "$sock" -n k8s.io images tag --force "$first" "$ref" >/dev/null
    fi
  done < <(image_refs)
  log "images ready in $(($(now_ms) - t0)) ms"
}

# ---------------------------------------------------------------------------------------------
# the node

containerd_up() {
  local out k v
  out=$("$HERE/containerd.sh" up) || exit $?
  while IFS='=' read -r k v; do
    case $k in CONTAINER_RUNTIME_ENDPOINT) CONTAINER_RUNTIME_ENDPOINT=$v ;; esac
  done <<<"$out"
  [ -n "${CONTAINER_RUNTIME_ENDPOINT:-}" ] || die "unexpected output of containerd.sh up: $out"
}

node_name() {
  NODE_NAME=${CONFORMANCE_NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
  NODE_IP=${CONFORMANCE_NODE_IP:-$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
  [ -n "$NODE_IP" ] || die "no default route to take the node IP from: set CONFORMANCE_NODE_IP"
  case $NODE_IP in 127.*) die "node IP $NODE_IP is loopback: the API server does not proxy to it" ;; esac
}

agent_pid() { pid_for "$DIR/actorlet.pid" "$DIR"; }

kc() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# free_port FIRST: the first port at or above FIRST nobody listens on.
free_port() {
  local p=$1
  while [ -n "$(ss -Htln "( sport = :$p )" 2>/dev/null)" ]; do p=$((p + 1)); done
  echo "$p"
}

start_agent() {
  [ -x "$ACTORLET_BIN" ] || die "no $ACTORLET_BIN (run: make build)"
  local out nk port hz
  out=$("$HERE/controlplane.sh" node-kubeconfig "$NODE_NAME") || die "controlplane.sh node-kubeconfig failed"
  nk=${out#NODE_KUBECONFIG=}
  port=$(free_port 11250)
  hz=$(free_port 11248)
  mkdir -p "$DIR/root" "$DIR/pods"
  # A copy: a `make build` during the run (the checkout is shared) must not change the agent under
  # test; the commit it was built from is recorded with it.
  install -m 0755 "$ACTORLET_BIN" "$DIR/actorlet"
  if [ -f "$DIR/actorlet.log" ]; then mv -f "$DIR/actorlet.log" "$DIR/actorlet.log.prev"; fi
  AGENT_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then AGENT_COMMIT+=-dirty; fi
  log "starting actorlet ($ACTORLET_BIN, checkout at $AGENT_COMMIT) as node $NODE_NAME on $NODE_IP:$port (log $DIR/actorlet.log)"
  cgroup_root_up "$CGROUP_ROOT"
  setsid "$DIR/actorlet" --kubeconfig "$nk" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --container-runtime-endpoint "$CONTAINER_RUNTIME_ENDPOINT" \
    --root-dir "$DIR/root" --pod-logs-dir "$DIR/pods" --cert-dir "$DIR/pki" \
    --address 0.0.0.0 --port "$port" --read-only-port 0 --healthz-port "$hz" \
    --anonymous-auth=false --client-ca-file "$CLUSTER_CA" \
    --authentication-token-webhook --authorization-mode=Webhook \
    --cgroup-root "$CGROUP_ROOT" --fail-cgroupv1=false \
    ${CONFORMANCE_AGENT_ARGS:-} \
    </dev/null >"$DIR/actorlet.log" 2>&1 9>&- &
  echo $! >"$DIR/actorlet.pid"
  exec_wait $!
  printf 'NODE_NAME=%s\nNODE_IP=%s\nNODE_PORT=%s\nKUBELET_ROOT=%s\nAGENT_COMMIT=%s\n' \
    "$NODE_NAME" "$NODE_IP" "$port" "$DIR/root" "$AGENT_COMMIT" >"$DIR/node.env"
}

wait_ready() {
  local i
  for ((i = 0; i < 120; i++)); do
    agent_pid >/dev/null || { tail -n 30 "$DIR/actorlet.log" >&2; die "actorlet exited (log $DIR/actorlet.log)"; }
    [ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && return 0
    sleep 1
  done
  tail -n 30 "$DIR/actorlet.log" >&2
  die "node $NODE_NAME not Ready after 120s (log $DIR/actorlet.log)"
}

up() {
  check_root
  mkdir -p "$DIR"
  lock
  versions
  build
  containerd_up
  images
  control_plane up
  node_name
  if agent_pid >/dev/null && ! cmp -s "$ACTORLET_BIN" "$DIR/actorlet"; then
    # A run tests the agent as built now, never one left running from an older build.
    log "$ACTORLET_BIN differs from the running agent's binary: restarting the agent"
    stop_agent
  fi
  if ! agent_pid >/dev/null; then
    # A new agent: the node object of an older run (another IP, port) is replaced.
    kc delete node "$NODE_NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    start_agent
  fi
  wait_ready
  {
    echo "KUBECONFIG=$ADMIN_KUBECONFIG"
    echo "KUBECTL=$KUBECTL"
    cat "$DIR/node.env"
  } >"$DIR/cluster.env"
  log "node $NODE_NAME Ready"
  cat "$DIR/cluster.env"
}

# ---------------------------------------------------------------------------------------------
# run and report

run() {
  local slow=false resize=false
  case "${1:-}" in
    --slow) slow=true ;;
    --resize) resize=true ;;
    "") ;;
    *) echo "usage: $0 run [--slow|--resize]" >&2 && exit 2 ;;
  esac
  up >/dev/null
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
  if $slow; then
    FOCUS=${CONFORMANCE_FOCUS:-'\[NodeConformance\].*\[Slow\]|\[Slow\].*\[NodeConformance\]'}
    SKIP=${CONFORMANCE_SKIP:-'\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:'}
  fi
  if $resize; then
    # In-place pod resize: its specs carry [Feature:InPlacePodVerticalScaling] or
    # [FeatureGate:InPlacePodVerticalScaling] (GA, on), and [Serial] ones (ginkgo runs those alone at
    # the end); the alpha, off-by-default ones (memory-backed volumes, deferred-resize preemption)
    # need gates this control plane does not turn on. "PLR Pod InPlace Resize" (pod-level
    # resources, 127 [Slow] specs) is its own run: CONFORMANCE_FOCUS='PLR Pod InPlace Resize'.
    FOCUS=${CONFORMANCE_FOCUS:-'\[sig-node\] Pod InPlace Resize'}
    SKIP=${CONFORMANCE_SKIP:-'\[Alpha\]|\[Feature:OffByDefault\]|\[Disruptive\]|\[Flaky\]'}
  fi
  local rd=${CONFORMANCE_REPORT_DIR:-$DIR/report-$(date -u +%Y%m%dT%H%M%SZ)} t0 rc=0
  mkdir -p "$rd"
  ln -sfn "$rd" "$DIR/report-last"
  log "running e2e.test $K8S_VERSION: focus '$FOCUS' skip '$SKIP', $NODES processes; reports in $rd"
  t0=$(now_ms)
  # ginkgo's exit code is 1 when a spec failed: the report says which.
  (cd "$rd" && "$BIN/ginkgo" --procs="$NODES" --timeout="$TIMEOUT" --no-color --silence-skips --poll-progress-after=10m \
    --focus="$FOCUS" --skip="$SKIP" --json-report=ginkgo.json --output-dir="$rd" \
    "$BIN/e2e.test" -- \
    --kubeconfig="$KUBECONFIG" --kubectl-path="$KUBECTL" --provider=local --report-dir="$rd" \
    --node-os-distro=debian --kubelet-root-dir="$KUBELET_ROOT" --dump-logs-on-failure=false \
    --disable-log-dump --e2e-output-dir="$rd" ${CONFORMANCE_E2E_ARGS:-}) || rc=$?
  log "suite finished in $((($(now_ms) - t0) / 1000))s (ginkgo exit $rc)"
  cp "$DIR/actorlet.log" "$rd/actorlet.log" 2>/dev/null || true
  cp "$DIR/node.env" "$rd/node.env" 2>/dev/null || true
  [ -s "$rd/ginkgo.json" ] || [ -n "$(ls "$rd"/junit*.xml 2>/dev/null)" ] || die "the suite wrote no report (ginkgo exit $rc)"
  # Only the whole default selection makes docs/CONFORMANCE.md's figures; a subset is printed.
  if [ -z "${CONFORMANCE_FOCUS:-}${CONFORMANCE_SKIP:-}" ] && ! $slow && ! $resize; then
    report "$rd"
  else
    report "$rd" -
  fi
}

# report [DIR [-]]: the results of the run in DIR (default: the last one) into docs/CONFORMANCE.md,
# or on stdout with "-".
report() {
  local rd=${1:-$DIR/report-last} doc=(-doc docs/CONFORMANCE.md)
  [ "${2:-}" = - ] && doc=()
  [ -d "$rd" ] || die "no report dir $rd"
  (cd "$ROOT" && GOWORK=off go run ./hack/conformance-report -dir "$rd" ${doc[@]+"${doc[@]}"}) ||
    die "hack/conformance-report failed"
}

# stop_agent: SIGTERM, up to 10 s, then SIGKILL.
stop_agent() {
  local pid i
  if pid=$(agent_pid); then
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/actorlet.pid"
}

down() {
  mkdir -p "$DIR"
  lock
  stop_agent
  "$HERE/controlplane.sh" down || true
  if [ "$(id -u)" = 0 ]; then cgroup_root_down "$CGROUP_ROOT"; fi
  if [ "$(id -u)" = 0 ]; then "$HERE/containerd.sh" down || true; fi
  # the agent's root dir (pod volumes may still be mounted under it: lazily unmount them first)
  local m
  for m in $(findmnt -rn -o TARGET | awk -v d="$DIR/" 'index($0, d) == 1' | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$DIR/root" "$DIR/pods" "$DIR/pki"
  log "down (reports kept in $DIR)"
}

case "${1:-}" in
  build)
    check_machine
    build
    log "binaries: $BIN"
    ;;
  images)
    check_root
    images
    ;;
  up) up ;;
  run) run "${2:-}" ;;
  report) versions && report "${2:-}" "${3:-}" ;;
  down) down ;;
  gomod) gomod ;;
  *)
    echo "usage: $0 build|images|up|run [--slow|--resize]|report [DIR]|down|gomod" >&2
    exit 2
    ;;
esac
