package pod

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
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
		v, err := podspec.FieldRef(in.pod, vf.FieldRef.FieldPath, in.podIP, in.hostIP)
		return v, err == nil, err
	case vf.ResourceFieldRef != nil:
		v, err := podspec.ResourceFieldRef(in.c, vf.ResourceFieldRef, in.allocatable)
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
