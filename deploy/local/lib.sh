# lib.sh — shell helpers shared by deploy/local/controlplane.sh and deploy/local/metrics-server.sh.
# Sourced, never run: it only defines functions. The sourcing script sets first:
#   PROG  its name, the prefix of every log line (controlplane.sh, metrics-server.sh)
#   LOCK  the lock file of the control plane's state dir (lock)
# shellcheck shell=bash

log() { echo "$PROG: $*" >&2; }
die() { log "error: $*"; exit 1; }
cannot_run() { log "cannot run here: $*"; exit 3; }
now_ms() { date +%s%3N; }

check_machine() {
  [ "$(uname -s)" = Linux ] || cannot_run "needs Linux"
  command -v flock >/dev/null 2>&1 || cannot_run "flock (util-linux) is missing"
}

# lock: hold LOCK (on fd 9) until the script exits; neither script changes the state dir under the
# other.
lock() {
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock 9
}

b64() { base64 -w0 <"$1"; }

# write_kubeconfig OUT SERVER CA USER CERT KEY: a kubeconfig for USER (client certificate CERT, key
# KEY) on the API server SERVER (CA: its CA), certificates embedded, so the file stands alone;
# written to OUT.tmp (mode 600) and moved to OUT.
write_kubeconfig() {
  local out=$1
  cat >"$out.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: actorlet
  cluster:
    server: $2
    certificate-authority-data: $(b64 "$3")
users:
- name: $4
  user:
    client-certificate-data: $(b64 "$5")
    client-key-data: $(b64 "$6")
contexts:
- name: actorlet
  context:
    cluster: actorlet
    user: $4
current-context: actorlet
EOF
  chmod 600 "$out.tmp"
  mv "$out.tmp" "$out"
}

# pid_for PIDFILE DIR: the pid in PIDFILE, if that process is alive (not a zombie) and was started
# for DIR (its command line names a path in DIR).
pid_for() {
  local f=$1 dir=$2 pid st
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  st=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/" || return 1
  echo "$pid"
}
