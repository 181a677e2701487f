package pod

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/errdefs"
)

type fakeConfig struct {
	cms      map[string]*v1.ConfigMap
	secrets  map[string]*v1.Secret
	services []*v1.Service
	svcErr   error // services not read yet
}

func (f *fakeConfig) Services(context.Context) ([]*v1.Service, error) {
	return f.services, f.svcErr
}

var _ ConfigSource = (*fakeConfig)(nil)

func (f *fakeConfig) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := f.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("configmap %s/%s", ns, name))
}

func (f *fakeConfig) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("secret %s/%s", ns, name))
}

func TestMakeEnv(t *testing.T) {
	optional := true
	src := &fakeConfig{
		cms:     map[string]*v1.ConfigMap{"default/cfg": {Data: map[string]string{"MODE": "fast", "LEVEL": "3"}}},
		secrets: map[string]*v1.Secret{"default/sec": {Data: map[string][]byte{"token": []byte("s3cret")}}},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"}}
	c := &v1.Container{
		Name:    "app",
		Command: []string{"echo", "$(GREETING)", "$$(GREETING)"},
		Args:    []string{"$(POD_NAME)-$(MISSING)"},
		EnvFrom: []v1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		Env: []v1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "GREETING", Value: "hello $(POD_NAME) in $(CFG_MODE)"},
			{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "token"}}},
			{Name: "OPT", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: &optional}}},
			{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPU_M", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
		},
		Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		},
	}
	envs, cmd, args, err := makeEnv(context.Background(), envInput{pod: pod, c: c, podIP: "10.0.0.7", hostIP: "192.0.2.1", src: src})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	for _, kv := range envs {
		got[kv.Key] = string(kv.Value)
		order = append(order, kv.Key)
	}
	want := map[string]string{"CFG_LEVEL": "3", "CFG_MODE": "fast", "POD_NAME": "web", "GREETING": "hello web in fast",
		"APP": "web", "POD_IP": "10.0.0.7", "NODE": "n1", "TOKEN": "s3cret", "MEM_MI": "64", "CPU_M": "250"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["OPT"]; ok {
		t.Errorf("an optional missing reference must leave the variable unset")
	}
	if strings.Join(order[:2], ",") != "CFG_LEVEL,CFG_MODE" {
		t.Errorf("order %v: envFrom first", order)
	}
	if strings.Join(cmd, " ") != "echo hello web in fast $(GREETING)" || strings.Join(args, " ") != "web-$(MISSING)" {
		t.Errorf("command %q args %q", cmd, args)
	}
}

func TestMissingReferenceIsCreateContainerConfigError(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
		ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}, Key: "k"}}}}
	h := newHarnessWith(t, p, func(d *Deps) { d.ConfigSource = &fakeConfig{} })
	st := h.waitStatus("CreateContainerConfigError", func(s *v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == ReasonCreateContainerConfigError
	})
	if !strings.Contains(st.ContainerStatuses[0].State.Waiting.Message, `"missing"`) {
		t.Errorf("message %q", st.ContainerStatuses[0].State.Waiting.Message)
	}
	if h.rt.Count("CreateContainer") != 0 {
		t.Fatal("created a container whose config is incomplete")
	}
}
