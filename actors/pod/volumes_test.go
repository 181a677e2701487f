package pod

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/actorlet/actorlet/messages"
)

// fakeRecorder records events.
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

var _ Recorder = (*fakeRecorder)(nil)

func (r *fakeRecorder) Eventf(_ runtime.Object, eventtype, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (r *fakeRecorder) has(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if contains(e, " "+reason+" ") {
			return true
		}
	}
	return false
}

func TestVolumesAreMountedAndFailuresShown(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "data", MountPath: "/cfg", SubPath: "cfg", ReadOnly: true}}
	var mu sync.Mutex
	fail := true
	rec := &fakeRecorder{}
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Events = rec
		d.Volumes = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*messages.EnsureVolumes); ok {
				mu.Lock()
				defer mu.Unlock()
				if fail {
					c.Send(m.ReplyTo, &messages.VolumesReady{UID: m.Pod.UID, Reason: "FailedMount", Message: "configmap x not found"})
					return
				}
				c.Send(m.ReplyTo, &messages.VolumesReady{UID: m.Pod.UID, Paths: map[string]string{"data": "/var/lib/x/data"}})
			}
		}))
	})
	st := h.waitStatus("waiting on volumes", func(s *v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == ReasonContainerCreating && contains(w.Message, "FailedMount")
	})
	_ = st
	if h.rt.Count("CreateContainer") != 0 {
		t.Fatal("container created before its volumes")
	}
	if !rec.has("FailedMount") {
		t.Fatalf("no FailedMount event: %v", rec.events)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	h.clk.Step(time.Second) // the retry after a failed setup
	h.waitStatus("Running", running)
	mounts := h.rt.Containers()[0].Mounts
	want := map[string]string{"/data": "/var/lib/x/data", "/cfg": "/var/lib/x/data/cfg"}
	found := 0
	for _, m := range mounts {
		if host, ok := want[m.ContainerPath]; ok {
			found++
			if m.HostPath != host || (m.ContainerPath == "/cfg") != m.Readonly {
				t.Errorf("mount %s: host %s readonly %v", m.ContainerPath, m.HostPath, m.Readonly)
			}
		}
	}
	if found != 2 {
		t.Fatalf("mounts %v", mounts)
	}
	for _, reason := range []string{"Pulled", "Created", "Started"} {
		if !rec.has(reason) {
			t.Errorf("no %s event: %v", reason, rec.events)
		}
	}
}

func TestVolumeState(t *testing.T) {
	paths := map[string]string{"data": "/var/lib/x/data"}
	type step struct {
		op        string // ready, answer, fail
		wired     bool   // ready: a VolumeActor is wired
		volumes   int    // ready: the pod's volumes
		paths     map[string]string
		wantReady bool
		wantAsk   bool
		wantTaken bool // answer, fail: the answer was waited for
	}
	ask := step{op: "ready", wired: true, volumes: 1}
	tests := []struct {
		name      string
		steps     []step
		wantPaths map[string]string
	}{
		{name: "no VolumeActor: ready, nothing asked", steps: []step{{op: "ready", volumes: 2, wantReady: true}}},
		{name: "no volumes: ready, nothing asked", steps: []step{{op: "ready", wired: true, wantReady: true}}},
		{name: "volumes: not ready, ask", steps: []step{{op: "ready", wired: true, volumes: 1, wantAsk: true}}},
		{
			name:  "asked once while the answer is pending",
			steps: []step{{op: "ready", wired: true, volumes: 1, wantAsk: true}, ask, ask},
		},
		{
			name: "answered: ready with the paths, asked no more",
			steps: []step{{op: "ready", wired: true, volumes: 1, wantAsk: true},
				{op: "answer", paths: paths, wantTaken: true}, {op: "ready", wired: true, volumes: 1, wantReady: true}},
			wantPaths: paths,
		},
		{
			name: "answered with a failure: paths stay nil, asked again",
			steps: []step{{op: "ready", wired: true, volumes: 1, wantAsk: true},
				{op: "fail", paths: paths, wantTaken: true}, {op: "ready", wired: true, volumes: 1, wantAsk: true}, ask},
		},
		{
			name:  "an answer nobody waits for is dropped",
			steps: []step{{op: "answer", paths: paths}, {op: "ready", wired: true, volumes: 1, wantAsk: true}},
		},
		{
			name: "a second answer to one ask is dropped",
			steps: []step{{op: "ready", wired: true, volumes: 1, wantAsk: true},
				{op: "fail", wantTaken: true}, {op: "answer", paths: paths}},
		},
		{
			name: "a success with no paths is ready too",
			steps: []step{{op: "ready", wired: true, volumes: 1, wantAsk: true},
				{op: "answer", wantTaken: true}, {op: "ready", wired: true, volumes: 1, wantReady: true}},
			wantPaths: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v volumeState
			for i, s := range tt.steps {
				switch s.op {
				case "ready":
					ready, ask := v.ready(s.wired, s.volumes)
					if ready != s.wantReady || ask != s.wantAsk {
						t.Fatalf("step %d: ready = %v ask %v, want %v %v", i, ready, ask, s.wantReady, s.wantAsk)
					}
				case "answer", "fail":
					if got := v.answered(s.paths, s.op == "fail"); got != s.wantTaken {
						t.Fatalf("step %d: answered = %v, want %v", i, got, s.wantTaken)
					}
				}
			}
			if (v.paths == nil) != (tt.wantPaths == nil) || len(v.paths) != len(tt.wantPaths) {
				t.Fatalf("paths %v, want %v", v.paths, tt.wantPaths)
			}
			for k, p := range tt.wantPaths {
				if v.paths[k] != p {
					t.Errorf("paths %v, want %v", v.paths, tt.wantPaths)
				}
			}
		})
	}
}

// A VolumeActor that loses a request (it restarted with the request in its
// mailbox) does not leave the pod waiting for good: the periodic look asks
// again.
func TestLostVolumeRequestIsAskedAgain(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	var mu sync.Mutex
	asks := 0
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Volumes = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*messages.EnsureVolumes); ok {
				mu.Lock()
				defer mu.Unlock()
				asks++
				if asks == 1 {
					return // lost
				}
				c.Send(m.ReplyTo, &messages.VolumesReady{UID: m.Pod.UID, Paths: map[string]string{"data": "/var/lib/x/data"}})
			}
		}))
	})
	h.waitFor("the first request", func() bool { mu.Lock(); defer mu.Unlock(); return asks == 1 })
	h.sync()
	if h.rt.Count("CreateContainer") != 0 {
		t.Fatal("container created before its volumes")
	}
	h.clk.Step(time.Minute) // the periodic look
	h.waitStatus("Running", running)
	mu.Lock()
	defer mu.Unlock()
	if asks != 2 {
		t.Fatalf("EnsureVolumes sent %d times, want 2", asks)
	}
}

// A running pod's labels change: the VolumeActor is asked to rewrite its
// downward API files (Refresh), without a reply to wait for; an update that
// leaves labels and annotations alone asks nothing.
func TestMetadataChangeRefreshesDownwardAPIVolumes(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Labels = map[string]string{"a": "1"}
	p.Spec.Volumes = []v1.Volume{{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "podinfo", MountPath: "/etc/podinfo"}}
	var mu sync.Mutex
	var asks []*messages.EnsureVolumes
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Volumes = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*messages.EnsureVolumes); ok {
				mu.Lock()
				asks = append(asks, m)
				mu.Unlock()
				if m.ReplyTo != nil {
					c.Send(m.ReplyTo, &messages.VolumesReady{UID: m.Pod.UID, Paths: map[string]string{"podinfo": "/var/lib/x/podinfo"}})
				}
			}
		}))
	})
	h.waitStatus("Running", running)
	same := p.DeepCopy()
	same.Spec.ActiveDeadlineSeconds = nil // an update with the same metadata
	same.ResourceVersion = "2"
	h.sys.Root.Send(h.childPID(), &messages.SyncPod{Pod: same})
	relabelled := same.DeepCopy()
	relabelled.Labels = map[string]string{"a": "2"}
	h.sys.Root.Send(h.childPID(), &messages.SyncPod{Pod: relabelled})
	h.waitFor("a refresh", func() bool { mu.Lock(); defer mu.Unlock(); return len(asks) == 2 })
	h.sync()
	mu.Lock()
	defer mu.Unlock()
	if len(asks) != 2 {
		t.Fatalf("EnsureVolumes sent %d times, want 2 (setup, refresh)", len(asks))
	}
	r := asks[1]
	if !r.Refresh || r.ReplyTo != nil || r.Pod.Labels["a"] != "2" {
		t.Fatalf("refresh = %+v (labels %v), want Refresh with the new labels and no reply", r, r.Pod.Labels)
	}
	if h.rt.Count("CreateContainer") != 1 {
		t.Fatalf("CreateContainer %d times: a label change restarted the container", h.rt.Count("CreateContainer"))
	}
}
