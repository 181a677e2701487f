package e2e

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2EContainerdEmptyDirOverSizeLimitEvicted: local ephemeral storage
// limits, as upstream's eviction manager (LocalStorageCapacityIsolation):
// a pushed busybox pod writing 20 MiB into an emptyDir of sizeLimit 5Mi
// is evicted without any node pressure (Failed/Evicted, upstream's
// message, its containers gone from containerd,
// kubelet_evictions{eviction_signal="emptydirfs.limit"} 1), while a pod
// writing 1 MiB under the same limit keeps running. The volumes are
// measured every minute (upstream's volume stats period): the eviction
// comes within about 70 s.
func TestE2EContainerdEmptyDirOverSizeLimitEvicted(t *testing.T) {
	dir := t.TempDir()
	// No threshold: the machine's own disk use must not interfere.
	a, image := startContainerdAgent(t, dir, "--eviction-hard=")

	// Pushed pods are evictable (manifest pods are static, critical).
	push := func(name string, mib int) (uid, fullName string) {
		t.Helper()
		body := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "dd if=/dev/zero of=/data/f bs=1048576 count=%d && sleep 3600"]
    volumeMounts:
    - {name: scratch, mountPath: /data}
  volumes:
  - name: scratch
    emptyDir: {sizeLimit: 5Mi}
`, name, image, mib)
		return a.pushPod(t, body)
	}
	var uids []string
	defer func() {
		a.deletePushed("small-e2e-node", "big-e2e-node")
		cleanupPods(t, a, dir, uids...)
	}()

	smallUID, small := push("small", 1)
	uids = append(uids, smallUID)
	bigUID, big := push("big", 20)
	uids = append(uids, bigUID)

	p := a.waitPod(3*time.Minute, big, "Failed/Evicted", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
	})
	if want := `Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". `; p.Status.Message != want {
		t.Errorf("eviction message %q, want %q", p.Status.Message, want)
	}
	rt := a.runtime()
	testenv.WaitFor(t, time.Minute, "the evicted pod's containers gone from containerd", func() (bool, error) {
		for _, c := range containersOf(t, rt, bigUID) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false, fmt.Errorf("container %s running", c.Id)
			}
		}
		return true, nil
	})
	testenv.WaitFor(t, 30*time.Second, `kubelet_evictions{eviction_signal="emptydirfs.limit"} 1`, func() (bool, error) {
		v, err := a.metricSum("kubelet_evictions", `eviction_signal="emptydirfs.limit"`)
		return err == nil && v == 1, fmt.Errorf("%v (%v)", v, err)
	})
	// The pod under its limit was measured too (the same passes) and runs.
	sp, err := a.pod(small)
	if err != nil {
		t.Fatal(err)
	}
	if !isRunning(sp) || sp.Status.Reason != "" {
		t.Errorf("the pod under its limit: phase %s reason %q (%s), want Running", sp.Status.Phase, sp.Status.Reason, describe(sp))
	}
	s, err := a.summary()
	if err != nil {
		t.Fatal(err)
	}
	var measured bool
	for _, ps := range s.Pods {
		if ps.PodRef.UID != smallUID {
			continue
		}
		for _, v := range ps.VolumeStats {
			if v.Name == "scratch" && v.UsedBytes != nil && *v.UsedBytes >= 1<<20 {
				measured = true
			}
		}
	}
	if !measured {
		t.Errorf("the summary shows no 1 MiB in the small pod's emptyDir: the check saw nothing of it")
	}
}
