package manifest

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks, as the API server's pod validation does, what a node can
// check of a pod: its metadata (name, generateName, namespace, labels,
// annotations and their total size, owner references, finalizers) and its
// spec: containers (names, images, ports, env, volume mounts, resources,
// probes, lifecycle hooks), volumes, host ports, policies, grace periods,
// hostname and DNS settings. Errors name the field, e.g.
// "spec.containers[1].image: Required value". Fields that ApplyDefaults
// fills (restartPolicy, imagePullPolicy, port protocol, probe thresholds)
// may be empty, so a pod may be validated before or after defaulting.
func Validate(pod *v1.Pod) error {
	if pod == nil {
		return field.ErrorList{field.Required(field.NewPath("pod"), "")}.ToAggregate()
	}
	errs := validateMeta(&pod.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
	for _, e := range errs {
		// apimachinery's validators quote values whole (what shown cut
		// already is at most maxShown and a short suffix).
		if v, ok := e.BadValue.(string); ok && len(v) > 2*maxShown {
			e.BadValue = shown(v)
		}
	}
	return errs.ToAggregate()
}

// maxShown bounds a value quoted in an error: a huge name or value must not
// make a huge error (an HTTP answer, a log line).
const maxShown = 128

// shown is s, cut to maxShown bytes.
func shown(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// validateMeta is the API server's ValidateObjectMeta for a pod: the name a
// DNS subdomain; the namespace a DNS label; labels, annotations (keys, 256
// KiB in total), owner references and finalizers as upstream.
func validateMeta(meta *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if meta.Name == "" {
		if meta.GenerateName == "" {
			errs = append(errs, field.Required(path.Child("name"), "name is required"))
		}
	} else if len(meta.Name) > validation.DNS1123SubdomainMaxLength {
		// Only the length: a huge name is not worth matching.
		errs = append(errs, field.Invalid(path.Child("name"), shown(meta.Name), validation.MaxLenError(validation.DNS1123SubdomainMaxLength)))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(meta.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), shown(meta.Name), msg))
		}
	}
	if g := meta.GenerateName; g != "" {
		// A prefix: a trailing dash is allowed.
		for _, msg := range apivalidation.NameIsDNSSubdomain(g, true) {
			errs = append(errs, field.Invalid(path.Child("generateName"), shown(g), msg))
		}
	}
	// The names are checked above (with short values); a namespace is set
	// by ApplyDefaults and may be empty before.
	noName := func(string, bool) []string { return nil }
	errs = append(errs, apivalidation.ValidateObjectMeta(meta, meta.Namespace != "", noName, path)...)
	return errs
}

var (
	restartPolicies = sets.New(string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever))
	pullPolicies    = sets.New(string(v1.PullAlways), string(v1.PullIfNotPresent), string(v1.PullNever))
	protocols       = sets.New(string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP))
	dnsPolicies     = sets.New(string(v1.DNSClusterFirst), string(v1.DNSClusterFirstWithHostNet), string(v1.DNSDefault), string(v1.DNSNone))

	terminationMessagePolicies = sets.New(string(v1.TerminationMessageReadFile), string(v1.TerminationMessageFallbackToLogsOnError))
)

func validateSpec(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "must have at least one container"))
	}
	if p := spec.RestartPolicy; p != "" && !restartPolicies.Has(string(p)) {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), p, sets.List(restartPolicies)))
	}
	if p := spec.DNSPolicy; p != "" && !dnsPolicies.Has(string(p)) {
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), p, sets.List(dnsPolicies)))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
	}

	errs = append(errs, validatePodSettings(spec, path)...)
	errs = append(errs, validatePodLevelResources(spec, path)...)

	volumes := sets.New[string]()
	for i := range spec.Volumes {
		vp := path.Child("volumes").Index(i)
		errs = append(errs, validateName(spec.Volumes[i].Name, vp.Child("name"), volumes)...)
		errs = append(errs, validateVolumeSource(&spec.Volumes[i].VolumeSource, vp)...)
	}

	names := sets.New[string]()
	for i := range spec.InitContainers {
		c, cp := &spec.InitContainers[i], path.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(c, cp, names, volumes)...)
		errs = append(errs, validateInitOnly(c, cp)...)
	}
	for i := range spec.Containers {
		c, cp := &spec.Containers[i], path.Child("containers").Index(i)
		errs = append(errs, validateContainer(c, cp, names, volumes)...)
		errs = append(errs, validateContainerRestartPolicy(c.RestartPolicy, c.RestartPolicyRules, cp)...)
	}
	errs = append(errs, validateHostPorts(spec, path)...)
	return errs
}

// validateName checks name, at path, as a DNS-1123 label not in names yet,
// and adds it to names.
func validateName(name string, path *field.Path, names sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	switch {
	case name == "":
		errs = append(errs, field.Required(path, ""))
	case names.Has(name):
		errs = append(errs, field.Duplicate(path, name))
	default:
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(path, name, msg))
		}
	}
	names.Insert(name)
	return errs
}

func validateContainer(c *v1.Container, path *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	errs := validateName(c.Name, path.Child("name"), names)

	if strings.TrimSpace(c.Image) == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(path.Child("image"), shown(c.Image), "must not have leading or trailing whitespace"))
	}
	if p := c.TerminationMessagePolicy; p != "" && !terminationMessagePolicies.Has(string(p)) {
		errs = append(errs, field.NotSupported(path.Child("terminationMessagePolicy"), p, sets.List(terminationMessagePolicies)))
	}
	if p := c.ImagePullPolicy; p != "" && !pullPolicies.Has(string(p)) {
		errs = append(errs, field.NotSupported(path.Child("imagePullPolicy"), p, sets.List(pullPolicies)))
	}

	portNames := sets.New[string]()
	for i, port := range c.Ports {
		pp := path.Child("ports").Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Protocol != "" && !protocols.Has(string(port.Protocol)) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, sets.List(protocols)))
		}
	}

	for i, env := range c.Env {
		ep := path.Child("env").Index(i)
		if env.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else {
			// Upstream relaxed env var names (RelaxedEnvironmentVariableValidation, GA in 1.34).
			for _, msg := range validation.IsRelaxedEnvVarName(env.Name) {
				errs = append(errs, field.Invalid(ep.Child("name"), env.Name, msg))
			}
		}
		if env.Value != "" && env.ValueFrom != nil {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		errs = append(errs, validateEnvSource(env.ValueFrom, ep.Child("valueFrom"))...)
	}

	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := path.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		errs = append(errs, validateMount(&m, mp, mountPaths)...)
	}

	errs = append(errs, validateResources(&c.Resources, path.Child("resources"))...)
	errs = append(errs, validateProbe(c.LivenessProbe, path.Child("livenessProbe"), true, portNames)...)
	errs = append(errs, validateProbe(c.ReadinessProbe, path.Child("readinessProbe"), false, portNames)...)
	errs = append(errs, validateProbe(c.StartupProbe, path.Child("startupProbe"), true, portNames)...)
	if l := c.Lifecycle; l != nil {
		errs = append(errs, validateHook(l.PostStart, path.Child("lifecycle", "postStart"))...)
		errs = append(errs, validateHook(l.PreStop, path.Child("lifecycle", "preStop"))...)
	}
	errs = append(errs, validateSecurityContext(c.SecurityContext, path.Child("securityContext"))...)
	return errs
}

func validateResources(r *v1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Limits {
		p := path.Child("limits").Key(string(name))
		errs = append(errs, validateResourceName(name, p)...)
		errs = append(errs, validateQuantity(name, q, p)...)
	}
	for name, q := range r.Requests {
		p := path.Child("requests").Key(string(name))
		errs = append(errs, validateResourceName(name, p)...)
		if qerrs := validateQuantity(name, q, p); len(qerrs) > 0 {
			errs = append(errs, qerrs...)
			continue
		}
		limit, ok := r.Limits[name]
		switch {
		case ok && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		case isExtendedResource(name) && (!ok || q.Cmp(limit) != 0):
			// Extended resources cannot be overcommitted.
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validateProbe(p *v1.Probe, path *field.Path, successMustBeOne bool, portNames sets.Set[string]) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	handlers := 0
	if p.Exec != nil {
		handlers++
		if len(p.Exec.Command) == 0 {
			errs = append(errs, field.Required(path.Child("exec", "command"), ""))
		}
	}
	if p.HTTPGet != nil {
		handlers++
		errs = append(errs, validateProbePort(p.HTTPGet.Port, path.Child("httpGet", "port"), portNames)...)
		if s := p.HTTPGet.Scheme; s != "" && s != v1.URISchemeHTTP && s != v1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(path.Child("httpGet", "scheme"), s, []string{string(v1.URISchemeHTTP), string(v1.URISchemeHTTPS)}))
		}
	}
	if p.TCPSocket != nil {
		handlers++
		errs = append(errs, validateProbePort(p.TCPSocket.Port, path.Child("tcpSocket", "port"), portNames)...)
	}
	if p.GRPC != nil {
		handlers++
		for _, msg := range validation.IsValidPortNum(int(p.GRPC.Port)) {
			errs = append(errs, field.Invalid(path.Child("grpc", "port"), p.GRPC.Port, msg))
		}
	}
	switch {
	case handlers == 0:
		errs = append(errs, field.Required(path, "must specify a handler type"))
	case handlers > 1:
		errs = append(errs, field.Forbidden(path, "may not specify more than 1 handler type"))
	}
	nonNeg := func(name string, v int32) {
		if v < 0 {
			errs = append(errs, field.Invalid(path.Child(name), v, "must be greater than or equal to 0"))
		}
	}
	nonNeg("initialDelaySeconds", p.InitialDelaySeconds)
	nonNeg("timeoutSeconds", p.TimeoutSeconds)
	nonNeg("periodSeconds", p.PeriodSeconds)
	nonNeg("successThreshold", p.SuccessThreshold)
	nonNeg("failureThreshold", p.FailureThreshold)
	if successMustBeOne && p.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	if g := p.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return errs
}

func validateProbePort(port intstr.IntOrString, path *field.Path, portNames sets.Set[string]) field.ErrorList {
	if port.Type == intstr.String {
		if portNames.Has(port.StrVal) {
			return nil
		}
		if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
			return field.ErrorList{field.Invalid(path, port.StrVal, strings.Join(msgs, "; "))}
		}
		return field.ErrorList{field.NotFound(path, port.StrVal)}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(port.IntValue()) {
		errs = append(errs, field.Invalid(path, port.IntVal, msg))
	}
	return errs
}
