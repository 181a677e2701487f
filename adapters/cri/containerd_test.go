package cri_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/testenv"
)

// TestContainerd runs a pod with a busybox httpd in the local containerd
// (deploy/local/containerd.sh), reaches it on its pod IP, execs in it, checks
// name reservation, then removes everything.
func TestContainerd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test (needs the local containerd)")
	}
	endpoint, busybox := testenv.Containerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, err := cri.Dial(ctx, endpoint, 30*time.Second)
	if err != nil {
		t.Fatalf("Dial(%s): %v", endpoint, err)
	}
	t.Cleanup(func() { _ = c.Close() }) // registered first: runs after the pod cleanup

	testenv.WaitFor(t, 20*time.Second, "runtime and network ready", func() (bool, error) {
		st, err := c.Status(ctx)
		if err != nil {
			return false, err
		}
		ready := 0
		for _, cond := range st.GetConditions() {
			if (cond.Type == runtimeapi.RuntimeReady || cond.Type == runtimeapi.NetworkReady) && cond.Status {
				ready++
			}
		}
		return ready == 2, fmt.Errorf("conditions %v", st.GetConditions())
	})
	if img, err := c.ImageStatus(ctx, busybox); err != nil || img == nil {
		t.Fatalf("ImageStatus(%s) = %v, %v; want the image", busybox, img, err)
	}

	uid := "actorlet-it-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	podLabels := map[string]string{
		"io.kubernetes.pod.uid":       uid,
		"io.kubernetes.pod.name":      "cri-it",
		"io.kubernetes.pod.namespace": "default",
	}
	logDir := filepath.Join(t.TempDir(), "pods", "default_cri-it_"+uid)
	if err := os.MkdirAll(filepath.Join(logDir, "httpd"), 0o755); err != nil {
		t.Fatal(err)
	}
	pod := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "cri-it", Namespace: "default", Uid: uid},
		Hostname:     "cri-it",
		LogDirectory: logDir,
		Labels:       podLabels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/burstable/pod" + uid,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD},
			},
		},
	}
	ctrLabels := map[string]string{"io.kubernetes.container.name": "httpd"}
	for k, v := range podLabels {
		ctrLabels[k] = v
	}
	ctrCfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "httpd", Attempt: 0},
		Image:    &runtimeapi.ImageSpec{Image: busybox},
		Command: []string{"sh", "-c",
			"mkdir -p /srv && echo hello-actorlet > /srv/index.html && exec httpd -f -p 8080 -h /srv"},
		LogPath: "httpd/0.log",
		Labels:  ctrLabels,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, CpuShares: 256},
		},
	}

	start := time.Now()
	podID, err := c.RunPodSandbox(ctx, pod, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	var cid string
	t.Cleanup(func() { cleanupPod(t, c, podID, cid, uid) })

	cid, err = c.CreateContainer(ctx, podID, ctrCfg, pod)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := c.StartContainer(ctx, cid); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	t.Logf("run pod sandbox + create + start: %v", time.Since(start))

	ps, err := c.PodSandboxStatus(ctx, podID)
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	if ps.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || ps.GetNetwork().GetIp() == "" {
		t.Fatalf("sandbox state %v, ip %q; want ready with an IP", ps.GetState(), ps.GetNetwork().GetIp())
	}
	url := "http://" + ps.GetNetwork().GetIp() + ":8080/"
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	if body := testenv.WaitGet(t, hc, url, 15*time.Second); strings.TrimSpace(body) != "hello-actorlet" {
		t.Errorf("GET %s = %q, want hello-actorlet", url, body)
	}

	cs, err := c.ContainerStatus(ctx, cid)
	if err != nil || cs.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ContainerStatus = %v, %v; want running", cs.GetState(), err)
	}
	if want := filepath.Join(logDir, "httpd", "0.log"); cs.GetLogPath() != want {
		t.Errorf("log path %q, want %q", cs.GetLogPath(), want)
	}
	if limit, err := os.ReadFile("/sys/fs/cgroup/memory/kubepods/burstable/pod" + uid + "/" + cid + "/memory.limit_in_bytes"); err == nil {
		if strings.TrimSpace(string(limit)) != strconv.Itoa(64<<20) {
			t.Errorf("memory.limit_in_bytes = %s, want %d", limit, 64<<20)
		}
	} // cgroup v2 hosts: not checked

	stdout, _, code, err := c.ExecSync(ctx, cid, []string{"cat", "/srv/index.html"}, 10*time.Second)
	if err != nil || code != 0 || strings.TrimSpace(string(stdout)) != "hello-actorlet" {
		t.Errorf("ExecSync cat = %q, %d, %v", stdout, code, err)
	}
	_, stderr, code, err := c.ExecSync(ctx, cid, []string{"sh", "-c", "echo oops >&2; exit 3"}, 10*time.Second)
	if err != nil || code != 3 || strings.TrimSpace(string(stderr)) != "oops" {
		t.Errorf("ExecSync exit 3 = stderr %q, code %d, err %v; want oops, 3, nil", stderr, code, err)
	}

	// The lean listing (the PLEG's relist) reads containerd's answers as
	// the full listing does.
	type object struct {
		id, sandboxID, uid string
		state              int32
	}
	var lean []object
	if err := c.ListPodSandboxLean(ctx, func(id, podUID, metadataUID string, state int32) {
		if podUID == uid && metadataUID == uid {
			lean = append(lean, object{id: id, uid: podUID, state: state})
		}
	}); err != nil {
		t.Errorf("ListPodSandboxLean: %v", err)
	}
	if err := c.ListContainersLean(ctx, func(id, sandboxID, podUID string, state int32) {
		if podUID == uid {
			lean = append(lean, object{id: id, sandboxID: sandboxID, uid: podUID, state: state})
		}
	}); err != nil {
		t.Errorf("ListContainersLean: %v", err)
	}
	if want := []object{
		{id: podID, uid: uid, state: int32(runtimeapi.PodSandboxState_SANDBOX_READY)},
		{id: cid, sandboxID: podID, uid: uid, state: int32(runtimeapi.ContainerState_CONTAINER_RUNNING)},
	}; fmt.Sprint(lean) != fmt.Sprint(want) {
		t.Errorf("lean listing of the pod = %+v, want %+v", lean, want)
	}

	// Same metadata again: containerd reserves the name (codes.Unknown, "is reserved for").
	if id, err := c.CreateContainer(ctx, podID, ctrCfg, pod); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("second CreateContainer with the same metadata = %q, %v; want ErrAlreadyExists", id, err)
	}

	cri.RemovePod(ctx, t, c, podID, cid, 2)

	sel := map[string]string{"io.kubernetes.pod.uid": uid}
	ctrs, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil || len(ctrs) != 0 {
		t.Errorf("ListContainers for the pod after removal = %v, %v; want none", ctrs, err)
	}
	pods, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil || len(pods) != 0 {
		t.Errorf("ListPodSandbox for the pod after removal = %v, %v; want none", pods, err)
	}
	if _, err := c.ContainerStatus(ctx, cid); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("ContainerStatus of a removed container = %v; want ErrNotFound", err)
	}
	if _, err := c.PodSandboxStatus(ctx, podID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("PodSandboxStatus of a removed sandbox = %v; want ErrNotFound", err)
	}
}

// cleanupPod removes what the test left behind (also after a failure) and the
// pod's cgroups, as the kubelet's cgroup manager would.
func cleanupPod(t *testing.T, c *cri.Client, podID, cid, uid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cid != "" {
		_ = c.StopContainer(ctx, cid, 0)
		if err := c.RemoveContainer(ctx, cid); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.Logf("cleanup: %v", err)
		}
	}
	_ = c.StopPodSandbox(ctx, podID)
	if err := c.RemovePodSandbox(ctx, podID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		t.Logf("cleanup: %v", err)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods/burstable/pod" + uid)
	if d := "/sys/fs/cgroup/kubepods/burstable/pod" + uid; dirExists(d) {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		_ = os.Remove(d) // rmdir; fails harmlessly while processes remain
	}
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
