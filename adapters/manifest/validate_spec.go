package manifest

import (
	"fmt"
	"net"
	"path"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/actorlet/actorlet/podspec"
)

// The checks below are those of the API server's ValidatePodCreate
// (pkg/apis/core/validation) that a node can make of what it runs; the
// messages are upstream's.

var (
	hostPathTypes = sets.New("", string(v1.HostPathDirectoryOrCreate), string(v1.HostPathDirectory),
		string(v1.HostPathFileOrCreate), string(v1.HostPathFile), string(v1.HostPathSocket),
		string(v1.HostPathCharDev), string(v1.HostPathBlockDev))
	propagations = sets.New(string(v1.MountPropagationNone), string(v1.MountPropagationHostToContainer),
		string(v1.MountPropagationBidirectional))
	// The downward API's fields for env vars (besides labels['k'] and
	// annotations['k']).
	envFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels",
		"metadata.annotations", "spec.nodeName", "spec.serviceAccountName", "status.hostIP",
		"status.hostIPs", "status.podIP", "status.podIPs")
	containerResourceFields = sets.New("limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage")
	standardContainerResources = sets.New(string(v1.ResourceCPU), string(v1.ResourceMemory), string(v1.ResourceEphemeralStorage))
	cpuDivisors                = sets.New("1m", "1")
	memoryDivisors             = sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
)

// maxID is the largest user or group id the API server takes.
const maxID = 2147483647

// validatePodSettings checks the pod-level fields besides containers and
// volumes: hostname, subdomain, DNS settings, service account, host
// aliases and the pod's security context.
func validatePodSettings(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	label := func(name, v string) {
		if v == "" {
			return
		}
		for _, msg := range validation.IsDNS1123Label(v) {
			errs = append(errs, field.Invalid(p.Child(name), shown(v), msg))
		}
	}
	label("hostname", spec.Hostname)
	label("subdomain", spec.Subdomain)
	if sa := spec.ServiceAccountName; sa != "" {
		for _, msg := range validation.IsDNS1123Subdomain(sa) {
			errs = append(errs, field.Invalid(p.Child("serviceAccountName"), shown(sa), msg))
		}
	}
	if spec.DNSPolicy == v1.DNSNone && spec.DNSConfig == nil {
		errs = append(errs, field.Required(p.Child("dnsConfig"), "must provide `dnsConfig` when `dnsPolicy` is None"))
	}
	if c := spec.DNSConfig; c != nil {
		cp := p.Child("dnsConfig")
		if spec.DNSPolicy == v1.DNSNone && len(c.Nameservers) == 0 {
			errs = append(errs, field.Required(cp.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None"))
		}
		if len(c.Nameservers) > 3 {
			errs = append(errs, field.Invalid(cp.Child("nameservers"), c.Nameservers, "must not have more than 3 nameservers"))
		}
		for i, ns := range c.Nameservers {
			if net.ParseIP(ns) == nil {
				errs = append(errs, field.Invalid(cp.Child("nameservers").Index(i), shown(ns), "must be a valid IP address"))
			}
		}
		if len(c.Searches) > 32 {
			errs = append(errs, field.Invalid(cp.Child("searches"), len(c.Searches), "must not have more than 32 search paths"))
		}
		for i, o := range c.Options {
			if o.Name == "" {
				errs = append(errs, field.Required(cp.Child("options").Index(i).Child("name"), "must not be empty"))
			}
		}
	}
	for i, ha := range spec.HostAliases {
		hp := p.Child("hostAliases").Index(i)
		if net.ParseIP(ha.IP) == nil {
			errs = append(errs, field.Invalid(hp.Child("ip"), shown(ha.IP), "must be a valid IP address"))
		}
		for j, h := range ha.Hostnames {
			for _, msg := range validation.IsDNS1123Subdomain(h) {
				errs = append(errs, field.Invalid(hp.Child("hostnames").Index(j), shown(h), msg))
			}
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		sp := p.Child("securityContext")
		errs = append(errs, validateID(sc.RunAsUser, sp.Child("runAsUser"))...)
		errs = append(errs, validateID(sc.RunAsGroup, sp.Child("runAsGroup"))...)
		errs = append(errs, validateID(sc.FSGroup, sp.Child("fsGroup"))...)
		for i, g := range sc.SupplementalGroups {
			errs = append(errs, validateID(&g, sp.Child("supplementalGroups").Index(i))...)
		}
	}
	return errs
}

func validateID(id *int64, p *field.Path) field.ErrorList {
	if id == nil || (*id >= 0 && *id <= maxID) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *id, fmt.Sprintf("must be between %d and %d, inclusive", 0, maxID))}
}

// validateVolumeSource: at most one source (none is an emptyDir, as the API
// server defaults it), and what the node uses of the common ones.
func validateVolumeSource(vs *v1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	v := reflect.ValueOf(vs).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 volume type"))
	}
	if h := vs.HostPath; h != nil {
		if h.Path == "" {
			errs = append(errs, field.Required(p.Child("hostPath", "path"), ""))
		}
		if h.Type != nil && !hostPathTypes.Has(string(*h.Type)) {
			errs = append(errs, field.NotSupported(p.Child("hostPath", "type"), *h.Type, sets.List(hostPathTypes)))
		}
	}
	if e := vs.EmptyDir; e != nil && e.SizeLimit != nil && e.SizeLimit.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("emptyDir", "sizeLimit"), e.SizeLimit.String(), "must be greater than or equal to 0"))
	}
	if c := vs.ConfigMap; c != nil {
		if c.Name == "" {
			errs = append(errs, field.Required(p.Child("configMap", "name"), ""))
		}
		errs = append(errs, validateKeyPaths(c.Items, p.Child("configMap", "items"))...)
	}
	if s := vs.Secret; s != nil {
		if s.SecretName == "" {
			errs = append(errs, field.Required(p.Child("secret", "secretName"), ""))
		}
		errs = append(errs, validateKeyPaths(s.Items, p.Child("secret", "items"))...)
	}
	if d := vs.DownwardAPI; d != nil {
		for i, f := range d.Items {
			errs = append(errs, validateLocalPath(f.Path, p.Child("downwardAPI", "items").Index(i).Child("path"), true)...)
		}
	}
	if pr := vs.Projected; pr != nil {
		for i, src := range pr.Sources {
			sp := p.Child("projected", "sources").Index(i)
			if src.ConfigMap != nil {
				errs = append(errs, validateKeyPaths(src.ConfigMap.Items, sp.Child("configMap", "items"))...)
			}
			if src.Secret != nil {
				errs = append(errs, validateKeyPaths(src.Secret.Items, sp.Child("secret", "items"))...)
			}
			if src.DownwardAPI != nil {
				for j, f := range src.DownwardAPI.Items {
					errs = append(errs, validateLocalPath(f.Path, sp.Child("downwardAPI", "items").Index(j).Child("path"), true)...)
				}
			}
		}
	}
	return errs
}

// validateKeyPaths: each item's key is set and its path stays inside the
// volume.
func validateKeyPaths(items []v1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		ip := p.Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		errs = append(errs, validateLocalPath(it.Path, ip.Child("path"), true)...)
	}
	return errs
}

// validateLocalPath is upstream's validateLocalDescendingPath: a relative
// path with no ".." element (the node writes or mounts under it).
func validateLocalPath(v string, p *field.Path, required bool) field.ErrorList {
	var errs field.ErrorList
	if v == "" {
		if required {
			errs = append(errs, field.Required(p, ""))
		}
		return errs
	}
	if path.IsAbs(v) {
		errs = append(errs, field.Invalid(p, shown(v), "must be a relative path"))
	}
	for _, part := range strings.Split(strings.ReplaceAll(v, `\`, "/"), "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(p, shown(v), "must not contain '..'"))
			break
		}
	}
	return errs
}

// validateMount checks a volume mount besides its volume's name.
func validateMount(m *v1.VolumeMount, p *field.Path, mountPaths sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	switch {
	case m.MountPath == "":
		errs = append(errs, field.Required(p.Child("mountPath"), ""))
	case mountPaths.Has(m.MountPath):
		errs = append(errs, field.Invalid(p.Child("mountPath"), shown(m.MountPath), "must be unique"))
	}
	mountPaths.Insert(m.MountPath)
	if m.SubPath != "" && m.SubPathExpr != "" {
		errs = append(errs, field.Invalid(p.Child("subPathExpr"), shown(m.SubPathExpr), "subPathExpr and subPath are mutually exclusive"))
	}
	errs = append(errs, validateLocalPath(m.SubPath, p.Child("subPath"), false)...)
	errs = append(errs, validateLocalPath(m.SubPathExpr, p.Child("subPathExpr"), false)...)
	if mp := m.MountPropagation; mp != nil && !propagations.Has(string(*mp)) {
		errs = append(errs, field.NotSupported(p.Child("mountPropagation"), *mp, sets.List(propagations)))
	}
	return errs
}

// validateEnvSource: exactly one source, and the downward API fields the
// node can fill.
func validateEnvSource(s *v1.EnvVarSource, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if f := s.FieldRef; f != nil {
		n++
		errs = append(errs, validateEnvFieldPath(f.FieldPath, p.Child("fieldRef", "fieldPath"))...)
	}
	if r := s.ResourceFieldRef; r != nil {
		n++
		errs = append(errs, validateResourceFieldRef(r, p.Child("resourceFieldRef"))...)
	}
	keyRef := func(name, key string, kp *field.Path) {
		n++
		if name == "" {
			errs = append(errs, field.Required(kp.Child("name"), ""))
		}
		if key == "" {
			errs = append(errs, field.Required(kp.Child("key"), ""))
			return
		}
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(kp.Child("key"), shown(key), msg))
		}
	}
	if c := s.ConfigMapKeyRef; c != nil {
		keyRef(c.Name, c.Key, p.Child("configMapKeyRef"))
	}
	if c := s.SecretKeyRef; c != nil {
		keyRef(c.Name, c.Key, p.Child("secretKeyRef"))
	}
	if s.FileKeyRef != nil {
		n++
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(p, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case n > 1:
		errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
	}
	return errs
}

func validateEnvFieldPath(fp string, p *field.Path) field.ErrorList {
	if fp == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, prefix := range []string{"metadata.labels", "metadata.annotations"} {
		if key, ok := strings.CutPrefix(fp, prefix+"['"); ok && strings.HasSuffix(key, "']") {
			key = strings.TrimSuffix(key, "']")
			var errs field.ErrorList
			for _, msg := range validation.IsQualifiedName(strings.ToLower(key)) {
				errs = append(errs, field.Invalid(p, shown(fp), msg))
			}
			return errs
		}
	}
	if !envFieldPaths.Has(fp) {
		return field.ErrorList{field.NotSupported(p, shown(fp), sets.List(envFieldPaths))}
	}
	return nil
}

func validateResourceFieldRef(r *v1.ResourceFieldSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.Resource == "" {
		return field.ErrorList{field.Required(p.Child("resource"), "")}
	}
	if !containerResourceFields.Has(r.Resource) {
		return field.ErrorList{field.NotSupported(p.Child("resource"), shown(r.Resource), sets.List(containerResourceFields))}
	}
	if r.Divisor.IsZero() {
		return nil
	}
	divisors := memoryDivisors
	if strings.HasSuffix(r.Resource, ".cpu") {
		divisors = cpuDivisors
	}
	if !divisors.Has(r.Divisor.String()) {
		errs = append(errs, field.NotSupported(p.Child("divisor"), r.Divisor.String(), sets.List(divisors)))
	}
	return errs
}

// validateHook: a lifecycle hook has exactly one handler.
func validateHook(h *v1.LifecycleHandler, p *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if h.Exec != nil {
		n++
		if len(h.Exec.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if h.HTTPGet != nil {
		n++
		errs = append(errs, validatePortNumOrName(h.HTTPGet.Port, p.Child("httpGet", "port"))...)
		if s := h.HTTPGet.Scheme; s != "" && s != v1.URISchemeHTTP && s != v1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(p.Child("httpGet", "scheme"), s, []string{string(v1.URISchemeHTTP), string(v1.URISchemeHTTPS)}))
		}
	}
	if h.TCPSocket != nil {
		n++
		errs = append(errs, validatePortNumOrName(h.TCPSocket.Port, p.Child("tcpSocket", "port"))...)
	}
	if h.Sleep != nil {
		n++
		if h.Sleep.Seconds < 0 {
			errs = append(errs, field.Invalid(p.Child("sleep", "seconds"), h.Sleep.Seconds, "must be greater than or equal to 0"))
		}
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a handler type"))
	case n > 1:
		errs = append(errs, field.Forbidden(p, "may not specify more than 1 handler type"))
	}
	return errs
}

// validateSecurityContext checks the ids and the privilege flags that
// contradict each other.
func validateSecurityContext(sc *v1.SecurityContext, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateID(sc.RunAsUser, p.Child("runAsUser"))
	errs = append(errs, validateID(sc.RunAsGroup, p.Child("runAsGroup"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(p, "", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN" {
					errs = append(errs, field.Invalid(p, "", "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	if pm := sc.ProcMount; pm != nil && *pm != v1.DefaultProcMount && *pm != v1.UnmaskedProcMount {
		errs = append(errs, field.NotSupported(p.Child("procMount"), *pm, []string{string(v1.DefaultProcMount), string(v1.UnmaskedProcMount)}))
	}
	return errs
}

// validateInitOnly: an init container's restartPolicy Always makes it a
// sidecar, which may have no restartPolicyRules (RestartAllContainers, the
// one action a sidecar's rule could take, is alpha and off); Never and
// OnFailure with their rules are checked as a regular container's
// (ContainerRestartRules, beta and on since v1.35). An init container that
// is not a sidecar has no probes and no lifecycle hooks.
func validateInitOnly(c *v1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch rp := c.RestartPolicy; {
	case rp == nil:
		if len(c.RestartPolicyRules) > 0 {
			errs = append(errs, field.Required(p.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
		}
	case *rp == v1.ContainerRestartPolicyAlways:
		if len(c.RestartPolicyRules) > 0 {
			errs = append(errs, field.Forbidden(p.Child("restartPolicyRules"), "restartPolicyRules are not allowed for init containers with restart policy Always"))
		}
		return errs
	default:
		errs = append(errs, validateContainerRestartPolicy(rp, c.RestartPolicyRules, p)...)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}} {
		if f.set {
			errs = append(errs, field.Forbidden(p.Child(f.name), "may not be set for init containers without restartPolicy=Always"))
		}
	}
	return errs
}

var (
	containerRestartPolicies = sets.New(string(v1.ContainerRestartPolicyAlways), string(v1.ContainerRestartPolicyNever), string(v1.ContainerRestartPolicyOnFailure))
	restartRuleOperators     = sets.New(string(v1.ContainerRestartRuleOnExitCodesOpIn), string(v1.ContainerRestartRuleOnExitCodesOpNotIn))
	// Restart is the one action: RestartAllContainers needs the alpha
	// RestartAllContainersOnContainerExits, off by default in v1.37.
	restartRuleActions = sets.New(string(v1.ContainerRestartRuleActionRestart))
)

// validateContainerRestartPolicy checks a container's own restartPolicy and
// restartPolicyRules as the v1.37 API server does (ContainerRestartRules):
// rules need a policy; at most 20 rules, each with action Restart and
// exitCodes (operator In or NotIn, at most 255 values).
func validateContainerRestartPolicy(policy *v1.ContainerRestartPolicy, rules []v1.ContainerRestartRule, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case policy == nil && len(rules) == 0:
		return nil
	case policy == nil:
		errs = append(errs, field.Required(p.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
	case !containerRestartPolicies.Has(string(*policy)):
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *policy, sets.List(containerRestartPolicies)))
	}
	if len(rules) > 20 {
		errs = append(errs, field.TooMany(p.Child("restartPolicyRules"), len(rules), 20))
	}
	for i, r := range rules {
		rp := p.Child("restartPolicyRules").Index(i)
		if !restartRuleActions.Has(string(r.Action)) {
			errs = append(errs, field.NotSupported(rp.Child("action"), r.Action, sets.List(restartRuleActions)))
		}
		if r.ExitCodes == nil {
			errs = append(errs, field.Required(rp.Child("exitCodes"), "must be specified"))
			continue
		}
		if !restartRuleOperators.Has(string(r.ExitCodes.Operator)) {
			errs = append(errs, field.NotSupported(rp.Child("exitCodes", "operator"), r.ExitCodes.Operator, sets.List(restartRuleOperators)))
		}
		if n := len(r.ExitCodes.Values); n > 255 {
			errs = append(errs, field.TooMany(rp.Child("exitCodes", "values"), n, 255))
		}
	}
	return errs
}

// validateHostPorts: no two containers that run together take the same host
// port (protocol, IP, port); with hostNetwork a host port is its container
// port.
func validateHostPorts(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(cs []v1.Container, kind string, seen sets.Set[string], only func(*v1.Container) bool) {
		for i := range cs {
			if only != nil && !only(&cs[i]) {
				continue
			}
			for j, port := range cs[i].Ports {
				pp := p.Child(kind).Index(i).Child("ports").Index(j)
				if spec.HostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
					errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, "must match `hostPort` when `hostNetwork` is true"))
				}
				if port.HostPort == 0 {
					continue
				}
				proto := port.Protocol
				if proto == "" {
					proto = v1.ProtocolTCP
				}
				key := fmt.Sprintf("%s/%s/%d", proto, port.HostIP, port.HostPort)
				if seen.Has(key) {
					errs = append(errs, field.Duplicate(pp.Child("hostPort"), key))
				}
				seen.Insert(key)
			}
		}
	}
	// Init containers run one at a time, before the others; sidecars run
	// with the containers.
	check(spec.InitContainers, "initContainers", sets.New[string](), func(c *v1.Container) bool { return !podspec.IsSidecar(c) })
	together := sets.New[string]()
	check(spec.InitContainers, "initContainers", together, podspec.IsSidecar)
	check(spec.Containers, "containers", together, nil)
	return errs
}

// validateResourceName: cpu, memory, ephemeral-storage, hugepages-<size>,
// or an extended resource (a qualified name with a domain).
func validateResourceName(name v1.ResourceName, p *field.Path) field.ErrorList {
	s := string(name)
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(s) {
		errs = append(errs, field.Invalid(p, shown(s), msg))
	}
	if len(errs) > 0 {
		return errs
	}
	if isNative(name) && !standardContainerResources.Has(s) && !strings.HasPrefix(s, v1.ResourceHugePagesPrefix) {
		errs = append(errs, field.Invalid(p, s, "must be a standard resource for containers"))
	}
	return errs
}

// isNative: a resource of Kubernetes itself (no domain, or kubernetes.io).
func isNative(name v1.ResourceName) bool {
	s := string(name)
	return !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix)
}

// isExtendedResource: a device or other resource of a plugin; whole units,
// never overcommitted.
func isExtendedResource(name v1.ResourceName) bool {
	return !isNative(name) && !strings.HasPrefix(string(name), v1.DefaultResourceRequestsPrefix)
}

func validateQuantity(name v1.ResourceName, q resource.Quantity, p *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than or equal to 0")}
	}
	if isExtendedResource(name) && q.MilliValue()%1000 != 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be an integer")}
	}
	return nil
}

// validatePortNumOrName: a port number or an IANA service name.
func validatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
			return field.ErrorList{field.Invalid(p, shown(port.StrVal), strings.Join(msgs, "; "))}
		}
		return nil
	}
	if msgs := validation.IsValidPortNum(port.IntValue()); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, port.IntVal, strings.Join(msgs, "; "))}
	}
	return nil
}
