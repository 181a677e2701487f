package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx:1",
			Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolUDP}, {ContainerPort: 81}}}}},
	}
}

func TestSandboxConfig(t *testing.T) {
	yes := true
	tests := []struct {
		name         string
		mutate       func(*v1.Pod)
		wantHostname string
		wantNS       *runtimeapi.NamespaceOption
	}{
		{name: "pod network", mutate: func(*v1.Pod) {}, wantHostname: "web",
			wantNS: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}},
		{name: "spec hostname", mutate: func(p *v1.Pod) { p.Spec.Hostname = "h" }, wantHostname: "h",
			wantNS: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}},
		{name: "host network sets no hostname", mutate: func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.Hostname = true, "h" },
			wantNS: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}},
		{name: "shared process namespace", mutate: func(p *v1.Pod) { p.Spec.ShareProcessNamespace = &yes }, wantHostname: "web",
			wantNS: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD}},
		{name: "host pid and ipc", mutate: func(p *v1.Pod) { p.Spec.HostPID, p.Spec.HostIPC, p.Spec.ShareProcessNamespace = true, true, &yes }, wantHostname: "web",
			wantNS: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			tt.mutate(p)
			cfg := SandboxConfig(p, 3, "/var/log/pods")
			if md := cfg.Metadata; md.Name != "web" || md.Namespace != "ns" || md.Uid != "u1" || md.Attempt != 3 {
				t.Errorf("metadata %+v", md)
			}
			if cfg.Hostname != tt.wantHostname {
				t.Errorf("hostname %q, want %q", cfg.Hostname, tt.wantHostname)
			}
			if cfg.LogDirectory != "/var/log/pods/ns_web_u1" {
				t.Errorf("log directory %s", cfg.LogDirectory)
			}
			if cfg.Labels[LabelPodUID] != "u1" || cfg.Labels["app"] != "web" || cfg.Annotations["note"] != "x" {
				t.Errorf("labels %v annotations %v", cfg.Labels, cfg.Annotations)
			}
			if cfg.Linux.CgroupParent != "/kubepods/besteffort/podu1" {
				t.Errorf("cgroup parent %s", cfg.Linux.CgroupParent)
			}
			if got := cfg.Linux.SecurityContext.NamespaceOptions; got.String() != tt.wantNS.String() {
				t.Errorf("namespaces %v, want %v", got, tt.wantNS)
			}
			if len(cfg.PortMappings) != 1 || cfg.PortMappings[0].HostPort != 8080 || cfg.PortMappings[0].Protocol != runtimeapi.Protocol_UDP {
				t.Errorf("port mappings %v: only host ports, with their protocol", cfg.PortMappings)
			}
		})
	}
}

func TestContainerConfig(t *testing.T) {
	grace := int64(60)
	tests := []struct {
		name      string
		mutate    func(*v1.Pod)
		isInit    bool
		wantAnn   map[string]string
		wantNoAnn []string
	}{
		{name: "defaults", mutate: func(*v1.Pod) {},
			wantAnn: map[string]string{AnnotationRestartCount: "2", AnnotationTerminationMsgPath: "/dev/termination-log",
				AnnotationTerminationMsgPolicy: "File", AnnotationPodTerminationGrace: "30"},
			wantNoAnn: []string{AnnotationContainerInit}},
		{name: "init, grace and termination message set", isInit: true, mutate: func(p *v1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = &grace
			p.Spec.Containers[0].TerminationMessagePath = "/tmp/msg"
			p.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
		}, wantAnn: map[string]string{AnnotationContainerInit: "true", AnnotationPodTerminationGrace: "60",
			AnnotationTerminationMsgPath: "/tmp/msg", AnnotationTerminationMsgPolicy: "FallbackToLogsOnError"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod()
			c := &p.Spec.Containers[0]
			c.Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "REF", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
			tt.mutate(p)
			cfg := ContainerConfig(p, c, 2, "sha256:abc", tt.isInit)
			for k, v := range map[string]string{LabelPodUID: "u1", LabelPodName: "web", LabelPodNamespace: "ns", LabelContainerName: "app"} {
				if cfg.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, cfg.Labels[k], v)
				}
			}
			for k, v := range tt.wantAnn {
				if cfg.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, cfg.Annotations[k], v)
				}
			}
			for _, k := range tt.wantNoAnn {
				if _, ok := cfg.Annotations[k]; ok {
					t.Errorf("annotation %s set", k)
				}
			}
			if cfg.Annotations[AnnotationContainerHash] != ContainerHash(c) || cfg.Annotations[AnnotationContainerPorts] == "" {
				t.Errorf("annotations %v", cfg.Annotations)
			}
			if cfg.Metadata.Name != "app" || cfg.Metadata.Attempt != 2 || cfg.LogPath != "app/2.log" {
				t.Errorf("metadata %+v log path %s", cfg.Metadata, cfg.LogPath)
			}
			if cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "nginx:1" {
				t.Errorf("image %+v", cfg.Image)
			}
			if len(cfg.Envs) != 1 || cfg.Envs[0].Key != "A" {
				t.Errorf("envs %v: literal values only, references are the caller's", cfg.Envs)
			}
		})
	}
}

func TestContainerHash(t *testing.T) {
	base := v1.Container{Name: "app", Image: "nginx:1"}
	tests := []struct {
		name   string
		mutate func(*v1.Container)
		same   bool
	}{
		{name: "same spec", mutate: func(*v1.Container) {}, same: true},
		{name: "image changed", mutate: func(c *v1.Container) { c.Image = "nginx:2" }},
		{name: "env added", mutate: func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "A", Value: "1"}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base.DeepCopy()
			tt.mutate(c)
			if got := ContainerHash(c) == ContainerHash(&base); got != tt.same {
				t.Fatalf("hashes equal: %v, want %v", got, tt.same)
			}
		})
	}
}

func TestLinuxResources(t *testing.T) {
	tests := []struct {
		name       string
		req, lim   v1.ResourceList
		wantShares int64
		wantQuota  int64
		wantPeriod int64
		wantMem    int64
	}{
		{name: "nothing set", wantShares: 2},
		{name: "request", req: res("250m", ""), wantShares: 256},
		{name: "limit only", lim: res("500m", "64Mi"), wantShares: 512, wantQuota: 50000, wantPeriod: 100000, wantMem: 64 << 20},
		{name: "tiny limit: minimum quota and shares", lim: res("1m", ""), wantShares: 2, wantQuota: 1000, wantPeriod: 100000},
		{name: "huge request: maximum shares", req: res("1000", ""), wantShares: 262144},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := linuxResources(&v1.Container{Resources: v1.ResourceRequirements{Requests: tt.req, Limits: tt.lim}})
			if r.CpuShares != tt.wantShares || r.CpuQuota != tt.wantQuota || r.CpuPeriod != tt.wantPeriod || r.MemoryLimitInBytes != tt.wantMem {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestSecurityContext(t *testing.T) {
	uid, gid, cuid := int64(1000), int64(2000), int64(3000)
	yes := true
	p := testPod()
	p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, SupplementalGroups: []int64{5}}
	tests := []struct {
		name     string
		csc      *v1.SecurityContext
		wantUser int64
		wantPriv bool
		wantCaps int
	}{
		{name: "pod's", wantUser: 1000},
		{name: "container's wins", csc: &v1.SecurityContext{RunAsUser: &cuid, Privileged: &yes,
			Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}},
			wantUser: 3000, wantPriv: true, wantCaps: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", SecurityContext: tt.csc}
			sc := securityContext(p, c)
			if sc.RunAsUser.GetValue() != tt.wantUser || sc.RunAsGroup.GetValue() != 2000 || sc.Privileged != tt.wantPriv ||
				len(sc.SupplementalGroups) != 1 {
				t.Fatalf("got %+v", sc)
			}
			if n := len(sc.GetCapabilities().GetAddCapabilities()) + len(sc.GetCapabilities().GetDropCapabilities()); n != tt.wantCaps {
				t.Fatalf("capabilities %v", sc.GetCapabilities())
			}
		})
	}
}

func TestTerminationPaths(t *testing.T) {
	tests := []struct {
		name     string
		c        *v1.Container
		wantPath string
	}{
		{name: "default", c: &v1.Container{Name: "app"}, wantPath: "/dev/termination-log"},
		{name: "set", c: &v1.Container{Name: "app", TerminationMessagePath: "/tmp/msg"}, wantPath: "/tmp/msg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TerminationMessagePath(tt.c); got != tt.wantPath {
				t.Fatalf("TerminationMessagePath = %s, want %s", got, tt.wantPath)
			}
		})
	}
	if got, want := TerminationLogPath("/var/lib/kubelet/pods", "u1", "app", 3), "/var/lib/kubelet/pods/u1/containers/app/3"; got != want {
		t.Fatalf("TerminationLogPath = %s, want %s", got, want)
	}
}
