# lib.sh — shell helpers shared by deploy/local/controlplane.sh, metrics-server.sh, kubeadm.sh,
# containerd.sh (mkimage, go_arch) and conformance.sh.
# Sourced, never run: it only defines functions. The sourcing script sets first:
#   PROG  its name, the prefix of every log line (controlplane.sh, metrics-server.sh)
#   LOCK  the lock file of the control plane's state dir (lock)
# shellcheck shell=bash

log() { echo "$PROG: $*" >&2; }
die() { log "error: $*"; exit 1; }
cannot_run() { log "cannot run here: $*"; exit 3; }
now_ms() { date +%s%3N; }

# cgroup_root_up NAME: make the cgroup /NAME in every cgroup hierarchy under /sys/fs/cgroup (each v1
# controller's, or the one cgroup2 mount), for an agent's --cgroup-root (it must exist, as upstream's
# kubelet requires); a v1 cpuset cgroup gets its parent's cpus and mems. Cgroups are the whole
# machine's: every agent gets its own, never the top-level /kubepods.
cgroup_root_up() {
  local name=${1#/} h f
  [ -n "$name" ] || die "cgroup_root_up: no name"
  for h in /sys/fs/cgroup /sys/fs/cgroup/*/; do
    h=${h%/}
    [ -f "$h/cgroup.procs" ] && [ ! -L "$h" ] || continue
    mkdir -p "$h/$name"
    for f in cpuset.cpus cpuset.mems; do
      if [ -f "$h/$name/$f" ] && [ -z "$(tr -d '[:space:]' <"$h/$name/$f")" ]; then
        cat "$h/$f" >"$h/$name/$f"
      fi
    done
    [ "$h" = /sys/fs/cgroup ] && break # cgroup v2: one hierarchy
  done
  return 0 # not the last test's status: callers run under set -e
}

# cgroup_root_down NAME: remove /NAME and every cgroup under it, deepest first, in every hierarchy;
# one that still holds a process stays (logged).
cgroup_root_down() {
  local name=${1#/} h
  [ -n "$name" ] || die "cgroup_root_down: no name"
  for h in /sys/fs/cgroup /sys/fs/cgroup/*/; do
    h=${h%/}
    [ -d "$h/$name" ] && [ -f "$h/cgroup.procs" ] && [ ! -L "$h" ] || continue
    find "$h/$name" -depth -type d -exec rmdir {} + 2>/dev/null || log "cgroups left under $h/$name (processes in them)"
  done
}

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

# exec_wait PID: wait, up to 5 s, until the background child PID no longer runs this shell's
# program. Between the fork and its exec a child's command line is the script's own, so pid_for,
# asked at once, would take a child that is starting for one that exited (seen on a loaded machine).
exec_wait() {
  local pid=$1 me i
  me=$(readlink "/proc/$$/exe")
  for ((i = 0; i < 500; i++)); do
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$me" ] || return 0
    sleep 0.01
  done
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

# k8s_ldflags VERSION: the -ldflags of a k8s.io binary built from the module proxy; without the
# version it reports v0.0.0-master (clients warn about the skew, kubeadm refuses it).
k8s_ldflags() {
  local v=$1 major minor pkg ld="-s -w"
  major=${v#v}
  major=${major%%.*}
  minor=${v#v*.}
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ld"
}

# apply WHAT: kubectl apply the YAML on stdin, retried while a fresh apiserver bootstraps
# (kubeadm.sh, metrics-server.sh: with their kc, its error kept in $DIR while it retries).
apply() {
  local what=$1 i yaml
  yaml=$(cat)
  for ((i = 0; i < 50; i++)); do
    kc apply -f - >/dev/null 2>"$DIR/apply.err" <<<"$yaml" && { rm -f "$DIR/apply.err"; return 0; }
    sleep 0.2
  done
  cat "$DIR/apply.err" >&2
  die "could not apply $what"
}

# token_secret ID SECRET EXPIRATION DESCRIPTION [GROUPS]: the Secret of a bootstrap token (a YAML
# document; EXPIRATION in RFC 3339, GROUPS its auth-extra-groups).
token_secret() {
  cat <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-$1
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  description: "$4"
  token-id: "$1"
  token-secret: "$2"
  expiration: $3
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
EOF
  if [ -n "${5:-}" ]; then echo "  auth-extra-groups: $5"; fi
}

# crb NAME CLUSTERROLE GROUP: a ClusterRoleBinding of CLUSTERROLE to GROUP (a YAML document).
crb() {
  cat <<EOF
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: $1
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: $2
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: $3
EOF
}

# control_plane up|status: runs controlplane.sh (beside the sourcing script, $HERE) and sets
# ADMIN_KUBECONFIG, KUBECTL, APISERVER and CLUSTER_CA from its output; its exit code 3 (cannot
# run here) is ours; a failed status returns 1.
control_plane() {
  local out rc=0 k v
  out=$("$HERE/controlplane.sh" "$1") || rc=$?
  case $rc in
    0) ;;
    3) exit 3 ;;
    *) [ "$1" = status ] && return 1; die "controlplane.sh $1 failed (exit $rc)" ;;
  esac
  while IFS='=' read -r k v; do
    case $k in ADMIN_KUBECONFIG | KUBECTL | APISERVER | CLUSTER_CA) printf -v "$k" '%s' "$v" ;; esac
  done <<<"$out"
  [[ -n ${ADMIN_KUBECONFIG:-} && -n ${KUBECTL:-} && -n ${APISERVER:-} && -n ${CLUSTER_CA:-} ]] ||
    die "unexpected output of controlplane.sh $1: $out"
}

go_arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) uname -m ;;
  esac
}

# mkimage ROOTFS REF OUT ENTRYPOINT_JSON CMD_JSON [CONFIG_JSON]: a single-layer "docker save"
# archive OUT of the tree ROOTFS (owned by root, modes kept: setuid too), tagged REF, for
# `ctr images import`; no registry. CONFIG_JSON: more fields of the image config, such as
# "User":"1234" (comma separated, no braces). Works in a temporary directory beside OUT.
mkimage() {
  local rootfs=$1 ref=$2 out=$3 ep=$4 cmd=$5 extra=${6:-} t diffid cfgid
  t=$(mktemp -d "$(dirname "$out")/build.XXXXXX")
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$t/layer.tar" .
  diffid=$(sha256sum "$t/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"%s","os":"linux","created":"1970-01-01T00:00:00Z","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"actorlet deploy/local/%s"}]}' \
    "$(go_arch)" "$ep" "$cmd" "${extra:+,$extra}" "$diffid" "${PROG:-lib.sh}" >"$t/config.json"
  cfgid=$(sha256sum "$t/config.json" | cut -d' ' -f1)
  mv "$t/config.json" "$t/$cfgid.json"
  mkdir "$t/$diffid"
  mv "$t/layer.tar" "$t/$diffid/layer.tar"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfgid" "$ref" "$diffid" >"$t/manifest.json"
  tar --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$t" -cf "$out.tmp" manifest.json "$cfgid.json" "$diffid"
  mv "$out.tmp" "$out"
  rm -rf "$t"
}

# build_pause OUT: the sandbox (pause) binary, a static C program that holds the sandbox's
# namespaces, exits on SIGINT/SIGTERM and reaps orphans, compiled to OUT (its source beside it).
build_pause() {
  local out=$1
  mkdir -p "$(dirname "$out")"
  cat >"$out.c" <<'EOF'
/* pause: holds the sandbox namespaces, exits on SIGINT/SIGTERM, reaps orphans. */
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
static void down(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction a = {0}, r = {0};
  a.sa_handler = down; sigaction(SIGINT, &a, 0); sigaction(SIGTERM, &a, 0);
  r.sa_handler = reap; r.sa_flags = SA_NOCLDSTOP; sigaction(SIGCHLD, &r, 0);
  for (;;) pause();
}
EOF
  gcc -static -Os -s -o "$out" "$out.c" >&2
  rm -f "$out.c"
}
