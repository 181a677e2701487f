#!/bin/bash
# install.sh — put actorlet in place as a node's kubelet, under systemd.
#
#   install.sh [--binary PATH] [--prefix DIR] [--unit-dir DIR] [--no-reload]
#       The binary goes to DIR/bin/actorlet (default prefix /usr: /usr/bin/actorlet), the unit
#       deploy/systemd/actorlet.service to UNIT-DIR/kubelet.service and kubeadm's drop-in
#       deploy/systemd/10-kubeadm.conf to UNIT-DIR/kubelet.service.d/10-kubeadm.conf (default
#       unit dir /etc/systemd/system). The unit is named kubelet.service because kubeadm drives
#       "the kubelet" (`systemctl restart kubelet`); units in /etc/systemd/system take precedence
#       over a kubelet package's in /usr/lib/systemd/system, and our 10-kubeadm.conf shadows the
#       package's drop-in of the same name. Both files are installed as committed, except that
#       /usr/bin/actorlet in their ExecStart lines becomes DIR/bin/actorlet.
#
#   install.sh --as-kubelet [--binary PATH] [--prefix DIR]
#       Swap the binary only: DIR/bin/kubelet (default /usr/bin/kubelet) becomes actorlet, the
#       original is kept as DIR/bin/kubelet.orig (once: a re-run never overwrites the backup);
#       the node's own kubelet.service and 10-kubeadm.conf stay as they are and now start
#       actorlet with the same flags, files and environment.
#
#   install.sh --uninstall [--prefix DIR] [--unit-dir DIR]
#   install.sh --as-kubelet --uninstall [--prefix DIR]
#       Undo: remove what the first form installed (a unit file it replaced comes back from its
#       .orig), or put DIR/bin/kubelet.orig back.
#
# --binary defaults to bin/actorlet of this repository (`make build`), else ./actorlet.
# Every form is idempotent: running it twice leaves the same files and makes no second backup.
# Files are written to a temporary name beside the target and renamed, so a half-written binary
# or unit is never in place. After a change, `systemctl daemon-reload` runs when systemd is PID 1
# (skip it with --no-reload); the service is never started or restarted here (kubeadm join does
# it; or run `systemctl restart kubelet`).
#
# Exit codes: 0 ok, 1 failure, 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
UNIT_SRC=$HERE/systemd/actorlet.service
DROPIN_SRC=$HERE/systemd/10-kubeadm.conf
UNIT_NAME=kubelet.service
DROPIN_NAME=10-kubeadm.conf
MARKER=actorlet # every unit file we install names actorlet; one that does not is someone else's

PROG=install.sh
log() { echo "$PROG: $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() {
  sed -n '2,/^# Exit codes/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
bad_usage() { log "$*"; log "usage: $0 [--binary PATH] [--prefix DIR] [--unit-dir DIR] [--as-kubelet] [--uninstall] [--no-reload]"; exit 2; }

BINARY=
PREFIX=/usr
UNIT_DIR=/etc/systemd/system
AS_KUBELET=false
UNINSTALL=false
RELOAD=true
while [ $# -gt 0 ]; do
  case $1 in
    --binary | --prefix | --unit-dir)
      [ $# -ge 2 ] && [ -n "$2" ] || bad_usage "$1 needs a value"
      case $1 in
        --binary) BINARY=$2 ;;
        --prefix) PREFIX=$2 ;;
        --unit-dir) UNIT_DIR=$2 ;;
      esac
      shift 2
      ;;
    --binary=* | --prefix=* | --unit-dir=*)
      v=${1#*=}
      [ -n "$v" ] || bad_usage "${1%%=*} needs a value"
      case $1 in
        --binary=*) BINARY=$v ;;
        --prefix=*) PREFIX=$v ;;
        --unit-dir=*) UNIT_DIR=$v ;;
      esac
      shift
      ;;
    --as-kubelet) AS_KUBELET=true; shift ;;
    --uninstall) UNINSTALL=true; shift ;;
    --no-reload) RELOAD=false; shift ;;
    -h | --help) usage ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
done
PREFIX=${PREFIX%/}
UNIT_DIR=${UNIT_DIR%/}
[[ $PREFIX == /* ]] || bad_usage "--prefix must be an absolute path (it is written into the unit), got '$PREFIX'"
[[ -n $UNIT_DIR ]] || bad_usage "--unit-dir must not be /"
BINDIR=$PREFIX/bin
CHANGED=false

# ---------------------------------------------------------------------------------------------

# pick_binary: the actorlet binary to install, checked to be an executable actorlet.
pick_binary() {
  if [ -z "$BINARY" ]; then
    local c
    for c in "$ROOT/bin/actorlet" "$ROOT/actorlet"; do
      [ -f "$c" ] && { BINARY=$c; break; }
    done
    [ -n "$BINARY" ] || die "no actorlet binary: run 'make build' (bin/actorlet) or pass --binary PATH"
  fi
  [ -f "$BINARY" ] || die "--binary $BINARY: no such file"
  [ -x "$BINARY" ] || die "--binary $BINARY: not executable"
  local v
  v=$("$BINARY" --version 2>&1) || die "--binary $BINARY: '$BINARY --version' failed: $v"
  v=${v%%$'\n'*}
  [[ $v == actorlet* ]] || die "--binary $BINARY: not actorlet ('--version' printed '$v')"
  log "installing $v"
}

same() { [ -f "$1" ] && [ -f "$2" ] && cmp -s "$1" "$2"; }

# put SRC DST MODE: install SRC as DST atomically (temp file beside DST, then rename), unless DST
# already has the same content and mode.
put() {
  local src=$1 dst=$2 mode=$3 tmp
  if same "$src" "$dst" && [ "$(stat -c %a "$dst")" = "$mode" ]; then
    log "unchanged: $dst"
    return 0
  fi
  mkdir -p "$(dirname "$dst")" || die "cannot create $(dirname "$dst")"
  tmp=$(mktemp "$(dirname "$dst")/.$(basename "$dst").XXXXXX") || die "cannot write in $(dirname "$dst")"
  if ! { cp "$src" "$tmp" && chmod "$mode" "$tmp" && mv -f "$tmp" "$dst"; }; then
    rm -f "$tmp"
    die "cannot install $dst"
  fi
  log "installed: $dst"
  CHANGED=true
}

# render SRC OUT: SRC with /usr/bin/actorlet replaced by our binary's path.
render() {
  local src=$1 out=$2
  [ -f "$src" ] || die "missing $src (run from a checkout of actorlet)"
  grep -q '/usr/bin/actorlet' "$src" || die "$src names no /usr/bin/actorlet in ExecStart"
  sed "s#/usr/bin/actorlet#$BINDIR/actorlet#g" "$src" >"$out"
}

# backup_foreign FILE: keep a unit file that is not ours as FILE.orig (once).
backup_foreign() {
  local f=$1
  [ -f "$f" ] || return 0
  grep -q "$MARKER" "$f" && return 0
  if [ -e "$f.orig" ]; then
    die "$f is not actorlet's and $f.orig exists already: move one of them away"
  fi
  cp -p "$f" "$f.orig" || die "cannot back up $f"
  log "kept the previous $f as $f.orig"
}

reload() {
  $RELOAD && $CHANGED || return 0
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload || die "systemctl daemon-reload failed"
    log "systemctl daemon-reload done"
  else
    log "systemd is not running here: no daemon-reload"
  fi
}

install_units() {
  pick_binary
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  render "$UNIT_SRC" "$WORK/$UNIT_NAME"
  render "$DROPIN_SRC" "$WORK/$DROPIN_NAME"
  put "$BINARY" "$BINDIR/actorlet" 755
  backup_foreign "$UNIT_DIR/$UNIT_NAME"
  backup_foreign "$UNIT_DIR/$UNIT_NAME.d/$DROPIN_NAME"
  put "$WORK/$UNIT_NAME" "$UNIT_DIR/$UNIT_NAME" 644
  put "$WORK/$DROPIN_NAME" "$UNIT_DIR/$UNIT_NAME.d/$DROPIN_NAME" 644
  reload
  echo "ACTORLET=$BINDIR/actorlet"
  echo "UNIT=$UNIT_DIR/$UNIT_NAME"
  echo "DROPIN=$UNIT_DIR/$UNIT_NAME.d/$DROPIN_NAME"
}

# restore_or_remove FILE: FILE.orig back as FILE, else FILE removed (ours only).
restore_or_remove() {
  local f=$1
  if [ -f "$f" ] && ! grep -q "$MARKER" "$f"; then
    log "left alone (not actorlet's): $f"
    return 0
  fi
  if [ -f "$f.orig" ]; then
    mv -f "$f.orig" "$f" || die "cannot restore $f from $f.orig"
    log "restored: $f"
    CHANGED=true
  elif [ -e "$f" ]; then
    rm -f "$f" || die "cannot remove $f"
    log "removed: $f"
    CHANGED=true
  fi
}

uninstall_units() {
  restore_or_remove "$UNIT_DIR/$UNIT_NAME.d/$DROPIN_NAME"
  rmdir "$UNIT_DIR/$UNIT_NAME.d" 2>/dev/null || true
  restore_or_remove "$UNIT_DIR/$UNIT_NAME"
  if [ -e "$BINDIR/actorlet" ]; then
    rm -f "$BINDIR/actorlet" || die "cannot remove $BINDIR/actorlet"
    log "removed: $BINDIR/actorlet"
  fi
  reload
}

# As the kubelet: DIR/bin/kubelet.orig is the original; DIR/bin/.kubelet.actorlet.sha256 records
# what we put in place, so a kubelet that a package upgrade put back is told from ours.
STAMP_NAME=.kubelet.actorlet.sha256

sha() { sha256sum "$1" | cut -d' ' -f1; }

install_as_kubelet() {
  pick_binary
  local kubelet=$BINDIR/kubelet backup=$BINDIR/kubelet.orig stamp=$BINDIR/$STAMP_NAME
  if [ -f "$kubelet" ] && ! same "$BINARY" "$kubelet"; then
    local ours=false
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(sha "$kubelet")" ] && ours=true
    if ! $ours; then
      [ -e "$backup" ] && die "$kubelet is neither the original nor actorlet's, and $backup exists already: move one of them away"
      cp -p "$kubelet" "$backup" || die "cannot back up $kubelet"
      log "kept the original kubelet as $backup"
    fi
  elif [ ! -e "$kubelet" ]; then
    log "no $kubelet to replace: installing actorlet there anyway (no backup)"
  fi
  put "$BINARY" "$kubelet" 755
  sha "$kubelet" >"$stamp" || die "cannot write $stamp"
  echo "KUBELET=$kubelet"
  [ -e "$backup" ] && echo "KUBELET_BACKUP=$backup"
  return 0
}

uninstall_as_kubelet() {
  local kubelet=$BINDIR/kubelet backup=$BINDIR/kubelet.orig stamp=$BINDIR/$STAMP_NAME
  if [ -f "$kubelet" ] && { [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$(sha "$kubelet")" ]; }; then
    die "$kubelet is not the actorlet this script installed: left alone"
  fi
  if [ -f "$backup" ]; then
    mv -f "$backup" "$kubelet" || die "cannot restore $kubelet from $backup"
    log "restored: $kubelet"
  elif [ -e "$kubelet" ]; then
    rm -f "$kubelet" || die "cannot remove $kubelet"
    log "removed: $kubelet (there was no original)"
  fi
  rm -f "$stamp"
}

case $AS_KUBELET/$UNINSTALL in
  false/false) install_units ;;
  false/true) uninstall_units ;;
  true/false) install_as_kubelet ;;
  true/true) uninstall_as_kubelet ;;
esac
