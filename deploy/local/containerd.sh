#!/bin/bash
# containerd.sh — a private, offline containerd (CRI v1) for actorlet's tests and demos.
#
#   containerd.sh up [--line 1|2]
#                         install what is missing (Debian), build busybox + pause images locally
#                         (no registry), start containerd on a private socket, import the images
#   containerd.sh build --line 2
#                         build (once, cached by version) containerd 2.x and runc from the Go
#                         module proxy, at the versions deploy/containerd2/go.mod pins
#   containerd.sh status  print the lines below and exit 0 if running, else exit 1
#   containerd.sh down    remove every pod and container, stop containerd and its shims,
#                         unmount, delete the bridge, iptables leftovers, state dir, cgroups
#   containerd.sh stop-runtime   stop the containerd daemon only (a runtime outage): its shims,
#                         containers, network and state stay; the socket stops answering
#   containerd.sh start-runtime  start the daemon again on the same config and state; it reattaches
#                         to the running shims (containerd 1.6 does), so containers keep their IDs
#                         and processes; prints the lines below once CRI serves again
#
# On success `up` and `status` print exactly these lines on stdout (everything else goes to stderr):
#   CONTAINER_RUNTIME_ENDPOINT=unix:///<dir>/containerd.sock
#   BUSYBOX_IMAGE=<ref>
#   PAUSE_IMAGE=<ref>
#   CONTAINERD_LINE=<1|2>
#   CDI_SPEC_DIR=<dir>      (line 2 only: write CDI specs here; containerd 2.x reads them)
#
# Two containerd lines:
#   1 (default)  Debian's packages (containerd 1.6.20, runc 1.1.5): no CDI.
#   2            containerd 2.x and runc built by `build` from deploy/containerd2/go.mod (cached in
#                $ACTORLET_CACHE/containerd/containerd-<version>/bin and .../runc-<version>/bin), a
#                version 3 config, CDI on (cdi_spec_dirs = <dir>/cdi). runc is built with seccomp
#                (libseccomp-dev, installed by apt when missing).
# A state dir holds one line: the line `up` chose is recorded in it, and status, stop-runtime,
# start-runtime and down act on that line whatever ACTORLET_CONTAINERD_LINE says; `up` with the
# other line on a running dir fails (run `down` first).
#
# Exit codes: 0 ok, 1 not running (status) or failure, 2 usage, 3 this machine cannot run it
# (not root, not Debian-like with packages missing, packages not installable, no namespaces).
#
# Environment:
#   ACTORLET_CONTAINERD_DIR  state dir (default /tmp/actorlet-containerd); all of containerd's
#                            root, state, config, logs, images and CNI data live here
#   ACTORLET_CNI_BRIDGE      bridge name (default actorlet0)
#   ACTORLET_CNI_SUBNET      pod subnet (default 10.244.213.0/24)
#   ACTORLET_CONTAINERD_LINE 1 or 2 (default 1), as --line
#   ACTORLET_CACHE           binary cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/actorlet)
set -euo pipefail

DIR=${ACTORLET_CONTAINERD_DIR:-/tmp/actorlet-containerd}
DIR=${DIR%/}
SOCK=$DIR/containerd.sock
CFG=$DIR/config.toml
PIDF=$DIR/containerd.pid
LOGF=$DIR/containerd.log
IMGDIR=$DIR/images
CNI_CONF_DIR=$DIR/cni/net.d
NETINFO=$DIR/network.env
CGMARK=$DIR/created-cgroups
LOCK=$DIR.lock
NET_NAME=actorlet
BRIDGE=${ACTORLET_CNI_BRIDGE:-actorlet0}
SUBNET=${ACTORLET_CNI_SUBNET:-10.244.213.0/24}
PAUSE_IMAGE=localhost/actorlet/pause:1.0
BUSYBOX_IMAGE= # set by busybox_ref
NS=k8s.io
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MOD2=$ROOT/deploy/containerd2
CACHE=${ACTORLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/actorlet}
CACHE=${CACHE%/}/containerd
LINEF=$DIR/line
LINE=${ACTORLET_CONTAINERD_LINE:-1}
CDI_DIR=$DIR/cdi
PROG=containerd.sh
# mkimage, go_arch (the log, die, cannot_run and check_machine below replace lib.sh's)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

log() { echo "containerd.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
cannot_run() { log "cannot run here: $*"; exit 3; }

busybox_ref() {
  # A fixed tag, so manifests can name it: deploy/examples use it on both
  # containerd and the sim runtime. Not "latest", which would mean
  # imagePullPolicy Always (and there is no registry to pull from).
  BUSYBOX_IMAGE=localhost/actorlet/busybox:1
}

print_lines() {
  echo "CONTAINER_RUNTIME_ENDPOINT=unix://$SOCK"
  echo "BUSYBOX_IMAGE=$BUSYBOX_IMAGE"
  echo "PAUSE_IMAGE=$PAUSE_IMAGE"
  echo "CONTAINERD_LINE=$LINE"
  if [ "$LINE" = 2 ]; then echo "CDI_SPEC_DIR=$CDI_DIR"; fi
}

# ---------------------------------------------------------------------------------------------
# lines: 1 = Debian's containerd 1.6, 2 = containerd 2.x and runc built from the module proxy

check_line() {
  case $LINE in 1 | 2) ;; *) log "error: containerd line '$LINE' (want 1 or 2)"; exit 2 ;; esac
}

# recorded_line: a state dir that was brought up keeps its line (status/down/stop/start use it).
recorded_line() {
  if [ -f "$LINEF" ]; then LINE=$(cat "$LINEF"); fi
  check_line
}

# modver FILE MODULE: the version FILE's go.mod requires of MODULE.
modver() {
  awk -v m="$2" '($1 == m && $2 ~ /^v/) {print $2; exit} ($1 == "require" && $2 == m) {print $3; exit}' "$1"
}

# line2_paths: the pinned versions and their cache dirs; puts them first on PATH, so containerd,
# ctr, containerd-shim-runc-v2 and runc are line 2's.
line2_paths() {
  [ -f "$MOD2/go.mod" ] || die "missing $MOD2/go.mod"
  C2_VERSION=$(modver "$MOD2/go.mod" github.com/containerd/containerd/v2)
  RUNC_VERSION=$(modver "$MOD2/go.mod" github.com/opencontainers/runc)
  [[ -n $C2_VERSION && -n $RUNC_VERSION ]] || die "cannot read the pinned versions from $MOD2/go.mod"
  C2BIN=$CACHE/containerd-$C2_VERSION/bin
  RUNCBIN=$CACHE/runc-$RUNC_VERSION/bin
  RUNC=$RUNCBIN/runc
  export PATH=$C2BIN:$RUNCBIN:$PATH
}

line2_built() {
  local b
  for b in containerd ctr containerd-shim-runc-v2; do [ -x "$C2BIN/$b" ] || return 1; done
  [ -x "$RUNC" ]
}

# go_build OUTDIR CGO TAGS LDFLAGS PKG...: build PKGs in deploy/containerd2 into OUTDIR
# atomically (a killed build leaves nothing behind).
go_build() {
  local out=$1 cgo=$2 tags=$3 ld=$4 tmp f
  shift 4
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  if ! (cd "$MOD2" && CGO_ENABLED=$cgo GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off \
    go build -trimpath -tags "$tags" -ldflags "$ld" -o "$tmp/" "$@" >&2); then
    rm -rf "$tmp"
    die "go build $* failed (in $MOD2)"
  fi
  for f in "$tmp"/*; do mv -f "$f" "$out/"; done
  rmdir "$tmp"
}

# build2: containerd, ctr and the runc shim (containerd's Makefile: the shim static, without cgo,
# tag no_grpc) stamped with the version as containerd's Makefile does (version.Version, .Package),
# so `containerd --version` and the CRI Version answer say it; runc with seccomp as runc's Makefile
# builds it (tags seccomp urfave_cli_no_docs; not libpathrs, a Rust library Debian lacks); runc
# embeds its own VERSION file.
build2() {
  line2_paths
  line2_built && return 0
  command -v go >/dev/null 2>&1 || cannot_run "no Go toolchain on PATH (needed to build containerd $C2_VERSION)"
  local pkgs=()
  { command -v gcc >/dev/null 2>&1 && command -v pkg-config >/dev/null 2>&1 &&
    pkg-config --exists libseccomp; } || pkgs+=(gcc pkg-config libseccomp-dev)
  if [ ${#pkgs[@]} -gt 0 ]; then
    is_debian_like || cannot_run "missing ${pkgs[*]} (runc's seccomp) and this is not a Debian-like system"
    [ "$(id -u)" = 0 ] || cannot_run "missing ${pkgs[*]}; installing needs root"
    log "installing ${pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2; } ||
      cannot_run "apt-get could not install ${pkgs[*]}"
  fi
  local p=github.com/containerd/containerd/v2 t0 ld
  ld="-s -w -X $p/version.Version=$C2_VERSION -X $p/version.Package=$p"
  t0=$(date +%s)
  if [ ! -x "$C2BIN/containerd" ] || [ ! -x "$C2BIN/ctr" ]; then
    log "building containerd $C2_VERSION into $C2BIN (cold caches: ~5 min on 2 idle cores)"
    go_build "$C2BIN" 1 "" "$ld" "$p/cmd/containerd" "$p/cmd/ctr"
  fi
  if [ ! -x "$C2BIN/containerd-shim-runc-v2" ]; then
    log "building containerd-shim-runc-v2 $C2_VERSION into $C2BIN"
    go_build "$C2BIN" 0 no_grpc "$ld" "$p/cmd/containerd-shim-runc-v2"
  fi
  if [ ! -x "$RUNC" ]; then
    log "building runc $RUNC_VERSION (seccomp) into $RUNCBIN"
    go_build "$RUNCBIN" 1 "seccomp urfave_cli_no_docs" "-s -w" github.com/opencontainers/runc
  fi
  line2_built || die "build finished but binaries are missing in $C2BIN / $RUNCBIN"
  log "built containerd $C2_VERSION and runc $RUNC_VERSION in $(($(date +%s) - t0))s"
}

ctrc() { ctr -a "$SOCK" -n "$NS" "$@"; }

running() {
  [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null && [ -S "$SOCK" ] &&
    ctr -a "$SOCK" version >/dev/null 2>&1
}

images_present() {
  local have
  have=$(ctrc images ls -q 2>/dev/null) || return 1
  grep -qxF "$PAUSE_IMAGE" <<<"$have" && grep -qxF "$BUSYBOX_IMAGE" <<<"$have"
}

# ---------------------------------------------------------------------------------------------
# checks and packages

check_machine() {
  [ "$(id -u)" = 0 ] || cannot_run "must run as root (uid $(id -u))"
  [ "$(uname -s)" = Linux ] || cannot_run "needs Linux"
}

is_debian_like() {
  [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1
}

cni_bin_dir() {
  local d
  for d in /usr/lib/cni /opt/cni/bin /usr/libexec/cni; do
    if [ -x "$d/bridge" ] && [ -x "$d/host-local" ] && [ -x "$d/portmap" ]; then echo "$d"; return 0; fi
  done
  return 1
}

install_pkgs() {
  local missing=()
  if [ "$LINE" = 1 ]; then # line 2 brings its own (build2)
    command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 &&
      command -v containerd-shim-runc-v2 >/dev/null 2>&1 || missing+=(containerd)
    command -v runc >/dev/null 2>&1 || missing+=(runc)
  fi
  cni_bin_dir >/dev/null || missing+=(containernetworking-plugins)
  [ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 &&
    ! ldd /bin/busybox >/dev/null 2>&1 || missing+=(busybox-static)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc)
  [ -f /usr/include/signal.h ] && compgen -G '/usr/lib/*/libc.a' >/dev/null || missing+=(libc6-dev)
  [ ${#missing[@]} -eq 0 ] && return 0
  is_debian_like || cannot_run "missing ${missing[*]} and this is not a Debian-like system (no apt-get)"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq >&2 &&
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; } ||
    cannot_run "apt-get could not install ${missing[*]}"
}

check_namespaces() {
  unshare --net --mount --pid --fork true 2>/dev/null ||
    cannot_run "cannot create namespaces (unprivileged container?)"
}

# ---------------------------------------------------------------------------------------------
# images: single-layer "docker save" archives, built without a registry

# mkimage and go_arch: lib.sh

build_images() {
  mkdir -p "$IMGDIR"
  if [ ! -s "$IMGDIR/pause.tar" ]; then
    log "building $PAUSE_IMAGE"
    local P=$IMGDIR/pause-rootfs
    rm -rf "$P" && mkdir -p "$P"
    build_pause "$P/pause"
    mkimage "$P" "$PAUSE_IMAGE" "$IMGDIR/pause.tar" '["/pause"]' 'null'
    rm -rf "$P"
  fi
  if [ ! -s "$IMGDIR/busybox.tar" ]; then
    log "building $BUSYBOX_IMAGE"
    local R=$IMGDIR/busybox-rootfs a
    rm -rf "$R" && mkdir -p "$R"/{bin,etc,tmp,proc,sys,dev,root,var/run,www}
    chmod 1777 "$R/tmp"
    install -m 0755 /bin/busybox "$R/bin/busybox"
    for a in $(/bin/busybox --list); do
      [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$R/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
    echo 'hello from actorlet busybox' >"$R/www/index.html"
    mkimage "$R" "$BUSYBOX_IMAGE" "$IMGDIR/busybox.tar" 'null' '["sh"]'
    rm -rf "$R"
  fi
}

import_images() {
  images_present && return 0
  log "importing images into namespace $NS"
  ctrc images import "$IMGDIR/pause.tar" >&2
  ctrc images import "$IMGDIR/busybox.tar" >&2
  images_present || die "images not visible after import"
}

# ---------------------------------------------------------------------------------------------
# config and process

write_config() {
  local cnibin
  cnibin=$(cni_bin_dir) || die "CNI plugins (bridge, host-local, portmap) not found"
  mkdir -p "$CNI_CONF_DIR" "$DIR/cni/ipam"
  if [ "$LINE" = 2 ]; then write_config2 "$cnibin"; else write_config1 "$cnibin"; fi
  write_cni
}

# write_config1: containerd 1.6 (config version 2).
write_config1() {
  local cnibin=$1
  cat >"$CFG" <<EOF
# Written by actorlet deploy/local/containerd.sh; private to $DIR.
version = 2
root = "$DIR/root"
state = "$DIR/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$SOCK"
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$DIR/opt"

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    systemd_cgroup = false
    disable_apparmor = true
    # REQUIRED: root's bounding set may lack CAP_SYS_RESOURCE, so runc cannot lower the pause
    # process's oom_score_adj and every sandbox fails ("can't get final child's PID from pipe").
    restrict_oom_score_adj = true
    disable_hugetlb_controller = true
    tolerate_missing_hugetlb_controller = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$cnibin"
      conf_dir = "$CNI_CONF_DIR"
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$DIR/state/runc"
EOF
}

# write_config2: containerd 2.x, config version 3 (the CRI split into its images and runtime
# plugins; the streaming server under io.containerd.grpc.v1.cri). The same settings as line 1's,
# runc from build2, and CDI: containerd 2.x always has CDI on (2.0 dropped enable_cdi, which
# it would ignore), reading specs from cdi_spec_dirs only (not /etc/cdi, /var/run/cdi, so specs
# of the host or of other instances never leak in).
write_config2() {
  local cnibin=$1
  mkdir -p "$CDI_DIR"
  cat >"$CFG" <<EOF
# Written by actorlet deploy/local/containerd.sh (line 2: containerd $C2_VERSION, runc
# $RUNC_VERSION); private to $DIR.
version = 3
root = "$DIR/root"
state = "$DIR/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[grpc]
  address = "$SOCK"
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$DIR/opt"

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "$PAUSE_IMAGE"

  [plugins."io.containerd.cri.v1.runtime"]
    disable_apparmor = true
    # REQUIRED: see line 1's config (root may lack CAP_SYS_RESOURCE).
    restrict_oom_score_adj = true
    disable_hugetlb_controller = true
    tolerate_missing_hugetlb_controller = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = ["$CDI_DIR"]

    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["$cnibin"]
      conf_dir = "$CNI_CONF_DIR"
      max_conf_num = 1

    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "$RUNC"
          Root = "$DIR/state/runc"

  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOF
}

write_cni() {
  cat >"$CNI_CONF_DIR/10-$NET_NAME.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$NET_NAME",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$SUBNET"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$DIR/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": false}
  ]
}
EOF
  printf 'BRIDGE=%q\n' "$BRIDGE" >"$NETINFO"
}

# Remember which kubepods cgroups did not exist before us, so that down removes only those.
mark_cgroups() {
  [ -f "$CGMARK" ] && return 0
  local d
  : >"$CGMARK"
  for d in /sys/fs/cgroup/*/; do
    [ -d "${d}kubepods" ] || echo "${d}kubepods" >>"$CGMARK"
  done
  [ -d /sys/fs/cgroup/kubepods ] || [ ! -f /sys/fs/cgroup/cgroup.controllers ] ||
    echo /sys/fs/cgroup/kubepods >>"$CGMARK"
}

start_containerd() {
  running && return 0
  if [ -S "$SOCK" ]; then rm -f "$SOCK" "$SOCK.ttrpc"; fi
  log "starting containerd (log $LOGF)"
  : >"$LOGF"
  # setsid: own session, survives the caller; fd 9 (our lock) must not leak into the daemon.
  setsid containerd --config "$CFG" </dev/null >>"$LOGF" 2>&1 9>&- &
  echo $! >"$PIDF"
  local i pid
  pid=$(cat "$PIDF")
  for i in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$LOGF" >&2; die "containerd exited during start"; }
    # The CRI service answers only after its Run loop logged "Start streaming server".
    if ctr -a "$SOCK" version >/dev/null 2>&1 && grep -q 'Start streaming server' "$LOGF"; then
      break
    fi
    [ "$i" = 150 ] && { tail -n 20 "$LOGF" >&2; die "containerd CRI not serving after 30s"; }
    sleep 0.2
  done
  ctr -a "$SOCK" plugins ls 2>/dev/null | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" && $NF == "ok" {f = 1} END {exit !f}' ||
    { tail -n 20 "$LOGF" >&2; die "CRI plugin not loaded"; }
  log "containerd running (pid $pid)"
}

up() {
  check_machine
  check_line
  busybox_ref
  mkdir -p "$DIR"
  exec 9>"$LOCK"
  flock 9
  local had
  had=$(cat "$LINEF" 2>/dev/null || true)
  if [ -n "$had" ] && [ "$had" != "$LINE" ] && { running || [ -d "$DIR/root" ]; }; then
    die "$DIR holds containerd line $had, not $LINE (run: $0 down)"
  fi
  if [ "$LINE" = 2 ]; then build2; fi
  if running && images_present; then
    print_lines
    return 0
  fi
  install_pkgs
  busybox_ref
  check_namespaces
  mkdir -p "$DIR"
  build_images
  if ! running; then
    echo "$LINE" >"$LINEF"
    write_config
    mark_cgroups
    start_containerd
  fi
  import_images
  print_lines
}

status() {
  busybox_ref
  recorded_line
  if [ "$LINE" = 2 ]; then line2_paths; fi
  if [ "$(id -u)" = 0 ] && running && images_present; then
    print_lines
    return 0
  fi
  return 1
}

# ---------------------------------------------------------------------------------------------
# teardown

remove_workloads() {
  running || return 0
  local ids id i
  ids=$(ctrc tasks ls -q 2>/dev/null || true)
  for id in $ids; do ctrc tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
  for id in $ids; do
    for i in $(seq 50); do
      ctrc tasks delete "$id" >/dev/null 2>&1 && break
      ctrc tasks ls -q 2>/dev/null | grep -qxF "$id" || break
      sleep 0.1
    done
  done
  for id in $(ctrc containers ls -q 2>/dev/null || true); do
    ctrc containers delete "$id" >/dev/null 2>&1 || true
  done
}

our_shims() {
  local p
  for p in $(pgrep -f containerd-shim || true); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "-address $SOCK " && echo "$p"
  done
  return 0
}

# alive PID: exists and is not a zombie (PID 1 in some containers does not reap).
alive() {
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

stop_containerd() {
  [ -f "$PIDF" ] || return 0
  local pid i
  pid=$(cat "$PIDF")
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--config $CFG"; then
    kill "$pid"
    for i in $(seq 100); do
      alive "$pid" || break
      sleep 0.05
    done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$PIDF"
}

clean_iptables() {
  command -v iptables >/dev/null 2>&1 || return 0
  local rule chain targets=()
  # portmap's per-container rules carry our network name in their comment.
  while read -r rule; do
    chain=$(sed -n 's/.* -j \([^ ]*\).*/\1/p' <<<"$rule")
    [ -n "$chain" ] && targets+=("$chain")
    eval "iptables -w -t nat -D ${rule#-A }" 2>/dev/null || true
  done < <(iptables -w -t nat -S CNI-HOSTPORT-DNAT 2>/dev/null | grep -F "name: \\\"$NET_NAME\\\"" || true)
  for chain in "${targets[@]}"; do
    iptables -w -t nat -F "$chain" 2>/dev/null || true
    iptables -w -t nat -X "$chain" 2>/dev/null || true
  done
  # the (then empty) hostport chain and its jumps
  if iptables -w -t nat -S CNI-HOSTPORT-DNAT >/dev/null 2>&1 &&
    [ "$(iptables -w -t nat -S CNI-HOSTPORT-DNAT | wc -l)" -le 1 ]; then
    while iptables -w -t nat -D PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT 2>/dev/null; do :; done
    while iptables -w -t nat -D OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT 2>/dev/null; do :; done
    iptables -w -t nat -X CNI-HOSTPORT-DNAT 2>/dev/null || true
  fi
}

# rmdir depth-first; a cgroup dir goes only when it has no processes and no children.
remove_cgroups() {
  [ -f "$CGMARK" ] || return 0
  local top
  while read -r top; do
    [ -d "$top" ] || continue
    find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done <"$CGMARK"
}

down() {
  check_machine
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock 9
  recorded_line
  if [ "$LINE" = 2 ]; then line2_paths; fi
  if [ -f "$NETINFO" ]; then
    # shellcheck disable=SC1090
    . "$NETINFO"
  fi
  remove_workloads
  stop_containerd
  local p
  for p in $(our_shims); do kill -9 "$p" 2>/dev/null || true; done
  # lazily unmount everything below the state dir (rootfs, shm, netns), deepest first
  local m
  for m in $(findmnt -rn -o TARGET | awk -v d="$DIR/" 'index($0, d) == 1' | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  clean_iptables
  remove_cgroups
  # containerd 1.6 keeps shim sockets and fifos under /run/containerd whatever its state dir:
  # remove the empty leftovers (never what another containerd may still use).
  if [ -d /run/containerd ]; then
    find /run/containerd/s /run/containerd/fifo -mindepth 1 -depth -type d -empty -delete 2>/dev/null || true
    rmdir /run/containerd/s /run/containerd/fifo /run/containerd 2>/dev/null || true
  fi
  if [ -d "$DIR" ]; then rm -rf --one-file-system "$DIR"; fi
  rm -f "$SOCK" "$SOCK.ttrpc"
  log "down"
}

# stop_runtime: a runtime outage. Only the daemon goes (TERM, then KILL): shims keep their
# containers running, and everything start_runtime needs stays in the state dir.
stop_runtime() {
  check_machine
  exec 9>"$LOCK"
  flock 9
  [ -f "$CFG" ] || die "no containerd set up in $DIR (run: $0 up)"
  recorded_line
  if [ "$LINE" = 2 ]; then line2_paths; fi
  stop_containerd
  log "containerd stopped; $(our_shims | wc -l) shims left running"
}

# start_runtime: the end of the outage: the same daemon, config and state as before.
start_runtime() {
  check_machine
  busybox_ref
  exec 9>"$LOCK"
  flock 9
  [ -f "$CFG" ] || die "no containerd set up in $DIR (run: $0 up)"
  recorded_line
  if [ "$LINE" = 2 ]; then line2_paths; fi
  start_containerd
  print_lines
}

CMD=${1:-}
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case $1 in
    --line) [ $# -ge 2 ] || { echo "$0: --line needs 1 or 2" >&2; exit 2; }; LINE=$2; shift 2 ;;
    --line=*) LINE=${1#--line=}; shift ;;
    *) echo "$0: unknown argument $1" >&2; exit 2 ;;
  esac
done

case "$CMD" in
  up) up ;;
  build)
    check_line
    if [ "$LINE" = 1 ]; then
      log "line 1 is Debian's packages (installed by up): nothing to build; use --line 2"
      exit 0
    fi
    build2
    log "containerd $C2_VERSION in $C2BIN, runc $RUNC_VERSION in $RUNCBIN"
    ;;
  status) status ;;
  down) down ;;
  stop-runtime) stop_runtime ;;
  start-runtime) start_runtime ;;
  *)
    echo "usage: $0 up|status|down|stop-runtime|start-runtime|build [--line 1|2]" >&2
    exit 2
    ;;
esac
