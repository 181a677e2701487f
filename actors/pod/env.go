package pod

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// ConfigSource gives the ConfigMaps and Secrets that env and envFrom refer
// to, and the services whose variables every container gets (cluster
// mode). A missing object is an error of class errdefs.ErrNotFound;
// Services fails (errdefs.ErrUnavailable) until the services were read
// once.
type ConfigSource interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	Services(ctx context.Context) ([]*v1.Service, error)
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
	// allocatable stands in for unset limits (podspec.ResourceFieldRef).
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
	services, err := in.serviceEnv(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	lookup := func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		v, ok := services[k]
		return v, ok
	}
	for _, ef := range in.c.EnvFrom {
		data, err := in.envFrom(ctx, ef)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			set(ef.Prefix+k, data[k])
		}
	}
	for _, e := range in.c.Env {
		if e.ValueFrom == nil {
			set(e.Name, podspec.Expand(e.Value, lookup))
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
	// The services' variables where the container does not set its own.
	for _, k := range slices.Sorted(maps.Keys(services)) {
		if _, ok := vars[k]; !ok {
			set(k, services[k])
		}
	}
	for _, k := range order {
		envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(vars[k])})
	}
	for _, s := range in.c.Command {
		command = append(command, podspec.Expand(s, lookup))
	}
	for _, s := range in.c.Args {
		args = append(args, podspec.Expand(s, lookup))
	}
	return envs, command, args, nil
}

// serviceEnv is the services' variables for the container, as upstream's
// getServiceEnvVarMap: none without an API server; the services must have
// been read once, except for a static pod (it may run before the API
// server answers).
func (in envInput) serviceEnv(ctx context.Context) (map[string]string, error) {
	if in.src == nil {
		return nil, nil
	}
	services, err := in.src.Services(ctx)
	if err != nil {
		if podspec.IsStaticPod(in.pod) {
			return nil, nil
		}
		return nil, fmt.Errorf("services have not yet been read at least once, cannot construct envvars: %w", err)
	}
	links := in.pod.Spec.EnableServiceLinks == nil || *in.pod.Spec.EnableServiceLinks
	return podspec.ServiceEnv(services, in.pod.Namespace, links), nil
}

var errNoConfigSource = errdefs.Wrap(errdefs.ErrNotFound, errors.New("no ConfigMap/Secret source on this node"))

// readObject reads object name (kind: configmap or secret) of the pod's
// namespace with get; ok false: it could not be read, or it is missing and
// optional (then err is nil: the reference is skipped).
func readObject[T any](ctx context.Context, in envInput, kind, name string, optional *bool, get func(ConfigSource, context.Context, string, string) (T, error)) (obj T, ok bool, err error) {
	if in.src == nil {
		err = fmt.Errorf("%s %q not found: %w", kind, name, errNoConfigSource)
	} else if obj, err = get(in.src, ctx, in.pod.Namespace, name); err != nil {
		err = fmt.Errorf("%s %q: %w", kind, name, err)
	}
	if err != nil && optional != nil && *optional && errdefs.IsNotFound(err) {
		return obj, false, nil
	}
	return obj, err == nil, err
}

// envFrom reads the data of ef's ConfigMap or Secret as strings (none where
// it is missing and optional).
func (in envInput) envFrom(ctx context.Context, ef v1.EnvFromSource) (map[string]string, error) {
	data := map[string]string{}
	switch {
	case ef.ConfigMapRef != nil:
		cm, ok, err := readObject(ctx, in, "configmap", ef.ConfigMapRef.Name, ef.ConfigMapRef.Optional, ConfigSource.ConfigMap)
		if ok {
			data = cm.Data
		}
		return data, err
	case ef.SecretRef != nil:
		s, ok, err := readObject(ctx, in, "secret", ef.SecretRef.Name, ef.SecretRef.Optional, ConfigSource.Secret)
		if ok {
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		return data, err
	}
	return data, nil
}

// keyRef resolves key of the object that get reads (kind: ConfigMap or
// Secret), as value finds it there; ok false skips the variable (an optional
// object or key that is missing).
func keyRef[T any](ctx context.Context, in envInput, kind, name, key string, optional *bool,
	get func(ConfigSource, context.Context, string, string) (T, error), value func(T, string) (string, bool)) (string, bool, error) {
	obj, ok, err := readObject(ctx, in, strings.ToLower(kind), name, optional, get)
	if !ok {
		return "", false, err
	}
	if v, found := value(obj, key); found {
		return v, true, nil
	}
	if optional != nil && *optional {
		return "", false, nil
	}
	return "", false, fmt.Errorf("couldn't find key %s in %s %s/%s", key, kind, in.pod.Namespace, name)
}

// configMapKey is key of a ConfigMap's data, or else of its binaryData.
func configMapKey(cm *v1.ConfigMap, key string) (string, bool) {
	if v, ok := cm.Data[key]; ok {
		return v, true
	}
	b, ok := cm.BinaryData[key]
	return string(b), ok
}

func secretKey(s *v1.Secret, key string) (string, bool) {
	v, ok := s.Data[key]
	return string(v), ok
}

// valueFrom resolves one env var reference; ok false skips the variable (an
// optional reference that is missing).
func (in envInput) valueFrom(ctx context.Context, vf *v1.EnvVarSource) (string, bool, error) {
	switch {
	case vf.FieldRef != nil:
		v, err := podspec.FieldRef(in.pod, vf.FieldRef.FieldPath, in.podIP, in.hostIP)
		return v, err == nil, err
	case vf.ResourceFieldRef != nil:
		v, err := podspec.ResourceFieldRef(in.c, vf.ResourceFieldRef, podspec.DownwardAllocatable(in.pod, in.allocatable))
		return v, err == nil, err
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		return keyRef(ctx, in, "ConfigMap", ref.Name, ref.Key, ref.Optional, ConfigSource.ConfigMap, configMapKey)
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		return keyRef(ctx, in, "Secret", ref.Name, ref.Key, ref.Optional, ConfigSource.Secret, secretKey)
	}
	return "", false, errors.New("env var source has no reference")
}
