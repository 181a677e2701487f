package pod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/errdefs"
)

// ConfigSource gives the ConfigMaps and Secrets that env and envFrom refer
// to (cluster mode). A missing object is an error of class
// errdefs.ErrNotFound.
type ConfigSource interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// ReasonCreateContainerConfigError is the waiting reason of a container
// whose config cannot be made (a missing ConfigMap, Secret or key).
const ReasonCreateContainerConfigError = "CreateContainerConfigError"

// envInput is what the environment of a container is made from.
type envInput struct {
	pod    *v1.Pod
	c      *v1.Container
	podIP  string
	hostIP string
	src    ConfigSource
	// allocatable stands in for unset limits (resourceFieldRef).
	allocatable v1.ResourceList
}

// makeEnv builds the container's environment as upstream does: envFrom
// first, then env in order, each value with $(VAR) expanded from the
// variables defined before it; then command and args are expanded with the
// result.
func makeEnv(ctx context.Context, in envInput) (envs []*runtimeapi.KeyValue, command, args []string, err error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	ns := in.pod.Namespace
	for _, ef := range in.c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			optional := ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional
			cm, err := in.configMap(ctx, ns, ef.ConfigMapRef.Name)
			if err != nil {
				if optional && errdefs.IsNotFound(err) {
					continue
				}
				return nil, nil, nil, err
			}
			for _, k := range sortedKeys(cm.Data) {
				set(ef.Prefix+k, cm.Data[k])
			}
		case ef.SecretRef != nil:
			optional := ef.SecretRef.Optional != nil && *ef.SecretRef.Optional
			s, err := in.secret(ctx, ns, ef.SecretRef.Name)
			if err != nil {
				if optional && errdefs.IsNotFound(err) {
					continue
				}
				return nil, nil, nil, err
			}
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				set(ef.Prefix+k, string(s.Data[k]))
			}
		}
	}
	for _, e := range in.c.Env {
		if e.ValueFrom == nil {
			set(e.Name, probe.Expand(e.Value, lookup))
			continue
		}
		v, ok, err := in.valueFrom(ctx, e.ValueFrom)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	for _, k := range order {
		envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(vars[k])})
	}
	for _, s := range in.c.Command {
		command = append(command, probe.Expand(s, lookup))
	}
	for _, s := range in.c.Args {
		args = append(args, probe.Expand(s, lookup))
	}
	return envs, command, args, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var errNoConfigSource = errdefs.Wrap(errdefs.ErrNotFound, errors.New("no ConfigMap/Secret source on this node"))

func (in envInput) configMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	if in.src == nil {
		return nil, fmt.Errorf("configmap %q not found: %w", name, errNoConfigSource)
	}
	cm, err := in.src.ConfigMap(ctx, ns, name)
	if err != nil {
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	return cm, nil
}

func (in envInput) secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	if in.src == nil {
		return nil, fmt.Errorf("secret %q not found: %w", name, errNoConfigSource)
	}
	s, err := in.src.Secret(ctx, ns, name)
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return s, nil
}

// valueFrom resolves one env var reference; ok false skips the variable (an
// optional reference that is missing).
func (in envInput) valueFrom(ctx context.Context, vf *v1.EnvVarSource) (string, bool, error) {
	switch {
	case vf.FieldRef != nil:
		v, err := in.fieldRef(vf.FieldRef.FieldPath)
		return v, err == nil, err
	case vf.ResourceFieldRef != nil:
		v, err := resourceFieldRef(in.c, vf.ResourceFieldRef, in.allocatable)
		return v, err == nil, err
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := in.configMap(ctx, in.pod.Namespace, ref.Name)
		if err != nil {
			if optional && errdefs.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if b, bok := cm.BinaryData[ref.Key]; bok {
				return string(b), true, nil
			}
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, in.pod.Namespace, ref.Name)
		}
		return v, true, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := in.secret(ctx, in.pod.Namespace, ref.Name)
		if err != nil {
			if optional && errdefs.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, in.pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	}
	return "", false, errors.New("env var source has no reference")
}

// fieldRef is the downward API for env vars.
func (in envInput) fieldRef(path string) (string, error) {
	p := in.pod
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return in.hostIP, nil
	case "status.podIP", "status.podIPs":
		return in.podIP, nil
	}
	for _, m := range []struct {
		prefix string
		values map[string]string
	}{{"metadata.labels", p.Labels}, {"metadata.annotations", p.Annotations}} {
		if path == m.prefix {
			return formatMap(m.values), nil
		}
		if strings.HasPrefix(path, m.prefix+"['") && strings.HasSuffix(path, "']") {
			return m.values[path[len(m.prefix)+2:len(path)-2]], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// resourceFieldRef renders a container resource with its divisor, rounding
// up as upstream. An unset limit is the node's allocatable, as upstream
// (MergeContainerResourceLimits); without one known, the CPUs of this
// machine for cpu and 0 for the others.
func resourceFieldRef(c *v1.Container, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
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

// hostsFile is the managed /etc/hosts of a pod, as upstream writes it.
func hostsFile(pod *v1.Pod, podIP string) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	host := pod.Name
	if pod.Spec.Hostname != "" {
		host = pod.Spec.Hostname
	}
	if podIP != "" {
		if pod.Spec.Subdomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.cluster.local\t%s\n", podIP, host, pod.Spec.Subdomain, pod.Namespace, host)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", podIP, host)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, ha := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}

// writeHostsFile writes <PodsDir>/<uid>/etc-hosts atomically.
func writeHostsFile(podsDir string, pod *v1.Pod, podIP string) (string, error) {
	path := filepath.Join(podsDir, string(pod.UID), "etc-hosts")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := writeAtomic(path, hostsFile(pod, podIP)); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o644)
}
