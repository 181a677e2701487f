package podspec

import (
	"encoding/json"
	"hash/fnv"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	cpuSharesMin, cpuSharesMax      = 2, 262144
	quotaPeriodMicros               = int64(100000)
	milliCPUToCPU                   = 1000
	defaultTerminationMessagePath   = "/dev/termination-log"
	defaultTerminationMessagePolicy = string(v1.TerminationMessageReadFile)
)

// SandboxOption adds what the node decides to a sandbox config.
type SandboxOption func(*sandboxOptions)

type sandboxOptions struct {
	dns           *runtimeapi.DNSConfig
	clusterDomain string
	driver        CgroupDriver
}

// WithDNS gives the sandbox its resolver configuration (PodDNS's) and the
// cluster domain its hostname's FQDN is under (setHostnameAsFQDN).
// Without it the runtime chooses (containerd copies the node's
// resolv.conf).
func WithDNS(dns *runtimeapi.DNSConfig, clusterDomain string) SandboxOption {
	return func(o *sandboxOptions) { o.dns, o.clusterDomain = dns, clusterDomain }
}

// WithCgroupDriver names the cgroup parent for the driver (default
// cgroupfs).
func WithCgroupDriver(d CgroupDriver) SandboxOption {
	return func(o *sandboxOptions) { o.driver = d }
}

// SandboxConfig builds the CRI sandbox config for attempt; logRoot is the
// root of the pods' log directories (PodLogDir).
func SandboxConfig(pod *v1.Pod, attempt uint32, logRoot string, opts ...SandboxOption) *runtimeapi.PodSandboxConfig {
	var o sandboxOptions
	for _, opt := range opts {
		opt(&o)
	}
	ann := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		LogDirectory: PodLogDir(logRoot, pod),
		Labels:       Labels(pod),
		Annotations:  ann,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: CgroupParent(pod, o.driver),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
				// A privileged container needs a privileged sandbox.
				Privileged: HasPrivilegedContainer(pod),
			},
		},
	}
	if !pod.Spec.HostNetwork {
		// A host-network sandbox must not set a hostname (as upstream).
		cfg.Hostname = sandboxHostname(pod, o.clusterDomain)
	}
	cfg.DnsConfig = o.dns
	if sc := pod.Spec.SecurityContext; sc != nil {
		lsc := cfg.Linux.SecurityContext
		if sc.RunAsUser != nil {
			lsc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			lsc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		if sc.FSGroup != nil {
			lsc.SupplementalGroups = append(lsc.SupplementalGroups, *sc.FSGroup) // first, as upstream
		}
		lsc.SupplementalGroups = append(lsc.SupplementalGroups, sc.SupplementalGroups...)
		for _, s := range sc.Sysctls {
			if cfg.Linux.Sysctls == nil {
				cfg.Linux.Sysctls = map[string]string{}
			}
			cfg.Linux.Sysctls[s.Name] = s.Value
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol:      protocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return cfg
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// ContainerHash is a stable hash of the container spec without its
// resources and resize policy; a running container whose hash differs from
// the desired spec is restarted (as upstream), one whose resources change is
// resized in place (resize.go).
func ContainerHash(c *v1.Container) string {
	hc := *c
	hc.Resources = v1.ResourceRequirements{}
	hc.ResizePolicy = nil
	return fullHash(&hc)
}

// fullHash is the hash of the whole container as encoding/json writes it:
// ContainerHash of a container without resources, and the hash agents
// before in-place resize wrote (LegacyContainerHash).
func fullHash(c *v1.Container) string {
	b, _ := json.Marshal(c) // a v1.Container always marshals
	h := fnv.New32a()
	_, _ = h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// ContainerOption adds what the node decides to a container config.
type ContainerOption func(*containerOptions)

type containerOptions struct {
	memoryCapacity int64
}

// WithMemoryCapacity gives the machine's memory capacity in bytes (the
// node's capacity, not its allocatable), from which a Burstable
// container's OOM score adjustment is computed (ContainerOOMScoreAdjust).
func WithMemoryCapacity(bytes int64) ContainerOption {
	return func(o *containerOptions) { o.memoryCapacity = bytes }
}

// ContainerConfig builds the CRI container config for the given attempt
// (attempt is the container's restart count, as upstream). Env vars with a
// reference (valueFrom) are left out: the caller resolves them. The linux
// resources carry the OOM score adjustment (ContainerOOMScoreAdjust).
func ContainerConfig(pod *v1.Pod, c *v1.Container, attempt uint32, imageRef string, isInit bool, opts ...ContainerOption) *runtimeapi.ContainerConfig {
	var o containerOptions
	for _, opt := range opts {
		opt(&o)
	}
	ann := map[string]string{
		AnnotationContainerHash:        ContainerHash(c),
		AnnotationContainerResources:   FormatLinuxResources(linuxResources(c)),
		AnnotationRestartCount:         strconv.FormatUint(uint64(attempt), 10),
		AnnotationTerminationMsgPath:   TerminationMessagePath(c),
		AnnotationTerminationMsgPolicy: nonEmpty(string(c.TerminationMessagePolicy), defaultTerminationMessagePolicy),
		AnnotationPodTerminationGrace:  strconv.FormatInt(GracePeriod(pod, nil), 10),
	}
	if isInit {
		ann[AnnotationContainerInit] = "true"
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			ann[AnnotationContainerPorts] = string(b)
		}
	}
	envs := make([]*runtimeapi.KeyValue, 0, len(c.Env))
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			continue // references are resolved by the caller, at start
		}
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:    c.Command,
		Args:       c.Args,
		WorkingDir: c.WorkingDir,
		Envs:       envs,
		Labels: map[string]string{
			LabelPodUID:        string(pod.UID),
			LabelPodName:       pod.Name,
			LabelPodNamespace:  pod.Namespace,
			LabelContainerName: c.Name,
		},
		Annotations: ann,
		LogPath:     filepath.Join(c.Name, strconv.FormatUint(uint64(attempt), 10)+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       ContainerResources(pod, c, o.memoryCapacity),
			SecurityContext: securityContext(pod, c),
		},
	}
	return cfg
}

// TerminationMessagePath is where in the container the termination message
// is read from: the container's terminationMessagePath, else
// /dev/termination-log.
func TerminationMessagePath(c *v1.Container) string {
	return nonEmpty(c.TerminationMessagePath, defaultTerminationMessagePath)
}

// TerminationLogPath is the host file mounted at a container's
// terminationMessagePath: <podsDir>/<uid>/containers/<name>/<attempt>.
func TerminationLogPath(podsDir string, uid, name string, attempt uint32) string {
	return filepath.Join(podsDir, uid, "containers", name, strconv.FormatUint(uint64(attempt), 10))
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// WithPodLevelLimits is the container as its cgroup values see it: where
// the pod sets pod-level resources and the container no cpu or memory
// limit of its own, the pod-level limit stands in (its CFS quota, its
// memory limit, and its CPU shares when it requests no cpu), as upstream's
// getCPULimit/getMemoryLimit. c itself when nothing changes; never
// written.
func WithPodLevelLimits(pod *v1.Pod, c *v1.Container) *v1.Container {
	if !HasPodLevelResources(pod) {
		return c
	}
	out := c
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		podLim, ok := pod.Spec.Resources.Limits[name]
		if !ok || podLim.IsZero() {
			continue
		}
		if q, ok := c.Resources.Limits[name]; ok && !q.IsZero() {
			continue
		}
		if out == c {
			out = c.DeepCopy()
			if out.Resources.Limits == nil {
				out.Resources.Limits = v1.ResourceList{}
			}
		}
		out.Resources.Limits[name] = podLim.DeepCopy()
	}
	return out
}

// ContainerResources are the linux resources the runtime is given for c
// in pod, on a machine of memoryCapacity bytes: CPU and memory from c's
// requests and limits (pod-level limits standing in: WithPodLevelLimits)
// and the OOM score adjustment, as upstream's
// generateLinuxContainerResources. A container's creation and its in-place
// resize both send these.
func ContainerResources(pod *v1.Pod, c *v1.Container, memoryCapacity int64) *runtimeapi.LinuxContainerResources {
	r := linuxResources(WithPodLevelLimits(pod, c))
	r.OomScoreAdj = ContainerOOMScoreAdjust(pod, c, memoryCapacity)
	return r
}

// linuxResources maps requests and limits to CPU shares, CFS quota and
// memory limit, as the upstream kubelet does for cgroup v1.
func linuxResources(c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	switch {
	case hasReq:
		r.CpuShares = milliCPUToShares(cpuReq.MilliValue())
	case hasLim:
		r.CpuShares = milliCPUToShares(cpuLim.MilliValue())
	default:
		r.CpuShares = cpuSharesMin
	}
	if hasLim {
		r.CpuPeriod = quotaPeriodMicros
		r.CpuQuota = cpuLim.MilliValue() * quotaPeriodMicros / milliCPUToCPU
		if r.CpuQuota < 1000 {
			r.CpuQuota = 1000 // the kernel's minimum quota, as upstream
		}
	}
	if mem, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.MemoryLimitInBytes = mem.Value()
	}
	return r
}

func milliCPUToShares(milli int64) int64 {
	if milli == 0 {
		return cpuSharesMin
	}
	shares := milli * 1024 / milliCPUToCPU
	if shares < cpuSharesMin {
		return cpuSharesMin
	}
	if shares > cpuSharesMax {
		return cpuSharesMax
	}
	return shares
}

// securityContext is the container's effective security context
// (EffectiveSecurityContext) for the runtime, as upstream's
// determineEffectiveSecurityContext: no_new_privs where
// allowPrivilegeEscalation is false, the pod's supplemental groups and
// fsGroup.
func securityContext(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	esc := EffectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: namespaceOptions(pod),
		NoNewPrivs:       noNewPrivs(esc),
	}
	if esc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *esc.RunAsUser}
	}
	if esc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *esc.RunAsGroup}
	}
	if esc.Privileged != nil {
		sc.Privileged = *esc.Privileged
	}
	if esc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *esc.ReadOnlyRootFilesystem
	}
	if o := esc.SELinuxOptions; o != nil {
		sc.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
	}
	if caps := esc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
	}
	return sc
}
