package testenv

import "testing"

func TestContainerdEnvLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want ContainerdEnv
		ok   bool
	}{
		{"line 1, as containerd.sh printed before lines", "CONTAINER_RUNTIME_ENDPOINT=unix:///d/containerd.sock\nBUSYBOX_IMAGE=b:1\nPAUSE_IMAGE=p:1\n",
			ContainerdEnv{Endpoint: "unix:///d/containerd.sock", BusyboxImage: "b:1", PauseImage: "p:1", Line: 1}, true},
		{"line 2 with CDI", "CONTAINER_RUNTIME_ENDPOINT=unix:///d/containerd.sock\nBUSYBOX_IMAGE=b:1\nPAUSE_IMAGE=p:1\nCONTAINERD_LINE=2\nCDI_SPEC_DIR=/d/cdi\n",
			ContainerdEnv{Endpoint: "unix:///d/containerd.sock", BusyboxImage: "b:1", PauseImage: "p:1", Line: 2, CDISpecDir: "/d/cdi"}, true},
		{"no endpoint", "BUSYBOX_IMAGE=b:1\nCONTAINERD_LINE=2\n", ContainerdEnv{BusyboxImage: "b:1", Line: 2}, false},
	} {
		got, ok := containerdEnv(parseLines(tc.out))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %+v, %t; want %+v, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestContainerdLine(t *testing.T) {
	for env, want := range map[string]int{"": 1, "1": 1, "2": 2, "3": 1, "two": 1} {
		t.Setenv("ACTORLET_CONTAINERD_LINE", env)
		if got := ContainerdLine(); got != want {
			t.Errorf("ACTORLET_CONTAINERD_LINE=%q: line %d, want %d", env, got, want)
		}
	}
}
