package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
)

// The managed /etc/hosts and the DNS events over the real binary on sim
// (the sim runtime does not write a resolv.conf: the resolv.conf of each
// dnsPolicy is checked by podspec's units and on containerd).
func TestE2ESimHostsFileAndDNSEvents(t *testing.T) {
	own := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(own, []byte("10.7.7.7\tmine.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodeHosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		testenv.CannotRun(t, fmt.Sprintf("the node has no /etc/hosts: %v", err))
	}
	dir := t.TempDir()
	catHosts := `command: ["sh", "-c", "cat /etc/hosts; sleep infinity"]`
	writeManifest(t, dir, "hosts.yaml", manifests(
		busyboxPod("named", grace2, "spec.hostname: h", "spec.subdomain: sub",
			`spec.hostAliases: [{ip: "10.1.2.3", hostnames: ["db.local", "db"]}]`, catHosts),
		busyboxPod("hostnet", grace2, "spec.hostNetwork: true",
			`spec.hostAliases: [{ip: "10.1.2.4", hostnames: ["cache.local"]}]`, catHosts),
		busyboxPod("ownhosts", grace2, `spec.volumes: [{name: hosts, hostPath: {path: "`+own+`", type: File}}]`,
			`volumeMounts: [{name: hosts, mountPath: /etc/hosts}]`, catHosts),
	))
	// No --cluster-dns: ClusterFirst pods fall back to Default, with the
	// MissingClusterDNS event (standalone events go to the log).
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--cluster-domain", "corp.internal"}})

	p := a.waitPod(time.Minute, "named-e2e-node", "Running", isRunning)
	a.waitLog(t, "named-e2e-node", "app", "the pod's FQDN under --cluster-domain and its hostAliases", func(log string) bool {
		return strings.Contains(log, "# Kubernetes-managed hosts file.\n") &&
			strings.Contains(log, p.Status.PodIP+"\th.sub.default.svc.corp.internal\th\n") &&
			strings.Contains(log, "# Entries added by HostAliases.\n10.1.2.3\tdb.local\tdb\n")
	})

	a.waitPod(time.Minute, "hostnet-e2e-node", "Running", isRunning)
	firstNodeLine, _, _ := strings.Cut(string(nodeHosts), "\n")
	a.waitLog(t, "hostnet-e2e-node", "app", "the node's hosts file and the pod's hostAliases", func(log string) bool {
		return strings.HasPrefix(log, "# Kubernetes-managed hosts file (host network).\n"+firstNodeLine) &&
			strings.Contains(log, "# Entries added by HostAliases.\n10.1.2.4\tcache.local\n")
	})

	a.waitPod(time.Minute, "ownhosts-e2e-node", "Running", isRunning)
	a.waitLog(t, "ownhosts-e2e-node", "app", "the container's own /etc/hosts, not the managed one", func(log string) bool {
		return strings.Contains(log, "10.7.7.7\tmine.example") && !strings.Contains(log, "Kubernetes-managed")
	})

	if !a.logContains("MissingClusterDNS") || !a.logContains("kubelet does not have ClusterDNS IP configured") {
		t.Errorf("no MissingClusterDNS event for the ClusterFirst pods without --cluster-dns in the log:\n%s", a.logTail(40))
	}
}
