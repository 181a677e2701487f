package pod

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// DNS is how the node's pods resolve names: the cluster DNS servers and
// domain and the node's resolv.conf (podspec.DNS), and the node's hosts
// file, which host-network pods get a copy of (with their hostAliases) as
// their managed /etc/hosts.
type DNS struct {
	podspec.DNS
	// HostsFile is the node's hosts file ("/etc/hosts"), read when a
	// host-network pod's container is created; "": host-network pods get no
	// managed /etc/hosts.
	HostsFile string
}

// sandboxConfig is the pod's sandbox config with the node's DNS and cgroup
// driver. record: the DNS events (MissingClusterDNS, DNSConfigForming) are
// recorded on the pod, as when upstream creates a sandbox.
func (a *Actor) sandboxConfig(attempt uint32, record bool) *runtimeapi.PodSandboxConfig {
	opts := []podspec.SandboxOption{podspec.WithCgroupDriver(a.d.Config.CgroupDriver)}
	if d := a.d.Config.DNS; d != nil {
		dns, events := podspec.PodDNS(a.pod, d.DNS)
		for _, e := range events {
			if record {
				a.log.Debug("pod DNS", "reason", e.Reason, "message", e.Message)
				a.event(v1.EventTypeWarning, e.Reason, e.Message, "%s", e.Message)
			}
		}
		opts = append(opts, podspec.WithDNS(dns, d.ClusterDomain))
	}
	cfg := podspec.SandboxConfig(a.pod, attempt, a.d.Config.PodLogsDir, opts...)
	if a.cgroup.parent != "" {
		cfg.Linux.CgroupParent = a.cgroup.parent // the CgroupActor's (cgroup.go)
	}
	return cfg
}

// hostsInput is what a container's managed /etc/hosts is made of beside
// the pod.
type hostsInput struct {
	sandboxIP     string // the sandbox's IP; "": unknown, no file (off the host network)
	clusterDomain string
	nodeHosts     string // the node's hosts file, for host-network pods; "": none
}

func (a *Actor) hostsInput(sandbox *runtimeapi.PodSandboxStatus) hostsInput {
	in := hostsInput{sandboxIP: sandbox.GetNetwork().GetIp()}
	if d := a.d.Config.DNS; d != nil {
		in.clusterDomain, in.nodeHosts = d.ClusterDomain, d.HostsFile
	} else {
		in.clusterDomain = "cluster.local" // as before DNS was configured
	}
	return in
}

// hostsFile is the content of the pod's managed /etc/hosts, or nil where
// the container gets none: off the host network before the sandbox has
// an IP, on it without the node's hosts file (as upstream). It reads the
// node's hosts file: call it off the mailbox.
func hostsFile(pod *v1.Pod, in hostsInput) ([]byte, error) {
	if !pod.Spec.HostNetwork {
		if in.sandboxIP == "" {
			return nil, nil
		}
		return podspec.HostsFile(pod, in.sandboxIP, in.clusterDomain, nil), nil
	}
	if in.nodeHosts == "" {
		return nil, nil
	}
	b, err := os.ReadFile(in.nodeHosts)
	if err != nil {
		return nil, fmt.Errorf("the node's hosts file: %w", err)
	}
	return podspec.HostsFile(pod, "", in.clusterDomain, b), nil
}
