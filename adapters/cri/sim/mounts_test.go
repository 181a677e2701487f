package sim

import (
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
