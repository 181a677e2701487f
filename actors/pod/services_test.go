package pod

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/errdefs"
)

// TestMakeEnvServices: a container gets the variables of the master
// service always and of its namespace's services with enableServiceLinks
// (the default), its own env wins, and $(VAR) sees them, as upstream.
func TestMakeEnvServices(t *testing.T) {
	services := []*v1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
			Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "fooservice"},
			Spec: v1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []v1.ServicePort{{Port: 8765, Protocol: v1.ProtocolTCP}}}},
	}
	no := false
	tests := []struct {
		name     string
		links    *bool
		static   bool
		svcErr   error
		env      []v1.EnvVar
		want     map[string]string
		absent   []string
		wantArgs []string
		wantErr  bool
	}{
		{name: "links by default", want: map[string]string{
			"FOOSERVICE_SERVICE_HOST": "10.96.0.9", "FOOSERVICE_SERVICE_PORT": "8765", "FOOSERVICE_PORT": "tcp://10.96.0.9:8765",
			"FOOSERVICE_PORT_8765_TCP_PROTO": "tcp", "FOOSERVICE_PORT_8765_TCP_PORT": "8765", "FOOSERVICE_PORT_8765_TCP_ADDR": "10.96.0.9",
			"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		}, wantArgs: []string{"10.96.0.9:8765"}},
		{name: "links off: the master service only", links: &no,
			want:   map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
			absent: []string{"FOOSERVICE_SERVICE_HOST"}, wantArgs: []string{"$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)"}},
		{name: "the container's own variable wins", env: []v1.EnvVar{{Name: "FOOSERVICE_SERVICE_HOST", Value: "mine"}},
			want: map[string]string{"FOOSERVICE_SERVICE_HOST": "mine"}, wantArgs: []string{"mine:8765"}},
		{name: "services not read yet: an error", svcErr: errdefs.Wrap(errdefs.ErrUnavailable, errors.New("not synced")), wantErr: true},
		{name: "services not read yet: a static pod runs without them", static: true, svcErr: errdefs.Wrap(errdefs.ErrUnavailable, errors.New("not synced")),
			absent: []string{"KUBERNETES_SERVICE_HOST"}, wantArgs: []string{"$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"}, Spec: v1.PodSpec{EnableServiceLinks: tc.links}}
			if tc.static {
				pod.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
			}
			c := &v1.Container{Name: "c", Env: tc.env, Args: []string{"$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)"}}
			envs, _, args, err := makeEnv(context.Background(), envInput{pod: pod, c: c, src: &fakeConfig{services: services, svcErr: tc.svcErr}})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got := map[string]string{}
			for _, kv := range envs {
				got[kv.Key] = string(kv.Value)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s=%q, want %q", k, got[k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s set, want absent", k)
				}
			}
			if len(args) != 1 || args[0] != tc.wantArgs[0] {
				t.Errorf("args %q, want %q", args, tc.wantArgs)
			}
		})
	}
}

// TestMakeEnvStandaloneHasNoServiceVariables: without an API server
// (no source) there are no service variables, as upstream.
func TestMakeEnvStandaloneHasNoServiceVariables(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"}}
	envs, _, _, err := makeEnv(context.Background(), envInput{pod: pod, c: &v1.Container{Name: "c"}})
	if err != nil || len(envs) != 0 {
		t.Fatalf("envs %v err %v, want none", envs, err)
	}
}
