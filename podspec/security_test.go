package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestSandboxPrivilegedWhenAnyContainerIs(t *testing.T) {
	priv := &v1.SecurityContext{Privileged: ptr.To(true)}
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   bool
	}{
		{name: "no security context", mutate: func(*v1.Pod) {}},
		{name: "privileged false", mutate: func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(false)} }},
		{name: "a regular container", mutate: func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = priv }, want: true},
		{name: "an init container", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", SecurityContext: priv}}
		}, want: true},
		{name: "an ephemeral container", mutate: func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", SecurityContext: priv}}}
		}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			tt.mutate(p)
			if got := SandboxConfig(p, 0, "/var/log/pods").Linux.SecurityContext.Privileged; got != tt.want {
				t.Errorf("sandbox privileged %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSandboxGroupsFSGroupFirst(t *testing.T) {
	p := testPod()
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{5}}
	g := SandboxConfig(p, 0, "/var/log/pods").Linux.SecurityContext.SupplementalGroups
	if len(g) != 2 || g[0] != 3000 || g[1] != 5 {
		t.Errorf("sandbox supplemental groups %v, want [3000 5]", g)
	}
}

func TestContainerSecurityContext(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.PodSecurityContext
		ctr    *v1.SecurityContext
		check  func(*runtimeapi.LinuxContainerSecurityContext) bool
		expect string
	}{
		{name: "allowPrivilegeEscalation false sets no_new_privs",
			ctr:   &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) bool { return sc.NoNewPrivs }, expect: "NoNewPrivs"},
		{name: "allowPrivilegeEscalation true does not",
			ctr:   &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) bool { return !sc.NoNewPrivs }, expect: "no NoNewPrivs"},
		{name: "unset does not",
			ctr:   &v1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) bool { return !sc.NoNewPrivs }, expect: "no NoNewPrivs"},
		{name: "the container's runAsUser wins over the pod's",
			pod: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1), RunAsGroup: ptr.To[int64](2)},
			ctr: &v1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) bool {
				return sc.RunAsUser.GetValue() == 1000 && sc.RunAsGroup.GetValue() == 2
			}, expect: "uid 1000 gid 2"},
		{name: "fsGroup then supplemental groups",
			pod: &v1.PodSecurityContext{FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{5, 6}},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) bool {
				g := sc.SupplementalGroups
				return len(g) == 3 && g[0] == 3000 && g[1] == 5 && g[2] == 6
			}, expect: "groups 3000 5 6"},
		{name: "privileged and read-only root",
			ctr: &v1.SecurityContext{Privileged: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true)},
			check: func(sc *runtimeapi.LinuxContainerSecurityContext) bool {
				return sc.Privileged && sc.ReadonlyRootfs
			}, expect: "privileged, read-only rootfs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			p.Spec.SecurityContext = tt.pod
			p.Spec.Containers[0].SecurityContext = tt.ctr
			cfg := ContainerConfig(p, &p.Spec.Containers[0], 0, "img", false)
			if !tt.check(cfg.Linux.SecurityContext) {
				t.Errorf("security context %v, want %s", cfg.Linux.SecurityContext, tt.expect)
			}
		})
	}
}

func TestVerifyRunAsNonRoot(t *testing.T) {
	const pod = `"web_ns(u1)"`
	tests := []struct {
		name     string
		podSC    *v1.PodSecurityContext
		ctrSC    *v1.SecurityContext
		img      *runtimeapi.Image
		wantErr  string
		imageUID bool // the image's user matters
	}{
		{name: "not asked", ctrSC: &v1.SecurityContext{RunAsUser: ptr.To[int64](0)}},
		{name: "explicit root", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			wantErr: "container's runAsUser breaks non-root policy (pod: " + pod + ", container: app)"},
		{name: "explicit non-root", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}},
		{name: "pod-level runAsNonRoot, image root", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			img: &runtimeapi.Image{}, wantErr: "container has runAsNonRoot and image will run as root (pod: " + pod + ", container: app)"},
		{name: "no image status: root", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			wantErr: "container has runAsNonRoot and image will run as root (pod: " + pod + ", container: app)"},
		{name: "image uid 1234", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			img: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1234}}},
		{name: "image user name", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			img:     &runtimeapi.Image{Username: "nobody"},
			wantErr: "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: " + pod + ", container: app)"},
		{name: "image uid out of range", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			img:     &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1 << 40}},
			wantErr: "container has runAsNonRoot and image has an invalid user id (1099511627776). (Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive (pod: " + pod + ", container: app)"},
		{name: "the container's runAsNonRoot false wins", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(false)}},
		{name: "the pod's runAsUser counts", podSC: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](0)},
			ctrSC:   &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			wantErr: "container's runAsUser breaks non-root policy (pod: " + pod + ", container: app)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			p.Spec.SecurityContext = tt.podSC
			p.Spec.Containers[0].SecurityContext = tt.ctrSC
			uid, name := ImageUser(tt.img)
			err := VerifyRunAsNonRoot(p, &p.Spec.Containers[0], uid, name)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err %v, want none", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("err %v,\nwant %s", err, tt.wantErr)
			}
		})
	}
}

func TestHostnameOverrideAndLongNames(t *testing.T) {
	long70 := strings.Repeat("a", 62) + "-" + "bcdefgh" // cut at 63 ends in '-': dropped
	tests := []struct {
		name       string
		mutate     func(*v1.Pod)
		wantSB     string // the sandbox's hostname
		wantHosts  string // the pod IP's line in /etc/hosts
		wantErrSub string
	}{
		{name: "a 70-character name is cut to 63", mutate: func(p *v1.Pod) { p.Name = strings.Repeat("x", 70) },
			wantSB: strings.Repeat("x", 63), wantHosts: "10.0.0.7\t" + strings.Repeat("x", 63)},
		{name: "a cut ending in '-' drops it", mutate: func(p *v1.Pod) { p.Name = long70 },
			wantSB: strings.Repeat("a", 62), wantHosts: "10.0.0.7\t" + strings.Repeat("a", 62)},
		{name: "hostnameOverride, a DNS subdomain", mutate: func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To("override.example.host") },
			wantSB: "override.example.host", wantHosts: "10.0.0.7\toverride.example.host"},
		{name: "hostnameOverride wins over hostname", mutate: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.HostnameOverride = "custom-host", ptr.To("override-host")
		}, wantSB: "override-host", wantHosts: "10.0.0.7\toverride-host"},
		{name: "hostnameOverride wins over subdomain: no domain", mutate: func(p *v1.Pod) {
			p.Spec.Subdomain, p.Spec.HostnameOverride = "sub", ptr.To("override-host")
		}, wantSB: "override-host", wantHosts: "10.0.0.7\toverride-host"},
		{name: "hostnameOverride not a DNS subdomain", mutate: func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To("Not-RFC1123") },
			wantSB: "Not-RFC1123", wantHosts: "10.0.0.7\tNot-RFC1123", wantErrSub: `pod HostnameOverride "Not-RFC1123" is not a valid DNS subdomain`},
		{name: "hostname not a DNS label", mutate: func(p *v1.Pod) { p.Spec.Hostname = "a.b" },
			wantSB: "a.b", wantHosts: "10.0.0.7\ta.b", wantErrSub: `pod Hostname "a.b" is not a valid DNS label`},
		{name: "FQDN over 64 characters", mutate: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = strings.Repeat("h", 40), "sub", ptr.To(true)
		}, wantSB: strings.Repeat("h", 40), wantHosts: "10.0.0.7\t" + strings.Repeat("h", 40) + ".sub.ns.svc.cluster.local\t" + strings.Repeat("h", 40),
			wantErrSub: "FQDN " + strings.Repeat("h", 40) + ".sub.ns.svc.cluster.local is too long (64 characters is the max, 65 characters requested)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			tt.mutate(p)
			cfg := SandboxConfig(p, 0, "/var/log/pods", WithDNS(nil, "cluster.local"))
			if cfg.Hostname != tt.wantSB {
				t.Errorf("sandbox hostname %q, want %q", cfg.Hostname, tt.wantSB)
			}
			hosts := string(HostsFile(p, "10.0.0.7", "cluster.local", nil))
			if !strings.Contains(hosts, "\n"+tt.wantHosts+"\n") {
				t.Errorf("/etc/hosts has no line %q:\n%s", tt.wantHosts, hosts)
			}
			err := CheckHostname(p, "cluster.local")
			switch {
			case tt.wantErrSub == "" && err != nil:
				t.Errorf("CheckHostname: %v, want none", err)
			case tt.wantErrSub != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrSub)):
				t.Errorf("CheckHostname: %v, want one with %q", err, tt.wantErrSub)
			}
		})
	}
}

func TestSysctlAdmission(t *testing.T) {
	tests := []struct {
		name    string
		unsafe  []string
		sysctls []v1.Sysctl
		hostNet bool
		wantMsg string // "" admitted
	}{
		{name: "no sysctls"},
		{name: "safe", sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "net.ipv4.tcp_rmem", Value: "4096 87380 6291456"}}},
		{name: "unsafe, not allowed", sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "kernel.msgmax", Value: "10000000"}},
			wantMsg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe, allowed by name", unsafe: []string{"kernel.msgmax"}, sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}},
		{name: "unsafe, allowed by pattern", unsafe: []string{"kernel.msg*"}, sysctls: []v1.Sysctl{{Name: "kernel.msgmnb", Value: "1"}}},
		{name: "slash separators", sysctls: []v1.Sysctl{{Name: "net/ipv4/ip_local_port_range", Value: "1024 65535"}}},
		{name: "a network sysctl on the host network", hostNet: true, sysctls: []v1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}},
			wantMsg: `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewSysctlAllowlist(append(SafeSysctls("6.1.0-13-amd64"), tt.unsafe...))
			if err != nil {
				t.Fatal(err)
			}
			p := testPod()
			p.Spec.HostNetwork = tt.hostNet
			if tt.sysctls != nil {
				p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: tt.sysctls}
			}
			reason, msg := w.Admit(p)
			if msg != tt.wantMsg || (tt.wantMsg != "") != (reason == ReasonSysctlForbidden) {
				t.Errorf("Admit: %q %q, want %q", reason, msg, tt.wantMsg)
			}
		})
	}
}

func TestSysctlAllowlistRefusesBadPatterns(t *testing.T) {
	tests := []struct {
		name, pattern, want string
	}{
		{name: "not namespaced", pattern: "kernel.panic", want: `the sysctls "kernel.panic" are not known to be namespaced`},
		{name: "not a sysctl", pattern: "Foo..bar", want: `sysctl "Foo..bar" must have at most 253 characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewSysctlAllowlist([]string{tt.pattern}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSafeSysctlsByKernel(t *testing.T) {
	tests := []struct {
		name, release string
		want          int
	}{
		{name: "new kernel: all", release: "6.18.44-fc", want: 12},
		{name: "4.5: not tcp_fin_timeout nor tcp_rmem/wmem", release: "4.5.0", want: 9},
		{name: "unknown: only those with no minimum", release: "", want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SafeSysctls(tt.release); len(got) != tt.want {
				t.Errorf("%d safe sysctls %v, want %d", len(got), got, tt.want)
			}
		})
	}
}
