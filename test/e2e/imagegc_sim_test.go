package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// gcImagePod is a pushed pod of one container, app, running image with
// command (a YAML flow sequence).
func gcImagePod(name, image, restartPolicy, command string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: %s
    command: %s
`, name, restartPolicy, image, command)
}

// gcImages lists the runtime's images by repo tag (through the CRI, not
// actorlet's view).
func gcImages(t *testing.T, a *agent) []string {
	t.Helper()
	imgs, err := a.runtime().ListImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range imgs {
		out = append(out, img.GetRepoTags()...)
	}
	slices.Sort(out)
	return out
}

// Image garbage collection on the simulated runtime, driven by disk
// pressure on the image filesystem: the only way to make it run now in an
// e2e test. (The periodic collection runs at start and every 5 minutes;
// a restart of actorlet cannot trigger it usefully: the embedded sim's
// images go with the process, and over a separate sim process
// (simProcess) actorlet measures the host's filesystems, not the sim's
// --imagefs-capacity; and a new incarnation knows no image's last use, so
// least recently used could not be shown.)
//
// The image filesystem holds 950Mi; four images of 200Mi each. gc-a,
// gc-b and gc-c are used by pods that complete, in that order; gc-a's
// pod stays (its exited container keeps gc-a in use, as upstream), the
// others are removed. With 600Mi used the node is fine; gc-d's pod then
// takes it to 800Mi, under imagefs.available<20% (190Mi). The next
// eviction pass reclaims on the node first: with
// --eviction-minimum-reclaim imagefs.available=10% it asks the ImageActor
// for 135Mi (up to 30% available, i.e. 70% used, the
// --image-gc-low-threshold given), and the ImageActor removes gc-b: the
// least recently used image not in use (gc-a is older but in use, gc-c
// more recent, gc-d runs). The usage is then 600Mi (63%, under the low
// threshold) on the CRI's ImageFsInfo and /stats/summary; no pod is
// evicted; kubelet_image_garbage_collected_total{reason="space"} is 1.
func TestE2ESimImageGCUnderDiskPressure(t *testing.T) {
	const (
		imgA = "localhost/e2e/gc-a:1"
		imgB = "localhost/e2e/gc-b:1"
		imgC = "localhost/e2e/gc-c:1"
		imgD = "localhost/e2e/gc-d:1"
	)
	ep := "sim://?imagefs-capacity=950Mi"
	for _, img := range []string{imgA, imgB, imgC, imgD} {
		ep += "&image-size=" + strings.TrimSuffix(img, ":1") + "=200Mi"
	}
	a := startAgent(t, agentOpts{endpoint: ep, extra: []string{
		"--eviction-hard", "imagefs.available<20%",
		"--eviction-minimum-reclaim", "imagefs.available=10%",
		"--image-gc-high-threshold", "80", "--image-gc-low-threshold", "70",
		"--image-minimum-gc-age", "0",
		"--eviction-pressure-transition-period", "5s",
	}})

	// gc-a, gc-b, gc-c used in that order, by pods that complete.
	for _, img := range []string{imgA, imgB, imgC} {
		name := strings.TrimSuffix(strings.TrimPrefix(img, "localhost/e2e/"), ":1")
		a.push(t, gcImagePod(name, img, "Never", `["true"]`))
		p := a.waitPod(time.Minute, name+"-e2e-node", "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
		if img == imgA {
			continue // gc-a's exited container stays: gc-a is in use
		}
		a.removePushed(t, name+"-e2e-node")
		rt := a.runtime()
		testenv.WaitFor(t, time.Minute, name+"'s containers removed from the runtime", func() (bool, error) {
			n := len(containersOf(t, rt, string(p.UID)))
			return n == 0, fmt.Errorf("%d containers left", n)
		})
	}
	if got := gcImages(t, a); !slices.Equal(got, []string{imgA, imgB, imgC}) {
		t.Fatalf("the runtime's images %v, want gc-a, gc-b, gc-c", got)
	}
	s, err := a.summary()
	if err != nil {
		t.Fatal(err)
	}
	if fs := s.Node.Runtime; fs == nil || fs.ImageFs == nil || fs.ImageFs.UsedBytes == nil || *fs.ImageFs.UsedBytes != uint64(600*mi) ||
		fs.ImageFs.CapacityBytes == nil || *fs.ImageFs.CapacityBytes != uint64(950*mi) {
		t.Fatalf("/stats/summary node.runtime: %+v, want the image filesystem 600Mi used of 950Mi", s.Node.Runtime)
	}

	// gc-d's pod takes the image filesystem under the threshold.
	a.push(t, gcImagePod("gc-d", imgD, "Always", `["sleep", "infinity"]`))
	d := a.waitPod(time.Minute, "gc-d-e2e-node", "Running", isRunning)

	testenv.WaitFor(t, time.Minute, "gc-b removed from the runtime", func() (bool, error) {
		got := gcImages(t, a)
		return !slices.Contains(got, imgB), fmt.Errorf("images %v", got)
	})
	if got := gcImages(t, a); !slices.Equal(got, []string{imgA, imgC, imgD}) {
		t.Fatalf("after the collection: images %v, want gc-a (in use), gc-c (used after gc-b) and gc-d (running)", got)
	}

	// The usage, as the runtime and /stats/summary tell it.
	info, err := a.runtime().ImageFsInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fss := info.GetImageFilesystems(); len(fss) != 1 || fss[0].GetUsedBytes().GetValue() != uint64(600*mi) {
		t.Fatalf("ImageFsInfo: %v, want 600Mi used", fss)
	}
	testenv.WaitFor(t, 30*time.Second, "/stats/summary: the image filesystem under the low threshold", func() (bool, error) {
		s, err := a.summary()
		if err != nil {
			return false, err
		}
		fs := s.Node.Runtime.ImageFs
		if fs == nil || fs.AvailableBytes == nil || fs.CapacityBytes == nil {
			return false, fmt.Errorf("imageFs %+v", fs)
		}
		used := 100 - int(*fs.AvailableBytes*100 / *fs.CapacityBytes)
		t.Logf("image filesystem: %d MiB available of %d MiB (%d%% used)", *fs.AvailableBytes>>20, *fs.CapacityBytes>>20, used)
		return *fs.AvailableBytes == uint64(350*mi) && used < 70, fmt.Errorf("%d%% used, %d bytes available", used, *fs.AvailableBytes)
	})

	// Counted; nothing evicted: the node-level reclaim sufficed.
	testenv.WaitFor(t, 30*time.Second, "kubelet_image_garbage_collected_total counts one image for space", func() (bool, error) {
		m := a.metrics()
		return strings.Contains(m, `kubelet_image_garbage_collected_total{reason="space"} 1`+"\n"),
			fmt.Errorf("%q", evGrep(m, "kubelet_image_garbage_collected_total"))
	})
	if m := a.metrics(); strings.Contains(m, "kubelet_evictions{") {
		t.Errorf("a pod was evicted: %q", evGrep(m, "kubelet_evictions"))
	}
	now, err := a.pod("gc-d-e2e-node")
	if err != nil {
		t.Fatal(err)
	}
	if !isRunning(now) || now.Status.ContainerStatuses[0].ContainerID != d.Status.ContainerStatuses[0].ContainerID {
		t.Fatalf("gc-d after the collection: %s", describe(now))
	}
}
