package sim

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCDIDevices resolves a container's CDI devices against the spec dirs
// (JSON and YAML, a later dir's spec winning) and applies the spec's and
// the devices' edits: environment, mounts, device nodes as files. An
// unknown device fails the creation.
func TestCDIDevices(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	write := func(dir, name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(dir1, "claim.json", `{"cdiVersion":"0.5.0","kind":"k8s.gpu.nvidia.com/claim",
"containerEdits":{"env":["NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"],"deviceNodes":[{"path":"/dev/nvidiactl"}]},
"devices":[{"name":"u1-gpu-0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0","hostPath":"/x/nvidia0"}]}},
{"name":"u1-gpu-1","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia1"}]}}]}`)
	write(dir1, "other.yaml", "cdiVersion: 0.5.0\nkind: example.com/net\ndevices:\n- name: eth\n  containerEdits:\n    env: [NET=old]\n")
	write(dir2, "other.yaml", "cdiVersion: 0.5.0\nkind: example.com/net\ndevices:\n- name: eth\n  containerEdits:\n    env: [NET=new]\n    mounts:\n    - {hostPath: /h, containerPath: /c, options: [ro]}\n")
	write(dir2, "broken.json", "{")

	e := newEnv(t, Config{CDISpecDirs: []string{dir1, dir2}})
	sb, sbCfg := e.runPod(t, "cdi")
	cfg := ctrConfig("c", "sleep", "infinity")
	cfg.Envs = []*runtimeapi.KeyValue{{Key: "KEEP", Value: []byte("k")}}
	cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: "k8s.gpu.nvidia.com/claim=u1-gpu-0"}, {Name: "k8s.gpu.nvidia.com/claim=u1-gpu-1"}, {Name: "example.com/net=eth"}}
	id := e.create(t, sb, sbCfg, cfg)
	e.start(t, id)
	resp, err := e.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c",
		"echo $NVIDIA_VISIBLE_DEVICES $NET $KEEP; test -e /dev/nvidia0 && test -e /dev/nvidia1 && test -e /dev/nvidiactl && echo nodes"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.Stdout), "GPU-a,GPU-b new k\nnodes\n"; got != want {
		t.Errorf("stdout %q, want %q (stderr %q)", got, want, resp.Stderr)
	}
	st := e.status(t, id)
	if ms := st.GetMounts(); len(ms) != 1 || ms[0].GetContainerPath() != "/c" || !ms[0].GetReadonly() {
		t.Errorf("mounts %v, want /h on /c read-only", ms)
	}

	bad := ctrConfig("bad", "sleep", "infinity")
	bad.CDIDevices = []*runtimeapi.CDIDevice{{Name: "k8s.gpu.nvidia.com/claim=u2-gpu-0"}}
	_, err = e.rt.CreateContainer(ctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: bad, SandboxConfig: sbCfg})
	wantCode(t, err, codes.InvalidArgument)
}

func TestCDISpecDirsMustBeAbsolute(t *testing.T) {
	if err := (Config{CDISpecDirs: []string{"cdi"}}).Validate(); err == nil {
		t.Error("a relative CDI spec dir was accepted")
	}
}
