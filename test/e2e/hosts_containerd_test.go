package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2EContainerdManagedEtcHosts: the managed /etc/hosts as upstream's
// KubeletManagedEtcHosts and hostAliases specs check it, on containerd:
// containers of a pod off the host network get the managed file, except
// one that mounts the node's /etc/hosts there itself; a host-network pod
// gets the node's hosts file (under the host-network header, not the
// managed one) with its hostAliases appended.
func TestE2EContainerdManagedEtcHosts(t *testing.T) {
	env := testenv.ContainerdInfo(t)
	dir := t.TempDir()
	a := startAgent(t, agentOpts{endpoint: env.Endpoint, manifestDir: dir})
	show := `["sh", "-c", "cat /etc/hosts; echo ---; cat /etc/hosts-original; echo ---; sleep 3600"]`
	ctr := func(name, mounts string) string {
		return fmt.Sprintf("  - name: %s\n    image: %s\n    command: %s\n    volumeMounts:\n%s", name, env.BusyboxImage, show, mounts)
	}
	orig := "    - {name: host-etc-hosts, mountPath: /etc/hosts-original}\n"
	own := orig + "    - {name: host-etc-hosts, mountPath: /etc/hosts}\n"
	pod := func(name, spec string, ctrs ...string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  terminationGracePeriodSeconds: 2\n%s"+
			"  volumes:\n  - name: host-etc-hosts\n    hostPath: {path: /etc/hosts, type: FileOrCreate}\n  containers:\n%s",
			name, spec, strings.Join(ctrs, ""))
	}
	writeManifest(t, dir, "hosts.yaml", manifests(
		pod("hosts", "", ctr("managed", orig), ctr("own", own)),
		pod("hostnet", "  hostNetwork: true\n", ctr("plain", orig)),
		pod("hostnet-aliases", "  hostNetwork: true\n  hostAliases: [{ip: \"123.45.67.89\", hostnames: [foo, bar]}]\n", ctr("aliases", orig)),
	))
	var uids []string
	for _, name := range []string{"hosts", "hostnet", "hostnet-aliases"} {
		p := a.waitPod(2*time.Minute, name+"-e2e-node", "Running", isRunning)
		uids = append(uids, string(p.UID))
	}
	t.Cleanup(func() { cleanupPods(t, a, dir, uids...) })

	files := func(pod, ctr string) (hosts, original string) {
		t.Helper()
		var log string
		a.waitLog(t, pod+"-e2e-node", ctr, "/etc/hosts and the node's printed", func(l string) bool {
			log = l
			return strings.Count(l, "---\n") >= 2
		})
		parts := strings.SplitN(log, "---\n", 3)
		return parts[0], parts[1]
	}
	// As the upstream spec decides "managed".
	managed := func(hosts, original string) bool {
		return strings.HasPrefix(hosts, "# Kubernetes-managed hosts file.") && hosts != original
	}
	if h, o := files("hosts", "managed"); !managed(h, o) {
		t.Errorf("container without its own /etc/hosts: not managed:\n%s", h)
	}
	if h, o := files("hosts", "own"); managed(h, o) || h != o {
		t.Errorf("container mounting the node's /etc/hosts: managed (want the node's):\n%s\nnode's:\n%s", h, o)
	}
	if h, o := files("hostnet", "plain"); managed(h, o) || !strings.Contains(h, o) {
		t.Errorf("host-network pod: want the node's hosts file:\n%s\nnode's:\n%s", h, o)
	}
	h, o := files("hostnet-aliases", "aliases")
	if managed(h, o) || !strings.Contains(h, o) || !strings.Contains(h, "123.45.67.89\tfoo\tbar\n") {
		t.Errorf("host-network pod with hostAliases: want the node's hosts file and the aliases:\n%s\nnode's:\n%s", h, o)
	}
}
