#!/bin/bash
# containerd.sh — a private, offline containerd (CRI v1) for actorlet's tests and demos.
#
#   containerd.sh up      install what is missing (Debian), build busybox + pause images locally
#                         (no registry), start containerd on a private socket, import the images
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
#
# Exit codes: 0 ok, 1 not running (status) or failure, 2 usage, 3 this machine cannot run it
# (not root, not Debian-like with packages missing, packages not installable, no namespaces).
#
# Environment:
#   ACTORLET_CONTAINERD_DIR  state dir (default /tmp/actorlet-containerd); all of containerd's
#                            root, state, config, logs, images and CNI data live here
#   ACTORLET_CNI_BRIDGE      bridge name (default actorlet0)
#   ACTORLET_CNI_SUBNET      pod subnet (default 10.244.213.0/24)
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
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 &&
    command -v containerd-shim-runc-v2 >/dev/null 2>&1 || missing+=(containerd)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
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
  busybox_ref
  mkdir -p "$DIR"
  exec 9>"$LOCK"
  flock 9
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
    write_config
    mark_cgroups
    start_containerd
  fi
  import_images
  print_lines
}

status() {
  busybox_ref
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
  start_containerd
  print_lines
}

case "${1:-}" in
  up) up ;;
  status) status ;;
  down) down ;;
  stop-runtime) stop_runtime ;;
  start-runtime) start_runtime ;;
  *)
    echo "usage: $0 up|status|down|stop-runtime|start-runtime" >&2
    exit 2
    ;;
esac
