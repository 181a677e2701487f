package podspec

import (
	"fmt"
	"math"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Expand replaces $(VAR) with its value as the upstream kubelet's
// expansion does: $$ is an escaped $, an unknown or malformed reference is
// kept as written.
func Expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// ExpandCommand expands $(VAR) references to the container's literal env
// values in an exec command, as upstream does for probes and hooks.
func ExpandCommand(cmd []string, env []v1.EnvVar) []string {
	vars := map[string]string{}
	for _, e := range env {
		if e.ValueFrom == nil {
			vars[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = Expand(s, func(name string) (string, bool) { v, ok := vars[name]; return v, ok })
	}
	return out
}

// FieldRef is the downward API for env vars: the value of fieldPath for pod,
// whose IP is podIP on the host hostIP.
func FieldRef(pod *v1.Pod, path, podIP, hostIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	for _, m := range []struct {
		prefix string
		values map[string]string
	}{{"metadata.labels", pod.Labels}, {"metadata.annotations", pod.Annotations}} {
		if path == m.prefix {
			return FormatMap(m.values), nil
		}
		if strings.HasPrefix(path, m.prefix+"['") && strings.HasSuffix(path, "']") {
			return m.values[path[len(m.prefix)+2:len(path)-2]], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// FormatMap renders labels or annotations as the downward API does (env
// vars and downwardAPI volumes alike): sorted key="value" lines.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// DownwardAllocatable is what the downward API reports for a limit a
// container of pod does not set: the pod-level limit of cpu or memory
// where the pod sets one (PodLevelResources), else the node's
// allocatable, as upstream's defaultPodLimitsForDownwardAPI. allocatable
// is not written: a pod with no pod-level limit gets it back as is.
func DownwardAllocatable(pod *v1.Pod, allocatable v1.ResourceList) v1.ResourceList {
	if pod == nil || pod.Spec.Resources == nil || len(pod.Spec.Resources.Limits) == 0 {
		return allocatable
	}
	var out v1.ResourceList // a copy, made at the first pod-level limit
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := pod.Spec.Resources.Limits[name]; ok && !q.IsZero() {
			if out == nil {
				out = allocatable.DeepCopy()
				if out == nil {
					out = v1.ResourceList{}
				}
			}
			out[name] = q.DeepCopy()
		}
	}
	if out == nil {
		return allocatable
	}
	return out
}

// ResourceFieldRef renders a container resource with its divisor, rounding
// up as upstream. An unset limit is the node's allocatable, as upstream
// (MergeContainerResourceLimits); without one known, the CPUs of this
// machine for cpu and 0 for the others.
func ResourceFieldRef(c *v1.Container, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	var q resource.Quantity
	var ok bool
	limit := func(name v1.ResourceName) (resource.Quantity, bool) {
		if q, ok := c.Resources.Limits[name]; ok {
			return q, true
		}
		if q, ok := allocatable[name]; ok {
			return q, true
		}
		if name == v1.ResourceCPU {
			return *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI), true
		}
		return resource.Quantity{}, false
	}
	switch ref.Resource {
	case "limits.cpu":
		q, ok = limit(v1.ResourceCPU)
	case "limits.memory":
		q, ok = limit(v1.ResourceMemory)
	case "limits.ephemeral-storage":
		q, ok = limit(v1.ResourceEphemeralStorage)
	case "requests.cpu":
		q, ok = c.Resources.Requests[v1.ResourceCPU]
	case "requests.memory":
		q, ok = c.Resources.Requests[v1.ResourceMemory]
	case "requests.ephemeral-storage":
		q, ok = c.Resources.Requests[v1.ResourceEphemeralStorage]
	default:
		return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
	}
	if !ok {
		return "0", nil
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if strings.HasSuffix(ref.Resource, ".cpu") {
		v := int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))
		return strconv.FormatInt(v, 10), nil
	}
	v := int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))
	return strconv.FormatInt(v, 10), nil
}
