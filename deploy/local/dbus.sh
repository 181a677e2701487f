#!/bin/bash
# dbus.sh — a private D-Bus message bus (Debian's dbus-daemon) for the tests of actorlet's
# systemd cgroup driver: the bus is real, the systemd on it is internal/fakesystemd.
#
#   dbus.sh up      install Debian's dbus if dbus-daemon is missing, start a dbus-daemon of its
#                   own on a socket in the state dir (a system-bus-like config of its own, no
#                   activation, any client may own any name), wait until it answers
#   dbus.sh status  print the line below and exit 0 if it runs and answers, else exit 1
#   dbus.sh down    stop that dbus-daemon and remove the state dir
#
# On success `up` and `status` print exactly this line on stdout (everything else goes to stderr):
#   DBUS_SYSTEM_BUS_ADDRESS=unix:path=<dir>/system_bus_socket
# (the variable godbus and libdbus read for the system bus; `export` it, or give the address to
# the client, e.g. adapters/cgroup's SystemdConfig.Address).
#
# Exit codes: 0 ok, 1 not running (status) or failure, 2 usage, 3 this machine cannot run it
# (not Linux, dbus-daemon missing and not installable).
#
# Environment:
#   ACTORLET_DBUS_DIR  state dir (default /tmp/actorlet-dbus): config, socket, pid file and log;
#                      keep it short, a unix socket path holds at most 107 bytes
set -euo pipefail

DIR=${ACTORLET_DBUS_DIR:-/tmp/actorlet-dbus}
DIR=${DIR%/}
SOCK=$DIR/system_bus_socket
ADDR=unix:path=$SOCK
CFG=$DIR/bus.conf
PIDF=$DIR/dbus-daemon.pid
LOGF=$DIR/dbus-daemon.log
LOCK=$DIR.lock
PROG=dbus.sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# log, die, cannot_run, check_machine, lock, exec_wait, pid_for
# shellcheck source=lib.sh
. "$HERE/lib.sh"

print_lines() { echo "DBUS_SYSTEM_BUS_ADDRESS=$ADDR"; }

install_pkgs() {
  command -v dbus-daemon >/dev/null 2>&1 && command -v dbus-send >/dev/null 2>&1 && return 0
  [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1 ||
    cannot_run "dbus-daemon is missing and this is not a Debian-like system (no apt-get)"
  [ "$(id -u)" = 0 ] || cannot_run "dbus-daemon is missing and installing it needs root"
  log "installing dbus"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends dbus >&2; } ||
    cannot_run "apt-get could not install dbus"
  command -v dbus-daemon >/dev/null 2>&1 || cannot_run "dbus installed but dbus-daemon is not on PATH"
}

# answers: the bus daemon replies to a method call on its socket.
answers() {
  [ -S "$SOCK" ] || return 1
  dbus-send --bus="$ADDR" --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetId >/dev/null 2>&1
}

running() {
  pid_for "$PIDF" "$DIR" >/dev/null && answers
}

# write_config: the bus of a system without its policy files: EXTERNAL auth (the uid of the
# socket's peer), no service activation, and a policy that lets every client own any name and
# call anything (tests run fake services such as org.freedesktop.systemd1 on it).
write_config() {
  cat >"$CFG.tmp" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>$ADDR</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
  <limit name="reply_timeout">60000</limit>
</busconfig>
EOF
  mv "$CFG.tmp" "$CFG"
}

start_daemon() {
  rm -f "$SOCK"
  log "starting dbus-daemon (log $LOGF)"
  : >"$LOGF"
  # setsid: own session, survives the caller; fd 9 (our lock) must not leak into the daemon.
  setsid dbus-daemon --config-file="$CFG" --nofork --nopidfile --nosyslog </dev/null >>"$LOGF" 2>&1 9>&- &
  echo $! >"$PIDF"
  local pid i
  pid=$(cat "$PIDF")
  exec_wait "$pid"
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$LOGF" >&2; die "dbus-daemon exited during start"; }
    answers && break
    [ "$i" = 100 ] && { tail -n 20 "$LOGF" >&2; die "dbus-daemon not answering on $SOCK after 10s"; }
    sleep 0.1
  done
  log "dbus-daemon running (pid $pid) on $ADDR"
}

up() {
  check_machine
  mkdir -p "$DIR"
  lock
  if running; then
    print_lines
    return 0
  fi
  install_pkgs
  [ ${#SOCK} -le 107 ] || die "socket path $SOCK is longer than 107 bytes: use a shorter ACTORLET_DBUS_DIR"
  write_config
  start_daemon
  print_lines
}

status() {
  [ -d "$DIR" ] || return 1
  command -v dbus-send >/dev/null 2>&1 || return 1
  if running; then
    print_lines
    return 0
  fi
  return 1
}

# alive PID: exists and is not a zombie.
alive() {
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

down() {
  [ -d "$DIR" ] || { rm -f "$LOCK"; return 0; }
  lock
  local pid i
  # pid_for checks the process was started for this dir (its command line names $CFG).
  if pid=$(pid_for "$PIDF" "$DIR"); then
    kill "$pid" 2>/dev/null || true
    for i in $(seq 100); do
      alive "$pid" || break
      sleep 0.05
    done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
    log "stopped dbus-daemon (pid $pid)"
  fi
  rm -rf "$DIR"
  rm -f "$LOCK"
}

case "${1:-}" in
  up) up ;;
  status) status ;;
  down) down ;;
  *)
    echo "usage: $0 up|status|down" >&2
    exit 2
    ;;
esac
