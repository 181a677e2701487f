package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2EClusterContainerdConformanceRun1Gaps holds what the first
// NodeConformance run (docs/CONFORMANCE.md) still found, each as a user
// sees it on a real containerd:
//   - a pod's labels changed through the API reach its downward API file
//     (the "should update labels on modification" specs);
//   - a subPath that does not exist yet, in a memory-backed emptyDir with an
//     fsGroup, is made with the volume's mode (3777: the tmpfs root's 1777
//     and the fsGroup's setgid) and group, not by the runtime as 0755 root ("nonexistent volume subPath should have the
//     correct mode and owner using FSGroup");
//   - FallbackToLogsOnError keeps a last log line printed without a
//     newline ("echo -n DONE", the runtime blackbox spec).
func TestE2EClusterContainerdConformanceRun1Gaps(t *testing.T) {
	const node = "e2e-conf-gaps"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	ip := nonLoopbackIPv4(t)
	a := c.startNode(t, node, agentOpts{endpoint: env.Endpoint, extra: []string{"--node-ip", ip, "--address", ip}})
	a.host = ip
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods("default")

	fsGroup := int64(123)
	watcher := apiPod("conf-gaps-watch", node, env.BusyboxImage, "sh", "-c",
		`echo "sub $(stat -c '%A %g' /sub)"; while true; do echo "labels $(cat /podinfo/labels | tr '\n' ' ')"; sleep 1; done`)
	watcher.Labels = map[string]string{"key1": "value1"}
	watcher.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &fsGroup}
	watcher.Spec.Volumes = []v1.Volume{
		{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
	}
	watcher.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "podinfo", MountPath: "/podinfo"}, {Name: "mem", MountPath: "/sub", SubPath: "not/there/yet"}}

	message := apiPod("conf-gaps-message", node, env.BusyboxImage, "sh", "-c", "echo -n DONE; false")
	message.Spec.RestartPolicy = v1.RestartPolicyNever
	message.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError

	var watcherUID types.UID
	for _, p := range []*v1.Pod{watcher, message} {
		_ = pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
		created, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p == watcher {
			watcherUID = created.UID
		}
	}
	// Deleted before the agent stops: its tmpfs is unmounted, so the
	// test's directories can go.
	t.Cleanup(func() {
		for _, p := range []*v1.Pod{watcher, message} {
			_ = pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
		}
		testenv.WaitFor(t, 2*time.Minute, "the watcher's tmpfs unmounted", func() (bool, error) {
			mi, err := os.ReadFile("/proc/self/mountinfo")
			return err == nil && !strings.Contains(string(mi), string(watcherUID)), err
		})
	})

	t.Run("termination message from a log with no newline", func(t *testing.T) {
		p := c.waitPod(t, "default", message.Name, "terminated", 2*time.Minute, func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Terminated != nil
		})
		if got := p.Status.ContainerStatuses[0].State.Terminated.Message; got != "DONE" {
			t.Fatalf("termination message %q, want %q", got, "DONE")
		}
	})

	c.waitPod(t, "default", watcher.Name, "Running", 2*time.Minute, isRunning)
	logs := func() string {
		out, _ := pods.GetLogs(watcher.Name, &v1.PodLogOptions{}).DoRaw(ctx)
		return string(out)
	}
	testenv.WaitFor(t, time.Minute, "the watcher's first lines", func() (bool, error) {
		return strings.Contains(logs(), `labels key1="value1"`), nil
	})

	t.Run("a missing subPath gets the volume's mode and group", func(t *testing.T) {
		if got := logs(); !strings.Contains(got, "sub drwxrwsrwt 123") {
			t.Fatalf("the container reports:\n%s\nwant a line %q", got, "sub drwxrwsrwt 123")
		}
	})

	t.Run("a label change reaches the downward API file", func(t *testing.T) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"key1": "value2", "key3": "value3"}}})
		if _, err := pods.Patch(ctx, watcher.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, time.Minute, "the new labels in the file", func() (bool, error) {
			return strings.Contains(logs(), `labels key1="value2" key3="value3"`), nil
		})
	})
}
