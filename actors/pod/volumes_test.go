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
	if h.rt.count("CreateContainer") != 0 {
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
	mounts := h.rt.list()[0].Mounts
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
