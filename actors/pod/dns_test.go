package pod

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/adapters/podfiles"
	"github.com/actorlet/actorlet/podspec"
)

// sandboxConfigs is a Runtime that keeps the sandbox configs it was given,
// as the runtime received them.
type sandboxConfigs struct {
	Runtime
	mu   sync.Mutex
	cfgs []*runtimeapi.PodSandboxConfig
}

var _ Runtime = (*sandboxConfigs)(nil)

func (s *sandboxConfigs) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	s.mu.Lock()
	s.cfgs = append(s.cfgs, cfg)
	s.mu.Unlock()
	return s.Runtime.RunPodSandbox(ctx, cfg, handler)
}

func (s *sandboxConfigs) first() *runtimeapi.PodSandboxConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cfgs) == 0 {
		return nil
	}
	return s.cfgs[0]
}

func TestSandboxGetsDNSAndCgroupParent(t *testing.T) {
	host := &podspec.ResolvConf{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}, Options: []string{"rotate"}}
	tests := []struct {
		name       string
		dns        *DNS
		driver     podspec.CgroupDriver
		wantDNS    *runtimeapi.DNSConfig
		wantCgroup string
		wantEvent  string
	}{
		{name: "cluster DNS, systemd driver",
			dns:    &DNS{DNS: podspec.DNS{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", Host: host}},
			driver: podspec.CgroupDriverSystemd,
			wantDNS: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
				Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Options: []string{"ndots:5"}},
			wantCgroup: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poduid_1.slice"},
		{name: "no cluster DNS: the node's, with MissingClusterDNS",
			dns:        &DNS{DNS: podspec.DNS{ClusterDomain: "cluster.local", Host: host}},
			wantDNS:    &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}, Options: []string{"rotate"}},
			wantCgroup: "/kubepods/besteffort/poduid-1",
			wantEvent:  podspec.ReasonMissingClusterDNS},
		{name: "DNS not configured: the runtime's default", wantCgroup: "/kubepods/besteffort/poduid-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &fakeRecorder{}
			var rt *sandboxConfigs
			h := newHarnessWith(t, testPod(v1.RestartPolicyAlways, "app"), func(d *Deps) {
				rt = &sandboxConfigs{Runtime: d.Runtime}
				d.Runtime, d.Events = rt, rec
				d.Config.DNS, d.Config.CgroupDriver = tt.dns, tt.driver
			})
			h.waitStatus("Running", running)
			cfg := rt.first()
			if got := cfg.GetDnsConfig(); got.String() != tt.wantDNS.String() {
				t.Errorf("sandbox DNS config %v, want %v", got, tt.wantDNS)
			}
			if got := cfg.GetLinux().GetCgroupParent(); got != tt.wantCgroup {
				t.Errorf("cgroup parent %s, want %s", got, tt.wantCgroup)
			}
			if tt.wantEvent != "" && !rec.has(tt.wantEvent) {
				t.Errorf("no %s event", tt.wantEvent)
			}
			if tt.wantEvent == "" && rec.has(podspec.ReasonMissingClusterDNS) {
				t.Errorf("a %s event", podspec.ReasonMissingClusterDNS)
			}
		})
	}
}

func TestManagedEtcHosts(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1\tlocalhost\n192.0.2.2\tnode-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aliases := []v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"db"}}}
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   []string // in the container's /etc/hosts; nil: no managed /etc/hosts mounted
	}{
		{name: "pod network, subdomain under the cluster domain",
			mutate: func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostAliases = "h", "sub", aliases },
			want:   []string{"# Kubernetes-managed hosts file.\n", "\th.sub.default.svc.corp.internal\th\n", "# Entries added by HostAliases.\n10.9.9.9\tdb\n"}},
		{name: "host network: the node's hosts file and the aliases",
			mutate: func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.HostAliases = true, aliases },
			want:   []string{"# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.0.2.2\tnode-1\n", "10.9.9.9\tdb\n"}},
		{name: "a container mounting its own /etc/hosts gets none",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts"}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod(v1.RestartPolicyAlways, "app")
			tt.mutate(p)
			h := newHarnessWith(t, p, func(d *Deps) {
				d.Files = podfiles.New(t.TempDir(), "", quiet)
				d.Config.DNS = &DNS{DNS: podspec.DNS{ClusterDomain: "corp.internal"}, HostsFile: nodeHosts}
			})
			h.waitStatus("Running", running)
			var hostsPath string
			for _, m := range h.rt.Containers()[0].Mounts {
				if m.ContainerPath == "/etc/hosts" {
					hostsPath = m.HostPath
				}
			}
			if tt.want == nil {
				if hostsPath != "" {
					t.Fatalf("managed /etc/hosts mounted from %s, want none", hostsPath)
				}
				return
			}
			if hostsPath == "" {
				t.Fatal("no /etc/hosts mounted")
			}
			b, err := os.ReadFile(hostsPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("/etc/hosts lacks %q:\n%s", w, b)
				}
			}
		})
	}
}
