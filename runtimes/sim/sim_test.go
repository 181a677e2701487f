package sim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/actortest"
)

// testIPBase keeps this package's listeners away from other packages' sim
// runtimes when `go test ./...` runs packages in parallel.
const testIPBase = "127.77.0.1"

type env struct {
	r   *Runtime
	rt  runtimeapi.RuntimeServiceClient
	img runtimeapi.ImageServiceClient
	dir string
}

// newEnv serves a runtime of cfg on a real socket. Its cached lists are
// checked against the state whenever one is served (Runtime.checkLists),
// so that every test over gRPC also tests that each change invalidates
// them.
func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	if cfg.IPBase == "" {
		cfg.IPBase = testIPBase
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "sim.sock")
	l, err := Listen("unix://" + sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	r := New(cfg)
	r.checkLists = true
	served := make(chan struct{})
	go func() { _ = r.Serve(l); close(served) }()
	conn, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		r.Close()
		<-served
	})
	return &env{r: r, rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn), dir: dir}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func sandboxConfig(name string, hostNetwork bool, labels map[string]string) *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Labels:   labels,
	}
	if hostNetwork {
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
	}
	return cfg
}

func (e *env) runPod(t testing.TB, name string) (string, *runtimeapi.PodSandboxConfig) {
	t.Helper()
	cfg := sandboxConfig(name, false, map[string]string{"app": name})
	resp, err := e.rt.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.PodSandboxId, cfg
}

func (e *env) pull(t *testing.T, ref string) string {
	t.Helper()
	resp, err := e.img.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v", ref, err)
	}
	return resp.ImageRef
}

func ctrConfig(name string, cmd ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1"},
		Command:  cmd,
		Labels:   map[string]string{"ctr": name},
	}
}

func (e *env) create(t testing.TB, sb string, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	resp, err := e.rt.CreateContainer(ctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	return resp.ContainerId
}

func (e *env) start(t testing.TB, id string) {
	t.Helper()
	if _, err := e.rt.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
}

// run creates and starts a container with cmd in a fresh sandbox.
func (e *env) run(t *testing.T, pod string, cmd ...string) (sb, id string) {
	t.Helper()
	sb, sbCfg := e.runPod(t, pod)
	id = e.create(t, sb, sbCfg, ctrConfig("c", cmd...))
	e.start(t, id)
	return sb, id
}

func (e *env) status(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := e.rt.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status
}

// podIP is the IP of sandbox id.
func (e *env) podIP(t *testing.T, id string) string {
	t.Helper()
	ss, err := e.rt.PodSandboxStatus(ctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatal(err)
	}
	return ss.Status.Network.GetIp()
}

// eventually waits until cond holds (actortest.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	actortest.Eventually(t, what, cond)
}

func (e *env) waitState(t *testing.T, id string, want runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	t.Helper()
	var st *runtimeapi.ContainerStatus
	eventually(t, fmt.Sprintf("container %s in %s", id[:8], want), func() bool {
		st = e.status(t, id)
		return st.State == want
	})
	return st
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got error %v, want code %s", err, code)
	}
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	sb, sbCfg := e.runPod(t, "web")
	ss, err := e.rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	if ss.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || ss.Status.Network.GetIp() != testIPBase {
		t.Fatalf("sandbox status = %v ip %q", ss.Status.State, ss.Status.Network.GetIp())
	}
	if ss.Status.Labels["app"] != "web" || ss.Status.CreatedAt == 0 {
		t.Fatalf("labels/createdAt not kept: %v", ss.Status)
	}
	cfg := ctrConfig("app", "sleep", "infinity")
	cfg.Annotations = map[string]string{"a": "b"}
	id := e.create(t, sb, sbCfg, cfg)
	if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED || st.Annotations["a"] != "b" || st.Labels["ctr"] != "app" {
		t.Fatalf("after create: %v", st)
	}
	e.start(t, id)
	st := e.status(t, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.StartedAt < st.CreatedAt {
		t.Fatalf("after start: %v", st)
	}
	if !strings.HasPrefix(st.Image.GetImage(), "docker.io/sim/preloaded/busybox:1") || !strings.Contains(st.ImageRef, "@sha256:") {
		t.Fatalf("image fields: %q %q", st.Image.GetImage(), st.ImageRef)
	}
	_, err = e.rt.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: id})
	if code := status.Code(err); code != codes.FailedPrecondition {
		t.Fatalf("second start: %v", err)
	}
	for range 2 { // stopping twice is fine
		if _, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10}); err != nil {
			t.Fatalf("StopContainer: %v", err)
		}
	}
	st = e.status(t, id)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 || st.FinishedAt < st.StartedAt || st.Reason != "Error" {
		t.Fatalf("after stop: %v", st)
	}
	for range 2 {
		if _, err := e.rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
			t.Fatalf("StopPodSandbox: %v", err)
		}
	}
	ss, _ = e.rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if ss.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandbox after stop: %v", ss.Status.State)
	}
	_, err = e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("late")})
	if err == nil {
		t.Fatal("CreateContainer in a stopped sandbox succeeded")
	}
	for range 2 {
		if _, err := e.rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
			t.Fatalf("RemovePodSandbox: %v", err)
		}
	}
	_, err = e.rt.ContainerStatus(c, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound)
	_, err = e.rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	wantCode(t, err, codes.NotFound)
	_, err = e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound)
	_, err = e.rt.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound)

	v, err := e.rt.Version(c, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "actorlet-sim" || v.RuntimeApiVersion != "v1" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	s, err := e.rt.Status(c, &runtimeapi.StatusRequest{})
	if err != nil || len(s.Status.Conditions) != 2 || !s.Status.Conditions[0].Status || !s.Status.Conditions[1].Status {
		t.Fatalf("Status = %v, %v", s, err)
	}
	rc, err := e.rt.RuntimeConfig(c, &runtimeapi.RuntimeConfigRequest{})
	if err != nil || rc.Linux.CgroupDriver != runtimeapi.CgroupDriver_CGROUPFS {
		t.Fatalf("RuntimeConfig = %v, %v", rc, err)
	}
}

func TestNameReservation(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	sb, sbCfg := e.runPod(t, "res")
	first := e.create(t, sb, sbCfg, ctrConfig("app"))
	tests := []struct {
		name    string
		call    func() error
		wantErr codes.Code
		wantID  string
	}{
		{"same container name and attempt", func() error {
			_, err := e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("app")})
			return err
		}, codes.AlreadyExists, first},
		{"same container name, next attempt", func() error {
			cfg := ctrConfig("app")
			cfg.Metadata.Attempt = 1
			_, err := e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg})
			return err
		}, codes.OK, ""},
		{"same sandbox metadata", func() error {
			_, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("res", false, nil)})
			return err
		}, codes.AlreadyExists, sb},
		{"sandbox next attempt", func() error {
			cfg := sandboxConfig("res", false, nil)
			cfg.Metadata.Attempt = 1
			_, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			return err
		}, codes.OK, ""},
		{"container name free after removal", func() error {
			if _, err := e.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: first}); err != nil {
				return err
			}
			_, err := e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("app")})
			return err
		}, codes.OK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			wantCode(t, err, tt.wantErr)
			if tt.wantID != "" && !strings.Contains(err.Error(), "is reserved for \""+tt.wantID+"\"") {
				t.Fatalf("error %q does not name %s", err, tt.wantID)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	sb1, cfg1 := e.runPod(t, "one")
	sb2, cfg2 := e.runPod(t, "two")
	a := e.create(t, sb1, cfg1, ctrConfig("a", "sleep", "infinity"))
	b := e.create(t, sb1, cfg1, ctrConfig("b"))
	d := e.create(t, sb2, cfg2, ctrConfig("d", "sleep", "infinity"))
	e.start(t, a)
	e.start(t, d)
	if _, err := e.rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb2}); err != nil {
		t.Fatal(err)
	}
	running := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	ctrTests := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"no filter", nil, []string{a, b, d}},
		{"by id", &runtimeapi.ContainerFilter{Id: b}, []string{b}},
		{"by id prefix", &runtimeapi.ContainerFilter{Id: d[:12]}, []string{d}},
		{"unknown id", &runtimeapi.ContainerFilter{Id: "zzz"}, nil},
		{"by state", &runtimeapi.ContainerFilter{State: running}, []string{a}},
		{"by sandbox", &runtimeapi.ContainerFilter{PodSandboxId: sb2}, []string{d}},
		{"by label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"ctr": "b"}}, []string{b}},
		{"id and other sandbox", &runtimeapi.ContainerFilter{Id: a, PodSandboxId: sb2}, nil},
		{"sandbox and state", &runtimeapi.ContainerFilter{PodSandboxId: sb1, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_CREATED}}, []string{b}},
	}
	for _, tt := range ctrTests {
		t.Run("containers "+tt.name, func(t *testing.T) {
			resp, err := e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: tt.filter})
			if got := ids(t, resp.GetContainers(), err); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	sbTests := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"no filter", nil, []string{sb1, sb2}},
		{"by id", &runtimeapi.PodSandboxFilter{Id: sb2}, []string{sb2}},
		{"ready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, []string{sb1}},
		{"not ready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, []string{sb2}},
		{"by label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "one"}}, []string{sb1}},
		{"label mismatch", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "three"}}, nil},
	}
	for _, tt := range sbTests {
		t.Run("sandboxes "+tt.name, func(t *testing.T) {
			resp, err := e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: tt.filter})
			if got := ids(t, resp.GetItems(), err); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestEnv checks the variables a shell sees: the config's envs, and
// HOSTNAME the sandbox's hostname unless the envs set it.
func TestEnv(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	tests := []struct {
		name     string
		hostname string
		envs     []*runtimeapi.KeyValue
		want     string
	}{
		{"hostname", "web-0", nil, "web-0/\n"},
		{"no hostname", "", nil, "/\n"},
		{"envs set HOSTNAME", "web-0", []*runtimeapi.KeyValue{{Key: "HOSTNAME", Value: []byte("mine")}, {Key: "X", Value: []byte("x")}}, "mine/x\n"},
		{"envs without HOSTNAME", "web-0", []*runtimeapi.KeyValue{{Key: "X", Value: []byte("x")}}, "web-0/x\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sbCfg := sandboxConfig(fmt.Sprint("env", i), false, nil)
			sbCfg.Hostname = tt.hostname
			sb, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
			if err != nil {
				t.Fatal(err)
			}
			cfg := ctrConfig("c", "sleep", "infinity")
			cfg.Envs = tt.envs
			id := e.create(t, sb.PodSandboxId, sbCfg, cfg)
			e.start(t, id)
			resp, err := e.rt.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "echo ${HOSTNAME}/${X}"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(resp.Stdout); got != tt.want {
				t.Errorf("stdout %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPodUIDSelector lists by the indexed pod UID label, alone and with
// other labels, with several sandboxes and containers under one UID and
// after removals (the index must forget them).
func TestPodUIDSelector(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	pod := func(name, uid string, attempt uint32) (string, *runtimeapi.PodSandboxConfig) {
		cfg := sandboxConfig(name, false, map[string]string{indexedLabel: uid, "app": name})
		cfg.Metadata.Attempt = attempt
		resp, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return resp.PodSandboxId, cfg
	}
	ctr := func(sb string, sbCfg *runtimeapi.PodSandboxConfig, name, uid string) string {
		cfg := ctrConfig(name)
		cfg.Labels[indexedLabel] = uid
		return e.create(t, sb, sbCfg, cfg)
	}
	sb1, cfg1 := pod("p", "u1", 0)
	sb2, cfg2 := pod("p", "u1", 1) // a second attempt of the same pod
	sb3, cfg3 := pod("q", "u2", 0)
	a := ctr(sb1, cfg1, "a", "u1")
	b := ctr(sb2, cfg2, "b", "u1")
	ctr(sb3, cfg3, "d", "u2") // removed with its sandbox below
	x := ctr(sb2, cfg2, "x", "u1")
	if _, err := e.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: x}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb3}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		sel     map[string]string
		wantSbs []string
		wantCtr []string
	}{
		{"uid", map[string]string{indexedLabel: "u1"}, []string{sb1, sb2}, []string{a, b}},
		{"uid and label", map[string]string{indexedLabel: "u1", "ctr": "b"}, nil, []string{b}},
		{"uid and sandbox label", map[string]string{indexedLabel: "u1", "app": "p"}, []string{sb1, sb2}, nil},
		{"uid of removed pod", map[string]string{indexedLabel: "u2"}, nil, nil},
		{"unknown uid", map[string]string{indexedLabel: "u9"}, nil, nil},
		{"other label only", map[string]string{"ctr": "a"}, nil, []string{a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sbs, err := e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: tt.sel}})
			if got := ids(t, sbs.GetItems(), err); fmt.Sprint(got) != fmt.Sprint(tt.wantSbs) {
				t.Errorf("sandboxes: got %v, want %v", got, tt.wantSbs)
			}
			cs, err := e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: tt.sel}})
			if got := ids(t, cs.GetContainers(), err); fmt.Sprint(got) != fmt.Sprint(tt.wantCtr) {
				t.Errorf("containers: got %v, want %v", got, tt.wantCtr)
			}
			st, err := e.rt.ListPodSandboxStats(c, &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{LabelSelector: tt.sel}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range st.GetStats() {
				got = append(got, s.GetAttributes().GetId())
			}
			sort.Slice(got, func(i, j int) bool { return slices.Index(tt.wantSbs, got[i]) < slices.Index(tt.wantSbs, got[j]) })
			if fmt.Sprint(got) != fmt.Sprint(tt.wantSbs) {
				t.Errorf("sandbox stats: got %v, want %v", got, tt.wantSbs)
			}
		})
	}
}

// ids fails t on a list error, else returns the IDs of what was listed, in
// order.
func ids[T interface{ GetId() string }](t *testing.T, listed []T, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range listed {
		out = append(out, x.GetId())
	}
	return out
}

func TestPrograms(t *testing.T) {
	e := newEnv(t, Config{})
	tests := []struct {
		name       string
		cmd        []string
		wantState  runtimeapi.ContainerState
		wantCode   int32
		wantReason string
	}{
		{"exit 3", []string{"/bin/sh", "-c", "exit 3"}, runtimeapi.ContainerState_CONTAINER_EXITED, 3, "Error"},
		{"bare exit", []string{"exit", "7"}, runtimeapi.ContainerState_CONTAINER_EXITED, 7, "Error"},
		{"sleep 0.1", []string{"/bin/sleep", "0.1"}, runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"},
		{"true", []string{"true"}, runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"},
		{"false", []string{"false"}, runtimeapi.ContainerState_CONTAINER_EXITED, 1, "Error"},
		{"and chain", []string{"sh", "-c", "true && exit 4"}, runtimeapi.ContainerState_CONTAINER_EXITED, 4, "Error"},
		{"or chain", []string{"sh", "-c", "false || exit 5"}, runtimeapi.ContainerState_CONTAINER_EXITED, 5, "Error"},
		{"skipped and", []string{"sh", "-c", "false && exit 6"}, runtimeapi.ContainerState_CONTAINER_EXITED, 1, "Error"},
		{"exit stops script", []string{"sh", "-c", "exit 3; exit 4"}, runtimeapi.ContainerState_CONTAINER_EXITED, 3, "Error"},
		{"exec sleep", []string{"sh", "-c", "echo hi; exec sleep 0.05"}, runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"},
		{"sleep then exit", []string{"sh", "-c", "sleep 0.05; exit 9"}, runtimeapi.ContainerState_CONTAINER_EXITED, 9, "Error"},
		{"nested shell", []string{"sh", "-c", "sh -c 'exit 2'; exit $?"}, runtimeapi.ContainerState_CONTAINER_EXITED, 2, "Error"},
		{"files", []string{"sh", "-c", "touch /tmp/a && [ -f /tmp/a ] && rm /tmp/a && test ! -e /tmp/a"}, runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"},
		{"command and args", []string{"sh", "-c", "exit 11"}, runtimeapi.ContainerState_CONTAINER_EXITED, 11, "Error"},
		{"sleep infinity", []string{"sleep", "infinity"}, runtimeapi.ContainerState_CONTAINER_RUNNING, 0, ""},
		{"no command", nil, runtimeapi.ContainerState_CONTAINER_RUNNING, 0, ""},
		{"unknown program", []string{"/usr/bin/nginx", "-g", "daemon off;"}, runtimeapi.ContainerState_CONTAINER_RUNNING, 0, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, id := e.run(t, fmt.Sprintf("p%d", i), tt.cmd...)
			st := e.waitState(t, id, tt.wantState)
			if st.ExitCode != tt.wantCode || st.Reason != tt.wantReason {
				t.Fatalf("exit %d reason %q, want %d %q", st.ExitCode, st.Reason, tt.wantCode, tt.wantReason)
			}
			if tt.wantState == runtimeapi.ContainerState_CONTAINER_EXITED && st.FinishedAt < st.StartedAt {
				t.Fatalf("finishedAt %d before startedAt %d", st.FinishedAt, st.StartedAt)
			}
		})
	}
}

func TestArgsAppendedToCommand(t *testing.T) {
	e := newEnv(t, Config{})
	sb, sbCfg := e.runPod(t, "args")
	cfg := ctrConfig("c", "/bin/sh", "-c")
	cfg.Args = []string{"exit 12"}
	id := e.create(t, sb, sbCfg, cfg)
	e.start(t, id)
	if st := e.waitState(t, id, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 12 {
		t.Fatalf("exit %d, want 12", st.ExitCode)
	}
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func TestListeners(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := fmt.Sprint(free.Addr().(*net.TCPAddr).Port)
	_ = free.Close()
	tests := []struct {
		name        string
		hostNetwork bool
		cmd         []string
		port        string
		http        bool
	}{
		{"httpd", false, []string{"httpd", "-f", "-p", "8080", "-h", "/www"}, "8080", true},
		{"httpd in sh", false, []string{"sh", "-c", "echo start; exec httpd -f -p 0.0.0.0:8081"}, "8081", true},
		{"nc -lk -p", false, []string{"nc", "-lk", "-p", "9000"}, "9000", false},
		{"nc -l -p", false, []string{"/usr/bin/nc", "-l", "-p", "9001"}, "9001", false},
		{"host network httpd", true, []string{"httpd", "-p", hostPort}, hostPort, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := sandboxConfig(fmt.Sprintf("l%d", i), tt.hostNetwork, nil)
			resp, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			ss, err := e.rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: resp.PodSandboxId})
			if err != nil {
				t.Fatal(err)
			}
			ip := ss.Status.Network.GetIp()
			if tt.hostNetwork {
				if ip != "" {
					t.Fatalf("host network sandbox has IP %q", ip)
				}
				if ss.Status.Linux.GetNamespaces().GetOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
					t.Fatal("namespace options not reported")
				}
				ip = "127.0.0.1"
			} else if !strings.HasPrefix(ip, "127.") {
				t.Fatalf("sandbox IP %q not in 127.0.0.0/8", ip)
			}
			id := e.create(t, resp.PodSandboxId, cfg, ctrConfig("srv", tt.cmd...))
			e.start(t, id)
			addr := net.JoinHostPort(ip, tt.port)
			if tt.http {
				hr, err := http.Get("http://" + addr + "/healthz")
				if err != nil {
					t.Fatalf("GET: %v", err)
				}
				body, _ := io.ReadAll(hr.Body)
				_ = hr.Body.Close()
				if hr.StatusCode != 200 || string(body) != "ok\n" {
					t.Fatalf("GET = %d %q", hr.StatusCode, body)
				}
			} else if !dialable(addr) {
				t.Fatalf("cannot dial %s", addr)
			}
			if _, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
				t.Fatal(err)
			}
			if dialable(addr) {
				t.Fatalf("%s still accepts after stop", addr)
			}
		})
	}
}

func TestListenerPortInUse(t *testing.T) {
	e := newEnv(t, Config{})
	sb, sbCfg := e.runPod(t, "busy")
	a := e.create(t, sb, sbCfg, ctrConfig("a", "nc", "-lk", "-p", "7000"))
	b := e.create(t, sb, sbCfg, ctrConfig("b", "nc", "-lk", "-p", "7000"))
	e.start(t, a)
	e.start(t, b)
	if st := e.waitState(t, b, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 1 {
		t.Fatalf("second listener exit %d, want 1", st.ExitCode)
	}
}

func TestExecSync(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	_, id := e.run(t, "exec", "sleep", "infinity")
	_, done := e.run(t, "done", "true")
	e.waitState(t, done, runtimeapi.ContainerState_CONTAINER_EXITED)
	tests := []struct {
		name       string
		id         string
		cmd        []string
		timeout    int64
		wantErr    codes.Code
		wantExit   int32
		wantStdout string
		wantStderr string
	}{
		{"test before touch", id, []string{"test", "-f", "/tmp/x"}, 1, codes.OK, 1, "", ""},
		{"touch", id, []string{"/bin/touch", "/tmp/x"}, 1, codes.OK, 0, "", ""},
		{"test after touch", id, []string{"test", "-f", "/tmp/x"}, 1, codes.OK, 0, "", ""},
		{"bracket test", id, []string{"sh", "-c", "[ -f /tmp/x ] && echo yes"}, 1, codes.OK, 0, "yes\n", ""},
		{"echo", id, []string{"echo", "hello", "world"}, 0, codes.OK, 0, "hello world\n", ""},
		{"redirect and cat", id, []string{"sh", "-c", "echo ready > /tmp/r; cat /tmp/r"}, 1, codes.OK, 0, "ready\n", ""},
		{"cat missing", id, []string{"cat", "/nope"}, 1, codes.OK, 1, "", "cat: can't open '/nope': No such file or directory\n"},
		{"env and exit status", id, []string{"sh", "-c", "false; echo \"code=$?\""}, 1, codes.OK, 0, "code=1\n", ""},
		{"rm -f", id, []string{"sh", "-c", "rm -f /tmp/x /tmp/none && test ! -f /tmp/x"}, 1, codes.OK, 0, "", ""},
		{"probe appends", id, []string{"sh", "-c", "echo x >> /tmp/probes"}, 1, codes.OK, 0, "", ""},
		{"probe appends again", id, []string{"sh", "-c", "echo x >> /tmp/probes"}, 1, codes.OK, 0, "", ""},
		{"probe count", id, []string{"cat", "/tmp/probes"}, 10, codes.OK, 0, "x\nx\n", ""},
		{"short sleep", id, []string{"sleep", "0.01"}, 1, codes.OK, 0, "", ""},
		{"output after a sleep", id, []string{"sh", "-c", "sleep 0.01; echo late"}, 1, codes.OK, 0, "late\n", ""},
		{"timeout", id, []string{"sleep", "5"}, 1, codes.DeadlineExceeded, 0, "", ""},
		{"not running", done, []string{"true"}, 1, codes.FailedPrecondition, 0, "", ""},
		{"unknown container", "nope", []string{"true"}, 1, codes.NotFound, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			resp, err := e.rt.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: tt.id, Cmd: tt.cmd, Timeout: tt.timeout})
			wantCode(t, err, tt.wantErr)
			if tt.wantErr == codes.DeadlineExceeded && time.Since(start) > 4*time.Second {
				t.Fatalf("timeout took %v", time.Since(start))
			}
			if err != nil {
				return
			}
			if resp.ExitCode != tt.wantExit || string(resp.Stdout) != tt.wantStdout || string(resp.Stderr) != tt.wantStderr {
				t.Fatalf("exec = %d %q %q, want %d %q %q", resp.ExitCode, resp.Stdout, resp.Stderr, tt.wantExit, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		call     string
		wantFail bool
	}{
		{"rate 1 fails RunPodSandbox", Config{FaultRate: 1}, "RunPodSandbox", true},
		{"rate 1 fails PullImage", Config{FaultRate: 1}, "PullImage", true},
		{"rate 1 spares Version", Config{FaultRate: 1}, "Version", false},
		{"rate 1 spares Status", Config{FaultRate: 1}, "Status", false},
		{"rate 0 never fails", Config{FaultRate: 0}, "RunPodSandbox", false},
		{"selected method fails", Config{FaultRate: 1, FaultMethods: []string{"PullImage"}}, "PullImage", true},
		{"unselected method passes", Config{FaultRate: 1, FaultMethods: []string{"PullImage"}}, "RunPodSandbox", false},
		{"selected Version fails", Config{FaultRate: 1, FaultMethods: []string{"Version"}}, "Version", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			c := ctx(t)
			for i := range 100 {
				var err error
				switch tt.call {
				case "RunPodSandbox":
					_, err = e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(fmt.Sprint("f", i), false, nil)})
				case "PullImage":
					_, err = e.img.PullImage(c, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox"}})
				case "Version":
					_, err = e.rt.Version(c, &runtimeapi.VersionRequest{})
				case "Status":
					_, err = e.rt.Status(c, &runtimeapi.StatusRequest{})
				}
				if tt.wantFail {
					wantCode(t, err, codes.Unavailable)
					if !strings.Contains(err.Error(), "sim: injected fault") {
						t.Fatalf("fault message %q", err)
					}
				} else if err != nil {
					t.Fatalf("call %d failed: %v", i, err)
				}
			}
			if tt.wantFail && tt.call == "RunPodSandbox" {
				resp, _ := e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
				if resp != nil && len(resp.Items) > 0 {
					t.Fatal("a failed call had an effect")
				}
			}
		})
	}
}

func TestFaultRateIsPartial(t *testing.T) {
	e := newEnv(t, Config{FaultRate: 0.5, Seed: 42, FaultMethods: []string{"Version"}})
	failed := 0
	for range 400 {
		if _, err := e.rt.Version(ctx(t), &runtimeapi.VersionRequest{}); err != nil {
			failed++
		}
	}
	if failed < 100 || failed > 300 {
		t.Fatalf("%d of 400 failed at rate 0.5", failed)
	}
}

func TestContainerEvents(t *testing.T) {
	e := newEnv(t, Config{})
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	stream, err := e.rt.GetContainerEvents(c, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil { // the subscription is in place
		t.Fatal(err)
	}
	sb, sbCfg := e.runPod(t, "ev")
	id := e.create(t, sb, sbCfg, ctrConfig("c", "sleep", "infinity"))
	e.start(t, id)
	if _, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id  string
		typ runtimeapi.ContainerEventType
	}{
		{sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT},
	}
	for i, w := range want {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.ContainerId != w.id || ev.ContainerEventType != w.typ || ev.CreatedAt == 0 {
			t.Fatalf("event %d = %s %s, want %s %s", i, ev.ContainerId[:8], ev.ContainerEventType, w.id[:8], w.typ)
		}
		if ev.PodSandboxStatus.GetId() != sb {
			t.Fatalf("event %d without sandbox status", i)
		}
		if w.id == id && w.typ == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT &&
			(len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].ExitCode != 137) {
			t.Fatalf("stopped event statuses = %v", ev.ContainersStatuses)
		}
	}
}

func TestImages(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	statusOf := func(ref string) *runtimeapi.Image {
		resp, err := e.img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			t.Fatalf("ImageStatus %s: %v", ref, err)
		}
		return resp.Image
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"absent image has nil status", func(t *testing.T) {
			if img := statusOf("nginx:1.27"); img != nil {
				t.Fatalf("got %v", img)
			}
		}},
		{"pull records the image under normalized names", func(t *testing.T) {
			id := e.pull(t, "busybox:1.36")
			if !strings.HasPrefix(id, "sha256:") || len(id) != 71 {
				t.Fatalf("image ref %q", id)
			}
			for _, ref := range []string{"busybox:1.36", "docker.io/library/busybox:1.36", id, strings.TrimPrefix(id, "sha256:")} {
				img := statusOf(ref)
				if img == nil || img.Id != id {
					t.Fatalf("status of %s = %v", ref, img)
				}
			}
			if img := statusOf(id); img.RepoTags[0] != "docker.io/library/busybox:1.36" || img.Size == 0 {
				t.Fatalf("image = %v", img)
			}
			if again := e.pull(t, "docker.io/library/busybox:1.36"); again != id {
				t.Fatalf("id not stable: %s vs %s", again, id)
			}
		}},
		{"digest reference", func(t *testing.T) {
			ref := "registry.example:5000/team/app@sha256:" + strings.Repeat("ab", 32)
			id := e.pull(t, ref)
			if img := statusOf(ref); img == nil || img.Id != id || img.RepoDigests[0] != ref {
				t.Fatalf("status = %v", img)
			}
		}},
		{".invalid registry fails", func(t *testing.T) {
			_, err := e.img.PullImage(c, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "registry.invalid/app:1"}})
			wantCode(t, err, codes.NotFound)
			if !strings.Contains(err.Error(), "pull access denied") || !strings.Contains(err.Error(), "not found") {
				t.Fatalf("message %q", err)
			}
			if statusOf("registry.invalid/app:1") != nil {
				t.Fatal("failed pull recorded an image")
			}
		}},
		{"malformed reference", func(t *testing.T) {
			_, err := e.img.PullImage(c, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "Bad Name:1"}})
			wantCode(t, err, codes.InvalidArgument)
		}},
		{"preloaded without pull", func(t *testing.T) {
			if img := statusOf("sim/preloaded:v1"); img == nil || !img.Pinned {
				t.Fatalf("preloaded = %v", img)
			}
			if img := statusOf("sim/other:v1"); img != nil {
				t.Fatalf("non-preloaded = %v", img)
			}
		}},
		{"list and remove", func(t *testing.T) {
			resp, err := e.img.ListImages(c, &runtimeapi.ListImagesRequest{})
			if err != nil || len(resp.Images) < 2 {
				t.Fatalf("ListImages = %v, %v", resp, err)
			}
			if _, err := e.img.RemoveImage(c, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}); err != nil {
				t.Fatal(err)
			}
			if statusOf("busybox:1.36") != nil {
				t.Fatal("removed image still present")
			}
			if _, err := e.img.RemoveImage(c, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}); err != nil {
				t.Fatalf("second remove: %v", err)
			}
			fs, err := e.img.ImageFsInfo(c, &runtimeapi.ImageFsInfoRequest{})
			if err != nil || len(fs.ImageFilesystems) != 1 || fs.ImageFilesystems[0].UsedBytes.GetValue() == 0 {
				t.Fatalf("ImageFsInfo = %v, %v", fs, err)
			}
		}},
		{"create needs a present image", func(t *testing.T) {
			sb, sbCfg := e.runPod(t, "img")
			cfg := ctrConfig("c")
			cfg.Image.Image = "nginx:1.27"
			_, err := e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
			wantCode(t, err, codes.NotFound)
			cfg.Image.Image = e.pull(t, "nginx:1.27")
			e.create(t, sb, sbCfg, cfg)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestLogs(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	logDir := filepath.Join(e.dir, "pods", "ns_pod_uid")
	sbCfg := sandboxConfig("logs", false, nil)
	sbCfg.LogDirectory = logDir
	resp, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ctrConfig("app", "sh", "-c", "echo hello; echo 'two words' ; cat /missing; sleep infinity")
	cfg.LogPath = "app/0.log"
	id := e.create(t, resp.PodSandboxId, sbCfg, cfg)
	e.start(t, id)
	path := filepath.Join(logDir, "app", "0.log")
	if st := e.status(t, id); st.LogPath != path {
		t.Fatalf("log path %q, want %q", st.LogPath, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+ (stdout|stderr) F (.*)$`)
	want := []string{"stdout hello", "stdout two words", "stderr cat: can't open '/missing': No such file or directory"}
	if len(lines) != len(want) {
		t.Fatalf("log = %q", b)
	}
	for i, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil || m[1]+" "+m[2] != want[i] {
			t.Fatalf("line %d = %q, want %q", i, l, want[i])
		}
	}
	// Rotation: the kubelet renames the file, then asks to reopen.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.ReopenContainerLog(c, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("log not reopened: %v", err)
	}
	if _, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = e.rt.ReopenContainerLog(c, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestStats(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	sb, id := e.run(t, "stats", "sleep", "infinity")
	cs, err := e.rt.ContainerStats(c, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil || cs.Stats.Memory.WorkingSetBytes.GetValue() == 0 || cs.Stats.Attributes.Id != id {
		t.Fatalf("ContainerStats = %v, %v", cs, err)
	}
	lcs, err := e.rt.ListContainerStats(c, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: sb}})
	if err != nil || len(lcs.Stats) != 1 {
		t.Fatalf("ListContainerStats = %v, %v", lcs, err)
	}
	ps, err := e.rt.PodSandboxStats(c, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	if err != nil || len(ps.Stats.Linux.Containers) != 1 || ps.Stats.Linux.Process.ProcessCount.GetValue() != 2 {
		t.Fatalf("PodSandboxStats = %v, %v", ps, err)
	}
	lps, err := e.rt.ListPodSandboxStats(c, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil || len(lps.Stats) != 1 {
		t.Fatalf("ListPodSandboxStats = %v, %v", lps, err)
	}
	if _, err := e.rt.UpdateContainerResources(c, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id,
		Linux: &runtimeapi.LinuxContainerResources{CpuShares: 512}}); err != nil {
		t.Fatal(err)
	}
	if st := e.status(t, id); st.Resources.GetLinux().GetCpuShares() != 512 {
		t.Fatalf("resources = %v", st.Resources)
	}
}

func TestLatencies(t *testing.T) {
	e := newEnv(t, Config{StartLatency: 100 * time.Millisecond, StopLatency: 5 * time.Second})
	c := ctx(t)
	sb, sbCfg := e.runPod(t, "lat")
	id := e.create(t, sb, sbCfg, ctrConfig("c", "sleep", "infinity"))
	start := time.Now()
	e.start(t, id)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("start took %v, want >= 100ms", d)
	}
	// Other calls are not blocked by a pending stop.
	stopped := make(chan error, 1)
	start = time.Now()
	go func() {
		_, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1})
		stopped <- err
	}()
	if _, err := e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second || d > 4*time.Second {
		t.Fatalf("stop with timeout 1s took %v", d)
	}
	if st := e.status(t, id); st.ExitCode != 137 {
		t.Fatalf("exit %d", st.ExitCode)
	}
}

func TestDensity(t *testing.T) {
	const n = 2000
	e := newEnv(t, Config{})
	c := ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				cfg := sandboxConfig(fmt.Sprint("d", i), false, map[string]string{"density": "yes"})
				sb, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg})
				if err != nil {
					errs <- err
					continue
				}
				ct, err := e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: ctrConfig("c", "sleep", "3600"), SandboxConfig: cfg})
				if err != nil {
					errs <- err
					continue
				}
				if _, err := e.rt.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: ct.ContainerId}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sbs, err := e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(sbs.Items) != n {
		t.Fatalf("%d sandboxes, %v", len(sbs.GetItems()), err)
	}
	ips := map[string]bool{}
	for _, sb := range sbs.Items {
		ip := e.podIP(t, sb.Id)
		if ips[ip] || !strings.HasPrefix(ip, "127.") {
			t.Fatalf("duplicate or bad IP %q", ip)
		}
		ips[ip] = true
	}
	start := time.Now()
	cs, err := e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil || len(cs.Containers) != n {
		t.Fatalf("%d running containers, %v", len(cs.GetContainers()), err)
	}
	t.Logf("ListContainers of %d over gRPC: %v", n, time.Since(start))
}

func TestIPReuseOnlyAfterRemove(t *testing.T) {
	r := New(Config{IPBase: "127.77.255.253"})
	defer r.Close()
	c := context.Background()
	ipOf := func(id string) string {
		ss, err := r.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		if err != nil {
			t.Fatal(err)
		}
		return ss.Status.Network.GetIp()
	}
	run := func(name string) string {
		resp, err := r.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig(name, false, nil)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.PodSandboxId
	}
	a, b := run("a"), run("b")
	if ipOf(a) != "127.77.255.253" || ipOf(b) != "127.77.255.254" {
		t.Fatalf("ips %s %s", ipOf(a), ipOf(b))
	}
	if _, err := r.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: a}); err != nil {
		t.Fatal(err)
	}
	if ipOf(a) != "127.77.255.253" {
		t.Fatal("stopped sandbox lost its IP")
	}
	// .255 and .0 are skipped.
	if ip := ipOf(run("c")); ip != "127.78.0.1" {
		t.Fatalf("next ip %s", ip)
	}
}

func TestListContainersScale(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const n = 10000
	r := New(Config{})
	defer r.Close()
	c := context.Background()
	for i := range n {
		cfg := sandboxConfig(fmt.Sprint("s", i), false, map[string]string{indexedLabel: fmt.Sprint("uid-", i)})
		sb, err := r.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: ctrConfig("c"), SandboxConfig: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	// What these lists cost is BenchmarkList's (list_bench_test.go): a
	// test checks what they answer, never how fast.
	resp, err := r.ListContainers(c, &runtimeapi.ListContainersRequest{})
	if err != nil || len(resp.Containers) != n {
		t.Fatalf("%d, %v", len(resp.GetContainers()), err)
	}
	for i := range 1000 { // the kubelet lists a pod's objects by its UID label
		sel := map[string]string{indexedLabel: fmt.Sprint("uid-", i)}
		sbs, err := r.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
		if err != nil || len(sbs.Items) != 1 {
			t.Fatalf("label-selected sandboxes: %d, %v", len(sbs.GetItems()), err)
		}
		cs, err := r.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sbs.Items[0].Id}})
		if err != nil || len(cs.Containers) != 1 {
			t.Fatalf("sandbox-selected containers: %d, %v", len(cs.GetContainers()), err)
		}
	}
}

func TestListenAndServe(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpAddr := free.Addr().String()
	_ = free.Close()
	sock := filepath.Join(t.TempDir(), "sub", "sim.sock")
	// A stale socket file from an earlier run is replaced.
	stale, err := net.Listen("unix", sock[:len(sock)-len("sub/sim.sock")]+"stale.sock")
	if err == nil {
		stale.(*net.UnixListener).SetUnlinkOnClose(false)
		_ = stale.Close()
	}
	tests := []struct {
		name     string
		endpoint string
		target   string
	}{
		{"unix", "unix://" + sock, "unix://" + sock},
		{"stale unix", "unix://" + filepath.Join(filepath.Dir(filepath.Dir(sock)), "stale.sock"), "unix://" + filepath.Join(filepath.Dir(filepath.Dir(sock)), "stale.sock")},
		{"tcp", "tcp://" + tcpAddr, tcpAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ListenAndServe(c, tt.endpoint, Config{IPBase: testIPBase}) }()
			conn, err := grpc.NewClient(tt.target, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			rt := runtimeapi.NewRuntimeServiceClient(conn)
			var sb string
			eventually(t, "server up", func() bool {
				resp, err := rt.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("x", false, nil)})
				if err == nil {
					sb = resp.PodSandboxId
				}
				return err == nil
			})
			cctx, ccancel := context.WithCancel(ctx(t))
			defer ccancel()
			id := ""
			{
				cfg := sandboxConfig("x", false, nil)
				cr, err := rt.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("srv", "nc", "-lk", "-p", "7070"), SandboxConfig: cfg})
				if err != nil {
					t.Fatal(err)
				}
				id = cr.ContainerId
			}
			if _, err := rt.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
				t.Fatal(err)
			}
			if !dialable(testIPBase + ":7070") {
				t.Fatal("container listener not up")
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("ListenAndServe: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ListenAndServe did not return after cancel")
			}
			if dialable(testIPBase + ":7070") {
				t.Fatal("container listener still open after shutdown")
			}
		})
	}
}

// TestShell runs scripts through ExecSync: the shell's syntax (on
// mvdan.cc/sh's interpreter) over the simulated programs and filesystem,
// with nothing of the host's.
func TestShell(t *testing.T) {
	e := newEnv(t, Config{})
	sbCfg := sandboxConfig("shell", false, nil)
	sb, err := e.rt.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ctrConfig("c", "sleep", "infinity")
	cfg.Envs = []*runtimeapi.KeyValue{{Key: "X", Value: []byte("x")}}
	id := e.create(t, sb.PodSandboxId, sbCfg, cfg)
	e.start(t, id)
	tests := []struct {
		name       string
		src        string
		wantExit   int32
		wantStdout string
		wantStderr string
	}{
		{"sequence", "false; true && echo a || echo b; false || echo c", 0, "a\nc\n", ""},
		{"quotes", `echo 'a  b' "c $X" d\ e`, 0, "a  b c x d e\n", ""},
		{"redirects", "echo hi > /f 2>&1; cat /f; echo err >&2", 0, "hi\n", "err\n"},
		{"append", "echo 1 > /g; echo 2 >> /g; cat /g", 0, "1\n2\n", ""},
		{"relative paths from /", "echo r > rel; cat /rel", 0, "r\n", ""},
		{"comments and newlines", "echo a # c\n\necho b", 0, "a\nb\n", ""},
		{"background and wait", "sleep 0.01 & wait; echo done", 0, "done\n", ""},
		{"default expansion", "echo ${Y:-dflt} ${X}", 0, "dflt x\n", ""},
		{"status", "false; echo $?; sh -c 'exit 7'; echo $?", 0, "1\n7\n", ""},
		{"loop and arithmetic", "i=0; while [ $i -lt 3 ]; do echo $i; i=$((i+1)); done", 0, "0\n1\n2\n", ""},
		{"pipe", "echo piped | cat", 0, "piped\n", ""},
		{"functions", "f() { echo \"in $1\"; return 3; }; f arg; echo $?", 0, "in arg\n3\n", ""},
		{"dev null", "echo gone > /dev/null; cat /nope 2>/dev/null || echo missing", 0, "missing\n", ""},
		{"not the host's files", "test -e /etc/passwd || echo none; cd /usr/lib 2>/dev/null || echo nocd", 0, "none\nnocd\n", ""},
		{"environment", "echo $HOME $UID; echo ${PATH:-nopath}", 0, "/root 0\nnopath\n", ""},
		{"set -e", "set -e; false; echo never", 1, "", ""},
		{"sh -ec", "sh -ec 'false; echo never'; echo $?", 0, "1\n", ""},
		{"positional", "sh -c 'echo $1 $#' zero one", 0, "one 1\n", ""},
		{"ulimit is true", "ulimit -n 1024 && umask 022 && echo ok", 0, "ok\n", ""},
		{"unknown program times out", "", 0, "", ""},
		{"here-document and &>", "cat <<EOF &> /h\nhi $X\nEOF\ncat /h", 0, "hi x\n", ""},
		{"a path to a builtin", "/bin/echo x; /usr/bin/test -d /tmp", 0, "x\n", ""},
		{"kill is not simulated", "kill 1", 2, "", "kill: unsupported builtin\n"},
		{"brace expansion", "echo {1..3}{a,b}", 0, "1a 1b 2a 2b 3a 3b\n", ""},
		{"brace expansion too big", "echo {1..1000}{1..1000}", 2, "", "sh: 1:6: brace expansion of more than 100000 words\n"},
		{"recursion", "f() { f; }; f", 2, "", "sh: maximum function nesting level exceeded\n"},
		{"syntax error", "echo 'x", 2, "", "sh: 1:6: reached EOF without closing quote `'`\n"},
		{"dangling and", "a &&", 2, "", "sh: 1:3: `&&` must be followed by a statement\n"},
		{"process substitution", "cat <(echo x)", 2, "", "sh: 1:5: process substitution is not simulated\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.src == "" {
				_, err := e.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "/usr/bin/nginx"}, Timeout: 1})
				wantCode(t, err, codes.DeadlineExceeded)
				return
			}
			resp, err := e.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", tt.src}, Timeout: 10})
			if err != nil {
				t.Fatal(err)
			}
			if resp.ExitCode != tt.wantExit || string(resp.Stdout) != tt.wantStdout || string(resp.Stderr) != tt.wantStderr {
				t.Fatalf("%q = %d %q %q, want %d %q %q", tt.src, resp.ExitCode, resp.Stdout, resp.Stderr, tt.wantExit, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestGRPCHealthServer(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	sb, sbCfg := e.runPod(t, "grpc")
	id := e.create(t, sb, sbCfg, ctrConfig("srv", "agnhost", "grpc-health-checking", "--port", "5000", "--service=db"))
	e.start(t, id)
	addr := net.JoinHostPort(e.podIP(t, sb), "5000")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := healthpb.NewHealthClient(conn)
	tests := []struct {
		service string
		want    healthpb.HealthCheckResponse_ServingStatus
		code    codes.Code
	}{
		{service: "", want: healthpb.HealthCheckResponse_SERVING},
		{service: "db", want: healthpb.HealthCheckResponse_SERVING},
		{service: "cache", code: codes.NotFound},
	}
	for _, tt := range tests {
		resp, err := client.Check(c, &healthpb.HealthCheckRequest{Service: tt.service})
		if status.Code(err) != tt.code {
			t.Fatalf("service %q: %v, want code %s", tt.service, err, tt.code)
		}
		if err == nil && resp.GetStatus() != tt.want {
			t.Fatalf("service %q: %s, want %s", tt.service, resp.GetStatus(), tt.want)
		}
	}
	if _, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if dialable(addr) {
		t.Fatalf("%s still accepts after stop", addr)
	}
}

// TestReadsRunWhileAnotherReadHolds checks that status and list calls share
// the runtime's lock: while one read holds it (a relist of every pod on a
// big node), the others are answered, not queued behind it.
func TestReadsRunWhileAnotherReadHolds(t *testing.T) {
	e := newEnv(t, Config{})
	sb, id := e.run(t, "reader", "sleep", "3600")
	e.r.mu.RLock()
	defer e.r.mu.RUnlock()
	reads := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"ContainerStatus", func(ctx context.Context) error {
			_, err := e.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			return err
		}},
		{"PodSandboxStatus", func(ctx context.Context) error {
			_, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
			return err
		}},
		{"ListContainers", func(ctx context.Context) error {
			_, err := e.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		}},
		{"ListPodSandbox", func(ctx context.Context) error {
			_, err := e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			return err
		}},
	}
	for _, tc := range reads {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel := context.WithTimeout(ctx(t), 10*time.Second)
			defer cancel()
			if err := tc.call(c); err != nil {
				t.Fatalf("%s while another read holds the lock: %v", tc.name, err)
			}
		})
	}
}

// The checks of StartContainer take the lock shared: of concurrent starts
// of one container, one starts it and the others are refused, whatever the
// start latency (the checks and the start are apart by it).
func TestConcurrentStartsStartOnce(t *testing.T) {
	tests := []struct {
		name    string
		latency time.Duration
	}{
		{name: "no latency"},
		{name: "with a start latency", latency: 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{StartLatency: tt.latency})
			sb, sbCfg := e.runPod(t, "web")
			id := e.create(t, sb, sbCfg, ctrConfig("app", "sleep", "3600"))
			const n = 16
			errs := make(chan error, n)
			for range n {
				go func() {
					_, err := e.rt.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: id})
					errs <- err
				}()
			}
			started := 0
			for range n {
				switch err := <-errs; status.Code(err) {
				case codes.OK:
					started++
				case codes.FailedPrecondition:
				default:
					t.Fatalf("StartContainer: %v", err)
				}
			}
			if started != 1 {
				t.Fatalf("%d of %d concurrent starts started the container, want 1", started, n)
			}
			if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Fatalf("state %s, want RUNNING", st.State)
			}
		})
	}
}
