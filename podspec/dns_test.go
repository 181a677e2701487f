package podspec

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func dnsPod(policy v1.DNSPolicy, hostNet bool, dc *v1.PodDNSConfig) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1"},
		Spec:       v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: dc},
	}
}

func strp(s string) *string { return &s }

func TestPodDNS(t *testing.T) {
	host := &ResolvConf{
		Nameservers: []string{"192.0.2.53", "192.0.2.54"},
		Searches:    []string{"corp.example", "example"},
		Options:     []string{"timeout:2", "rotate"},
	}
	cluster := DNS{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", Host: host}
	clusterSearch := []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "example"}
	hostCfg := &runtimeapi.DNSConfig{Servers: host.Nameservers, Searches: host.Searches, Options: host.Options}
	tests := []struct {
		name       string
		pod        *v1.Pod
		dns        DNS
		want       *runtimeapi.DNSConfig
		wantEvents []string // reasons
	}{
		{name: "ClusterFirst: the cluster servers, cluster then node searches, ndots 5",
			pod: dnsPod(v1.DNSClusterFirst, false, nil), dns: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "unset policy is ClusterFirst",
			pod: dnsPod("", false, nil), dns: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without a cluster domain keeps the node's searches",
			pod: dnsPod(v1.DNSClusterFirst, false, nil), dns: DNS{ClusterDNS: []string{"10.96.0.10"}, Host: host},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: host.Searches, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst on the host network is Default",
			pod: dnsPod(v1.DNSClusterFirst, true, nil), dns: cluster, want: hostCfg},
		{name: "ClusterFirstWithHostNet on the host network is ClusterFirst",
			pod: dnsPod(v1.DNSClusterFirstWithHostNet, true, nil), dns: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without cluster DNS falls back to Default with an event",
			pod: dnsPod(v1.DNSClusterFirst, false, nil), dns: DNS{ClusterDomain: "cluster.local", Host: host},
			want: hostCfg, wantEvents: []string{ReasonMissingClusterDNS}},
		{name: "Default: the node's resolv.conf",
			pod: dnsPod(v1.DNSDefault, false, nil), dns: cluster, want: hostCfg},
		{name: "Default without --resolv-conf: the local nameserver, search .",
			pod: dnsPod(v1.DNSDefault, false, nil), dns: DNS{ClusterDNS: []string{"10.96.0.10"}, NodeIPs: []string{"192.0.2.2"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}},
		{name: "Default without --resolv-conf on an IPv6 node",
			pod: dnsPod(v1.DNSDefault, false, nil), dns: DNS{NodeIPs: []string{"fd00::2"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"::1"}, Searches: []string{"."}}},
		{name: "None: only the pod's dnsConfig",
			pod: dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: strp("2")}, {Name: "edns0"}}}),
			dns:  cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"ndots:2", "edns0"}}},
		{name: "dnsConfig merged into ClusterFirst: appended without duplicates, options by name",
			pod: dnsPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"},
				Searches: []string{"cluster.local", "extra.example"},
				Options:  []v1.PodDNSConfigOption{{Name: "ndots", Value: strp("1")}, {Name: "single-request-reopen"}}}),
			dns: cluster,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "1.1.1.1"}, Searches: append(slices.Clone(clusterSearch), "extra.example"),
				Options: []string{"ndots:1", "single-request-reopen"}}},
		{name: "dnsConfig merged into Default: the pod's option value wins",
			pod:  dnsPod(v1.DNSDefault, false, &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "timeout", Value: strp("5")}}}),
			dns:  cluster,
			want: &runtimeapi.DNSConfig{Servers: host.Nameservers, Searches: host.Searches, Options: []string{"timeout:5", "rotate"}}},
		{name: "more than 3 nameservers are cut with an event",
			pod:        dnsPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}}),
			dns:        cluster,
			want:       &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "1.1.1.1", "8.8.8.8"}, Searches: clusterSearch, Options: []string{"ndots:5"}},
			wantEvents: []string{ReasonDNSConfigForming}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, events := PodDNS(tt.pod, tt.dns)
			if got.String() != tt.want.String() {
				t.Errorf("DNS config\n got %v\nwant %v", got, tt.want)
			}
			var reasons []string
			for _, e := range events {
				reasons = append(reasons, e.Reason)
			}
			if !slices.Equal(reasons, tt.wantEvents) {
				t.Errorf("events %v, want reasons %v", events, tt.wantEvents)
			}
		})
	}
}

func TestPodDNSEventMessages(t *testing.T) {
	_, events := PodDNS(dnsPod(v1.DNSClusterFirst, false, nil), DNS{Host: &ResolvConf{}})
	want := `pod: "web_shop(u1)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	if len(events) != 1 || events[0].Message != want {
		t.Errorf("events %+v, want one with %q", events, want)
	}
	_, events = PodDNS(dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"}}), DNS{})
	want = "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3"
	if len(events) != 1 || events[0].Message != want {
		t.Errorf("events %+v, want one with %q", events, want)
	}
}

func TestPodDNSSearchLimits(t *testing.T) {
	many := func(n, size int) []string {
		var out []string
		for i := range n {
			s := fmt.Sprintf("d%d.", i)
			out = append(out, s+strings.Repeat("x", size-len(s)))
		}
		return out
	}
	tests := []struct {
		name      string
		searches  []string
		wantCount int
		wantLen   int // the search line's length at most
		wantEvent bool
	}{
		{name: "32 paths fit", searches: many(32, 10), wantCount: 32},
		{name: "33 paths: the last is cut", searches: many(33, 10), wantCount: 32, wantEvent: true},
		{name: "a path over 253 characters is dropped", searches: append(many(2, 10), strings.Repeat("y", 254)), wantCount: 2, wantEvent: true},
		{name: "a line over 2048 characters loses its last paths", searches: many(10, 250), wantCount: 8, wantLen: MaxDNSSearchListChars, wantEvent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, events := PodDNS(dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: tt.searches}), DNS{})
			if len(got.Searches) != tt.wantCount {
				t.Errorf("%d search paths, want %d", len(got.Searches), tt.wantCount)
			}
			if !slices.Equal(got.Searches, tt.searches[:len(got.Searches)]) && !tt.wantEvent {
				t.Errorf("search paths changed: %v", got.Searches)
			}
			if l := len(strings.Join(got.Searches, " ")); tt.wantLen > 0 && l > tt.wantLen {
				t.Errorf("search line of %d characters, want at most %d", l, tt.wantLen)
			}
			if (len(events) > 0) != tt.wantEvent {
				t.Errorf("events %+v, want an event: %v", events, tt.wantEvent)
			}
			if tt.wantEvent && (events[0].Reason != ReasonDNSConfigForming ||
				!strings.HasPrefix(events[0].Message, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: ")) {
				t.Errorf("event %+v", events[0])
			}
		})
	}
}

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ResolvConf
		wantErr string
	}{
		{name: "typical",
			in:   "# generated\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example. example\noptions ndots:2 edns0\n",
			want: ResolvConf{Nameservers: []string{"192.0.2.53", "192.0.2.54"}, Searches: []string{"corp.example", "example"}, Options: []string{"ndots:2", "edns0"}}},
		{name: "the last search and options lines win",
			in:   "search a.example\nsearch b.example\noptions rotate\noptions timeout:1\ndomain ignored.example\n",
			want: ResolvConf{Nameservers: []string{}, Searches: []string{"b.example"}, Options: []string{"timeout:1"}}},
		{name: "empty", in: "", want: ResolvConf{Nameservers: []string{}, Searches: []string{}, Options: []string{}}},
		{name: "nameserver without an address", in: "nameserver 192.0.2.53\nnameserver\n", wantErr: "line 2: nameserver without an address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResolvConf([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Nameservers, tt.want.Nameservers) || !slices.Equal(got.Searches, tt.want.Searches) || !slices.Equal(got.Options, tt.want.Options) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckResolvConf(t *testing.T) {
	paths := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("d%d.example", i))
		}
		return out
	}
	tests := []struct {
		name   string
		rc     ResolvConf
		domain string
		want   string
	}{
		{name: "fits", rc: ResolvConf{Searches: paths(29)}, domain: "cluster.local"},
		{name: "no room for the cluster's 3", rc: ResolvConf{Searches: paths(30)}, domain: "cluster.local",
			want: "Resolv.conf file '/etc/resolv.conf' contains search line consisting of more than 29 domains!"},
		{name: "32 without a cluster domain", rc: ResolvConf{Searches: paths(32)}},
		{name: "a path too long", rc: ResolvConf{Searches: []string{strings.Repeat("a", 254)}},
			want: `Resolv.conf file "/etc/resolv.conf" contains a search path which length is more than allowed 253 chars!`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckResolvConf(tt.rc, "/etc/resolv.conf", tt.domain)
			if (tt.want == "") != (len(got) == 0) || (tt.want != "" && got[0] != tt.want) {
				t.Errorf("warnings %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDNSValidate(t *testing.T) {
	if err := (DNS{ClusterDNS: []string{"10.96.0.10", "fd00::10"}}).Validate(); err != nil {
		t.Errorf("valid IPs: %v", err)
	}
	err := (DNS{ClusterDNS: []string{"10.96.0.10", "kube-dns"}}).Validate()
	if err == nil || !strings.Contains(err.Error(), "--cluster-dns") || !strings.Contains(err.Error(), `"kube-dns"`) {
		t.Errorf("err %v, want one naming --cluster-dns and the value", err)
	}
}

func TestSandboxHostnameAndDNS(t *testing.T) {
	yes := true
	long := strings.Repeat("a", 60) + "-b.c-d" // cut at 63: "aaa...a-b." -> trailing "-." dropped
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{name: "the pod's name", mutate: func(*v1.Pod) {}, want: "web"},
		{name: "a long name is cut to 63 without a trailing - or .", mutate: func(p *v1.Pod) { p.Name = long }, want: strings.Repeat("a", 60) + "-b"},
		{name: "setHostnameAsFQDN", mutate: func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "h", "sub", &yes },
			want: "h.sub.ns.svc.cluster.local"},
		{name: "setHostnameAsFQDN without a subdomain", mutate: func(p *v1.Pod) { p.Spec.SetHostnameAsFQDN = &yes }, want: "web"},
		{name: "host network: none", mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true }, want: ""},
	}
	dns := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			tt.mutate(p)
			cfg := SandboxConfig(p, 0, "/var/log/pods", WithDNS(dns, "cluster.local"))
			if cfg.Hostname != tt.want {
				t.Errorf("hostname %q, want %q", cfg.Hostname, tt.want)
			}
			if cfg.DnsConfig.String() != dns.String() {
				t.Errorf("DNS config %v, want %v", cfg.DnsConfig, dns)
			}
		})
	}
	if cfg := SandboxConfig(testPod(), 0, "/var/log/pods"); cfg.DnsConfig != nil {
		t.Errorf("without WithDNS: DNS config %v, want none (the runtime's default)", cfg.DnsConfig)
	}
}

func TestHostsFileAsUpstream(t *testing.T) {
	nodeHosts := []byte("127.0.0.1\tlocalhost\n192.0.2.2\tnode-1\n")
	aliases := []v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"db", "db.local"}}, {IP: "10.9.9.10", Hostnames: []string{"cache"}}}
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		podIP  string
		domain string
		want   string
	}{
		{name: "pod network", mutate: func(*v1.Pod) {}, podIP: "10.0.0.7", domain: "cluster.local",
			want: "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n10.0.0.7\tweb\n"},
		{name: "subdomain under the cluster domain", mutate: func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "h", "sub" },
			podIP: "10.0.0.7", domain: "corp.internal",
			want: "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n10.0.0.7\th.sub.ns.svc.corp.internal\th\n"},
		{name: "host aliases", mutate: func(p *v1.Pod) { p.Spec.HostAliases = aliases }, podIP: "10.0.0.7", domain: "cluster.local",
			want: "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n10.0.0.7\tweb\n" +
				"\n# Entries added by HostAliases.\n10.9.9.9\tdb\tdb.local\n10.9.9.10\tcache\n"},
		{name: "host network: the node's file", mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true }, domain: "cluster.local",
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.0.2.2\tnode-1\n"},
		{name: "host network with host aliases", mutate: func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.HostAliases = true, aliases }, domain: "cluster.local",
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.0.2.2\tnode-1\n" +
				"\n# Entries added by HostAliases.\n10.9.9.9\tdb\tdb.local\n10.9.9.10\tcache\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			tt.mutate(p)
			if got := string(HostsFile(p, tt.podIP, tt.domain, nodeHosts)); got != tt.want {
				t.Errorf("hosts file\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestMountsEtcHosts(t *testing.T) {
	tests := []struct {
		name   string
		mounts []v1.VolumeMount
		want   bool
	}{
		{name: "no mounts", want: true},
		{name: "other mounts", mounts: []v1.VolumeMount{{Name: "data", MountPath: "/etc/hosts.d"}}, want: true},
		{name: "its own /etc/hosts", mounts: []v1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts"}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MountsEtcHosts(&v1.Container{VolumeMounts: tt.mounts}); got != tt.want {
				t.Errorf("MountsEtcHosts = %v, want %v", got, tt.want)
			}
		})
	}
}
