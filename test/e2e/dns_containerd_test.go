package e2e

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
	"github.com/actorlet/actorlet/podspec"
)

// Cluster DNS on containerd: a DNS server of the test's on an address the
// pods reach (the host's own, through the CNI bridge's gateway), given as
// --cluster-dns. Pods get their resolv.conf through the CRI DNSConfig
// (containerd writes it) and resolve a service name through that server.
func TestE2EContainerdClusterDNS(t *testing.T) {
	ip := testenv.PodReachableIP()
	if ip == "" {
		testenv.CannotRun(t, "this host has no non-loopback IPv4 address the pods could reach")
	}
	env := testenv.ContainerdInfo(t) // skips (or fails with CI=true) where containerd cannot run
	const service, serviceIP = "myservice.default.svc.cluster.local", "10.96.0.42"
	dns, err := testenv.NewDNSServer(net.JoinHostPort(ip, "53"), map[string]string{service: serviceIP})
	if err != nil {
		t.Fatalf("the test's DNS server on %s port 53 (resolv.conf cannot name another port): %v", ip, err)
	}
	t.Cleanup(dns.Close)
	hostRC := hostResolvConf(t)

	dir := t.TempDir()
	a := startAgent(t, agentOpts{endpoint: env.Endpoint, manifestDir: dir,
		extra: []string{"--cluster-dns", ip, "--cluster-domain", "cluster.local"}})
	show := `["sh", "-c", "cat /etc/resolv.conf; echo ---; cat /etc/hosts; echo ---; nslookup ` + service + `; echo ---; sleep 3600"]`
	pod := func(name string, spec ...string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  terminationGracePeriodSeconds: 2\n%s  containers:\n  - name: app\n    image: %s\n    command: %s\n",
			name, strings.Join(spec, ""), env.BusyboxImage, show)
	}
	writeManifest(t, dir, "dns.yaml", manifests(
		pod("clusterfirst"),
		pod("default", "  dnsPolicy: Default\n"),
		pod("none", "  dnsPolicy: None\n  dnsConfig:\n    nameservers: [\""+ip+"\"]\n    searches: [custom.example]\n    options: [{name: ndots, value: \"2\"}, {name: edns0}]\n"),
		pod("hostnet", "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet\n  hostAliases: [{ip: \"10.1.2.3\", hostnames: [db.local]}]\n"),
	))
	var uids []string
	for _, name := range []string{"clusterfirst", "default", "none", "hostnet"} {
		p := a.waitPod(2*time.Minute, name+"-e2e-node", "Running", isRunning)
		uids = append(uids, string(p.UID))
	}
	t.Cleanup(func() { cleanupPods(t, a, dir, uids...) })

	// sections waits for the container's three sections: resolv.conf,
	// /etc/hosts, nslookup's output.
	sections := func(name string) (resolv, hosts, lookup string) {
		t.Helper()
		var log string
		a.waitLog(t, name+"-e2e-node", "app", "resolv.conf, hosts and nslookup printed", func(l string) bool {
			log = l
			return strings.Count(l, "---\n") >= 3
		})
		parts := strings.SplitN(log, "---\n", 4)
		return parts[0], parts[1], parts[2]
	}
	wantLines := func(what, got string, want ...string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(got), "\n")
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Errorf("%s: no line %q in\n%s", what, w, got)
			}
		}
	}

	// ClusterFirst: only the cluster DNS server, the cluster's search
	// paths then the node's, ndots 5; the service name resolves to the
	// address the test's server gives.
	resolv, _, lookup := sections("clusterfirst")
	t.Logf("ClusterFirst pod's resolv.conf:\n%s\nnslookup %s:\n%s", resolv, service, lookup)
	search := strings.Join(append([]string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}, hostRC.Searches...), " ")
	wantLines("ClusterFirst resolv.conf", resolv, "nameserver "+ip, "search "+search, "options ndots:5")
	if n := strings.Count(resolv, "nameserver "); n != 1 {
		t.Errorf("ClusterFirst resolv.conf has %d nameservers, want only the cluster's:\n%s", n, resolv)
	}
	if !strings.Contains(lookup, serviceIP) {
		t.Errorf("nslookup %s did not answer %s:\n%s", service, serviceIP, lookup)
	}
	if !slices.Contains(dns.Asked(), "A "+service+".") {
		t.Errorf("the test's DNS server was asked %q, want A %s.", dns.Asked(), service)
	}

	// Default: the node's resolv.conf.
	resolv, _, _ = sections("default")
	var want []string
	for _, ns := range hostRC.Nameservers {
		want = append(want, "nameserver "+ns)
	}
	wantLines("Default resolv.conf", resolv, want...)
	if strings.Contains(resolv, "nameserver "+ip+"\n") && !slices.Contains(hostRC.Nameservers, ip) {
		t.Errorf("Default resolv.conf names the cluster DNS:\n%s", resolv)
	}

	// None: the pod's dnsConfig only.
	resolv, _, lookup = sections("none")
	wantLines("None resolv.conf", resolv, "nameserver "+ip, "search custom.example")
	if !strings.Contains(resolv, "ndots:2") || !strings.Contains(resolv, "edns0") || strings.Contains(resolv, "cluster.local") {
		t.Errorf("None resolv.conf, want options ndots:2 edns0 and no cluster search:\n%s", resolv)
	}
	if !strings.Contains(lookup, serviceIP) {
		t.Errorf("None: nslookup %s did not answer %s:\n%s", service, serviceIP, lookup)
	}

	// ClusterFirstWithHostNet: the cluster's DNS on the host network, and
	// the node's hosts file with the pod's aliases.
	resolv, hosts, _ := sections("hostnet")
	wantLines("ClusterFirstWithHostNet resolv.conf", resolv, "nameserver "+ip, "search "+search, "options ndots:5")
	wantLines("host-network /etc/hosts", hosts, "# Kubernetes-managed hosts file (host network).", "10.1.2.3\tdb.local")
}

// hostResolvConf is the node's /etc/resolv.conf (actorlet's --resolv-conf
// default), parsed as actorlet does.
func hostResolvConf(t *testing.T) podspec.ResolvConf {
	t.Helper()
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		testenv.CannotRun(t, fmt.Sprintf("the node has no /etc/resolv.conf: %v", err))
	}
	rc, err := podspec.ParseResolvConf(b)
	if err != nil {
		t.Fatalf("/etc/resolv.conf: %v", err)
	}
	return rc
}
