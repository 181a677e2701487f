package sim

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A file mount (the termination message file, a managed /etc/hosts) is the
// host file: the program's writes land in it and cat reads it.
func TestFileMounts(t *testing.T) {
	e := newEnv(t, Config{})
	dir := t.TempDir()
	term := filepath.Join(dir, "termination-log")
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(term, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n10.0.0.9 db.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, sbCfg := e.runPod(t, "mounts")
	cfg := ctrConfig("app", "sh", "-c", "echo done > /dev/termination-log; echo more >> /dev/termination-log; exit 2")
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: term}, {ContainerPath: "/etc/hosts", HostPath: hosts}}
	id := e.create(t, sb, sbCfg, cfg)
	e.start(t, id)
	st := e.waitState(t, id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.ExitCode != 2 {
		t.Fatalf("exit %d", st.ExitCode)
	}
	if b, _ := os.ReadFile(term); string(b) != "done\nmore\n" {
		t.Fatalf("termination file %q", b)
	}

	cfg2 := ctrConfig("reader", "sleep", "infinity")
	cfg2.Mounts = []*runtimeapi.Mount{{ContainerPath: "/etc/hosts", HostPath: hosts}}
	id2 := e.create(t, sb, sbCfg, cfg2)
	e.start(t, id2)
	resp, err := e.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id2, Cmd: []string{"sh", "-c", "test -f /etc/hosts && cat /etc/hosts"}, Timeout: 1})
	if err != nil || resp.ExitCode != 0 || string(resp.Stdout) != "127.0.0.1 localhost\n10.0.0.9 db.example\n" {
		t.Fatalf("cat /etc/hosts: %v %+v", err, resp)
	}
}

// TestStatusAnswersConfig checks that a container's status answers its
// config's metadata, mounts, labels and annotations as they came (over
// gRPC), whether the runtime keeps them compact and shared or as they are.
func TestStatusAnswersConfig(t *testing.T) {
	e := newEnv(t, Config{})
	sb, sbCfg := e.runPod(t, "status")
	tests := []struct {
		name   string
		mounts []*runtimeapi.Mount
		ann    map[string]string
		image  *runtimeapi.ImageSpec // shared or kept: shown for a removed image
	}{
		{"none", nil, nil, &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1"}},
		{"plain mounts", []*runtimeapi.Mount{
			{ContainerPath: "/dev/termination-log", HostPath: "/pods/u/containers/c/0"},
			{ContainerPath: "/data", HostPath: "/srv/data", Readonly: true, SelinuxRelabel: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		}, map[string]string{"io.kubernetes.container.hash": "1a2b", "io.kubernetes.container.restartCount": "0"}, &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1", UserSpecifiedImage: "busybox:1"}},
		{"same annotations again", nil, map[string]string{"io.kubernetes.container.hash": "1a2b", "io.kubernetes.container.restartCount": "0"}, &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1", UserSpecifiedImage: "busybox:1"}},
		{"mount with ID mappings", []*runtimeapi.Mount{
			{ContainerPath: "/a", HostPath: "/b"},
			{ContainerPath: "/c", HostPath: "/d", UidMappings: []*runtimeapi.IDMapping{{HostId: 1000, ContainerId: 0, Length: 1}}, RecursiveReadOnly: true, Readonly: true},
		}, map[string]string{"x": "y"}, &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1", Annotations: map[string]string{"a": "b"}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ctrConfig(fmt.Sprint("c", i))
			cfg.Mounts, cfg.Annotations, cfg.Image = tt.mounts, tt.ann, tt.image
			want := proto.Clone(cfg).(*runtimeapi.ContainerConfig)
			id := e.create(t, sb, sbCfg, cfg)
			resp, err := e.rt.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
			if err != nil {
				t.Fatal(err)
			}
			st := resp.GetStatus()
			got := &runtimeapi.ContainerConfig{Metadata: st.GetMetadata(), Labels: st.GetLabels(), Annotations: st.GetAnnotations(), Mounts: st.GetMounts()}
			want.Image = nil // the status names the image by its first tag
			if !proto.Equal(got, want) {
				t.Errorf("status answers\n%v\nwant\n%v", got, want)
			}
		})
	}
}
