package pod

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// whole gives the fixture's statuses everything a runtime answers with:
// the labels and annotations actorlet set, mounts, image spec, log path,
// resources; the sandboxes their labels, namespace options and IPs.
func whole(f *rtFixture, pod *v1.Pod) *rtFixture {
	for _, sb := range f.snap.sandboxes {
		sb.CreatedAt = fixtureNow.Add(-time.Hour).UnixNano()
		sb.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.7", AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00::7"}}}
		sb.Labels = podspec.Labels(pod)
		sb.Annotations = map[string]string{"note": "x"}
		sb.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{}}}
		sb.RuntimeHandler = "runc"
	}
	for _, cs := range f.snap.containers {
		for _, c := range cs {
			spec := pod.Spec.Containers[0]
			for _, s := range pod.Spec.Containers {
				if s.Name == c.Metadata.Name {
					spec = s
				}
			}
			cfg := podspec.ContainerConfig(pod, &spec, c.Metadata.Attempt, "sha256:0123", false)
			c.Labels, c.Annotations = cfg.Labels, cfg.Annotations
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: "/var/lib/x/termination-log"}}
			c.Image, c.ImageRef, c.ImageId = cfg.Image, "sha256:0123", "sha256:0123"
			c.LogPath = cfg.LogPath
			c.Resources = &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 2}}
			c.User = &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000}}
			if c.State == cExited {
				c.Reason, c.Message = "Error", "boom"
			}
		}
	}
	return f
}

// compacted is a copy of f with every status compacted.
func compacted(f *rtFixture) *rtFixture {
	out := &rtFixture{snap: &snapshot{containers: map[string][]*runtimeapi.ContainerStatus{}}, sandboxOf: f.sandboxOf}
	for _, sb := range f.snap.sandboxes {
		out.snap.sandboxes = append(out.snap.sandboxes, compactSandbox(sb))
	}
	for name, cs := range f.snap.containers {
		for _, c := range cs {
			out.snap.containers[name] = append(out.snap.containers[name], compactContainer(c, c.Message))
		}
	}
	return out
}

// A compacted snapshot gives the same status, plan, restart counts and
// grace period as the whole answers it was made of.
func TestCompactedSnapshotReadsAlike(t *testing.T) {
	app, side := specCtr("app"), specCtr("side")
	changed := side
	changed.Image = "registry.example/side:2" // another hash: side restarts
	tests := []struct {
		name string
		pod  *v1.Pod // the spec
		made *v1.Pod // the spec the containers were made from
		rt   *rtFixture
	}{
		{
			name: "running, after restarts",
			pod:  specPod(v1.RestartPolicyAlways, nil, app, side), made: specPod(v1.RestartPolicyAlways, nil, app, side),
			rt: newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Hour).exited("sb0", "app", 1, 2, time.Minute).
				running("sb0", "app", 2).running("sb0", "side", 0),
		},
		{
			name: "a container whose spec changed",
			pod:  specPod(v1.RestartPolicyAlways, nil, app, changed), made: specPod(v1.RestartPolicyAlways, nil, app, side),
			rt: newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).running("sb0", "side", 3),
		},
		{
			name: "exited, not to restart",
			pod:  specPod(v1.RestartPolicyNever, nil, app), made: specPod(v1.RestartPolicyNever, nil, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).exited("sb1", "app", 0, 3, time.Minute),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full := whole(tt.rt, tt.made)
			small := compacted(full)
			status := func(f *rtFixture) v1.PodStatus {
				return computeStatus(statusInput{pod: tt.pod, snap: f.snap, runtimeName: "containerd", hostIP: "192.0.2.1",
					startTime: fixtureNow.Add(-time.Hour), now: fixtureNow})
			}
			if got, want := status(small), status(full); !reflect.DeepEqual(got, want) {
				t.Errorf("status from the compacted snapshot:\n%+v\nwant\n%+v", got, want)
			}
			plan := func(f *rtFixture) string {
				r := planner{pod: tt.pod, snap: f.snap, sandboxOf: f.sandboxOf, now: fixtureNow, base: testBase, max: testMax}.plan()
				return fmt.Sprintf("%s %v %s", r.act.kind, r.act.ids, r.act.reason)
			}
			if got, want := plan(small), plan(full); got != want {
				t.Errorf("plan from the compacted snapshot = %s, want %s", got, want)
			}
			if got, want := orphanGrace(small.snap, nil), orphanGrace(full.snap, nil); got != want {
				t.Errorf("orphan grace = %d, want %d", got, want)
			}
			for name := range full.snap.containers {
				if got, want := restartCount(small.snap.latest(name)), restartCount(full.snap.latest(name)); got != want {
					t.Errorf("%s: restart count = %d, want %d", name, got, want)
				}
			}
		})
	}
}

func TestCompactContainer(t *testing.T) {
	tests := []struct {
		name        string
		st          *runtimeapi.ContainerStatus
		wantName    string
		wantRestart int32
		wantHash    string
	}{
		{
			name: "the metadata names it",
			st: &runtimeapi.ContainerStatus{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 2},
				Labels:      map[string]string{podspec.LabelContainerName: "app", podspec.LabelPodUID: "u1"},
				Annotations: map[string]string{podspec.AnnotationContainerHash: "abc", podspec.AnnotationRestartCount: "2", "other": "x"}},
			wantName: "app", wantRestart: 2, wantHash: "abc",
		},
		{
			name: "no name in the metadata: the label names it",
			st: &runtimeapi.ContainerStatus{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{},
				Labels:      map[string]string{podspec.LabelContainerName: "app", podspec.LabelPodUID: "u1"},
				Annotations: map[string]string{podspec.AnnotationRestartCount: "4"}},
			wantName: "app", wantRestart: 4,
		},
		{
			name:     "no metadata, labels or annotations",
			st:       &runtimeapi.ContainerStatus{Id: "c1"},
			wantName: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compactContainer(tt.st, "msg")
			if got := nameOf(c); got != tt.wantName {
				t.Errorf("name = %q, want %q", got, tt.wantName)
			}
			if got := restartCount(c); got != tt.wantRestart {
				t.Errorf("restart count = %d, want %d", got, tt.wantRestart)
			}
			if got := c.GetAnnotations()[podspec.AnnotationContainerHash]; got != tt.wantHash {
				t.Errorf("hash = %q, want %q", got, tt.wantHash)
			}
			if c.Message != "msg" || c.Id != tt.st.Id {
				t.Errorf("id, message = %q, %q; want %q, %q", c.Id, c.Message, tt.st.Id, "msg")
			}
			if _, ok := c.GetAnnotations()["other"]; ok || len(c.GetLabels()) > 1 {
				t.Errorf("kept what nothing reads: labels %v annotations %v", c.GetLabels(), c.GetAnnotations())
			}
		})
	}
	if compactContainer(nil, "") != nil || compactSandbox(nil) != nil {
		t.Error("nil compacted to a status")
	}
}

// Equal annotation sets are one map; the tables stay bounded and right.
func TestInternerSharesAndStaysBounded(t *testing.T) {
	var in interner
	ann := func(i int) map[string]string {
		return map[string]string{podspec.AnnotationContainerHash: "h", podspec.AnnotationRestartCount: strconv.Itoa(i), "other": "x"}
	}
	a, b := in.annotations(ann(1)), in.annotations(ann(1))
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Error("two equal annotation sets: two maps")
	}
	if in.annotations(map[string]string{"other": "x"}) != nil {
		t.Error("no kept annotation: a map")
	}
	for i := range 3 * internMax {
		m := in.annotations(ann(i))
		if m[podspec.AnnotationRestartCount] != strconv.Itoa(i) || m[podspec.AnnotationContainerHash] != "h" || len(m) != 2 {
			t.Fatalf("annotations of set %d = %v", i, m)
		}
		if s := in.str(strconv.Itoa(i)); s != strconv.Itoa(i) {
			t.Fatalf("str(%d) = %q", i, s)
		}
	}
	if len(in.anns) > internAnnotationsMax || len(in.strs) > internMax {
		t.Errorf("tables of %d and %d entries, bounds %d and %d", len(in.anns), len(in.strs), internAnnotationsMax, internMax)
	}
}

// statusRuntime answers status calls from its maps; the rest of the
// Inspector is not called by containerStatus and sandboxStatus.
type statusRuntime struct {
	Inspector
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
}

var _ Inspector = (*statusRuntime)(nil)

func (r *statusRuntime) PodSandboxStatus(_ context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	st, ok := r.sandboxes[id]
	if !ok {
		return nil, errdefs.ErrNotFound
	}
	return st, nil
}

func (r *statusRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	st, ok := r.containers[id]
	if !ok {
		return nil, errdefs.ErrNotFound
	}
	return st, nil
}

// mountReader reads the termination message off the status's mounts, as
// the real one does.
type mountReader struct{}

var _ TerminationReader = mountReader{}

func (mountReader) TerminationMessage(c *runtimeapi.ContainerStatus) string {
	for _, m := range c.GetMounts() {
		if m.ContainerPath == c.GetAnnotations()[podspec.AnnotationTerminationMsgPath] {
			return "written to " + m.HostPath
		}
	}
	return ""
}

// The termination message is read from the whole answer (its mounts and
// annotations), before the status is compacted.
func TestContainerStatusReadsTheTerminationMessageFirst(t *testing.T) {
	rt := &statusRuntime{containers: map[string]*runtimeapi.ContainerStatus{
		"c1": {Id: "c1", State: cExited, Message: "runtime says", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Annotations: map[string]string{podspec.AnnotationTerminationMsgPath: "/dev/termination-log"},
			Mounts:      []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: "/h/tl"}}},
		"nil": nil,
	}}
	st, err := containerStatus(context.Background(), rt, mountReader{}, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "runtime says: written to /h/tl"; st.Message != want {
		t.Errorf("message = %q, want %q", st.Message, want)
	}
	if len(st.Mounts) != 0 || rt.containers["c1"].Message != "runtime says" {
		t.Errorf("mounts kept (%v), or the runtime's answer changed (%q)", st.Mounts, rt.containers["c1"].Message)
	}
	if _, err := containerStatus(context.Background(), rt, nil, "nil"); err == nil {
		t.Error("a status answer without a status: no error")
	}
	if _, err := containerStatus(context.Background(), rt, nil, "gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a missing container: %v, want not found", err)
	}
}

// BenchmarkKeptStatusBytes is what a PodActor keeps of a running pod's
// status answers (one sandbox, one container, as the runtime answers
// them for a pod actorlet made): whole (whole-B/pod), as before, and
// compacted (kept-B/pod). Each iteration reads 1,000 pods.
func BenchmarkKeptStatusBytes(b *testing.B) {
	const n = 1000
	answers := func(i int) (*runtimeapi.PodSandboxStatus, *runtimeapi.ContainerStatus) {
		pod := specPod(v1.RestartPolicyAlways, nil, specCtr("app"))
		pod.Name, pod.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("0f0e0d0c-0b0a-0908-0706-%012d", i))
		pod.Labels = map[string]string{"app": "web"}
		f := whole(newRT().sandbox(fmt.Sprintf("%064x", 2*i), 0, true).running(fmt.Sprintf("%064x", 2*i), "app", 0), pod)
		// Strings of their own, as a decoded answer has.
		sb, c := proto.Clone(f.snap.sandboxes[0]).(*runtimeapi.PodSandboxStatus), proto.Clone(f.snap.containers["app"][0]).(*runtimeapi.ContainerStatus)
		c.Id = fmt.Sprintf("%064x", 2*i+1)
		return sb, c
	}
	var whole, kept float64
	for range b.N {
		before := liveHeap()
		sbs := make([]*runtimeapi.PodSandboxStatus, n)
		cs := make([]*runtimeapi.ContainerStatus, n)
		for i := range n {
			sbs[i], cs[i] = answers(i)
		}
		withWhole := liveHeap()
		for i := range n {
			sbs[i], cs[i] = compactSandbox(sbs[i]), compactContainer(cs[i], cs[i].Message)
		}
		after := liveHeap()
		runtime.KeepAlive(sbs)
		runtime.KeepAlive(cs)
		whole += float64(withWhole-before) / n
		kept += float64(after-before) / n
	}
	b.ReportMetric(whole/float64(b.N), "whole-B/pod")
	b.ReportMetric(kept/float64(b.N), "kept-B/pod")
}

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
