package node

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

const lowMemory = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "

// evictRig runs a NodeActor whose PodActors record what they are sent
// (whole messages) and end on command, with a StatusActor and an
// EvictionActor stub.
type evictRig struct {
	t      *testing.T
	sys    *actor.ActorSystem
	node   *actor.PID
	status *actor.PID

	mu       sync.Mutex
	got      map[types.UID][]any // what each pod's actors got
	actors   map[types.UID]*actor.PID
	updates  map[types.UID]*v1.Pod // newest PodStatusUpdate
	forgets  []*messages.PodForget
	asked    int // GetNodePressure
	pressure messages.NodePressure
}

// finish makes a stub PodActor report PodTerminated with status.
type finish struct{ status *v1.PodStatus }

func newEvictRig(t *testing.T, pressure messages.NodePressure) *evictRig {
	t.Helper()
	r := &evictRig{t: t, got: map[types.UID][]any{}, actors: map[types.UID]*actor.PID{}, updates: map[types.UID]*v1.Pod{}, pressure: pressure}
	r.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	barrier := actor.WithReceiverMiddleware(actortest.Barrier())
	r.status = r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch m := c.Message().(type) {
		case *messages.PodStatusUpdate:
			r.updates[m.Pod.UID] = m.Pod
		case *messages.PodForget:
			r.forgets = append(r.forgets, m)
		}
	}, barrier))
	eviction := r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.GetNodePressure); ok {
			r.mu.Lock()
			r.asked++
			p := r.pressure
			r.mu.Unlock()
			c.Send(m.ReplyTo, &p)
		}
	}))
	podProps := func(uid types.UID) *actor.Props {
		// Registered inside the NodeActor's SpawnNamed: a test that syncs
		// with the NodeActor knows every PodActor it made.
		register := actor.WithOnInit(func(c actor.Context) {
			r.mu.Lock()
			r.actors[uid] = c.Self()
			r.mu.Unlock()
		})
		return actor.PropsFromFunc(func(c actor.Context) {
			switch m := c.Message().(type) {
			case *actor.Stopping:
				r.mu.Lock()
				if r.actors[uid].Equal(c.Self()) {
					r.actors[uid] = nil
				}
				r.mu.Unlock()
			case *messages.SyncPod, *messages.KillPod, *messages.Resync:
				r.mu.Lock()
				r.got[uid] = append(r.got[uid], m)
				r.mu.Unlock()
			case finish:
				c.Send(c.Parent(), &messages.PodTerminated{UID: uid, Status: m.status})
			case needPod:
				c.Send(c.Parent(), &messages.NeedPod{UID: uid})
			}
		}, barrier, register)
	}
	cfg := Config{NodeName: "n1", Sources: []string{messages.SourceAPI}, Eviction: eviction}
	r.node = r.sys.Root.Spawn(actor.PropsFromProducer(New(cfg, r.status, podProps, nil, quiet), barrier))
	t.Cleanup(func() { r.sys.Root.Stop(r.node) })
	return r
}

func (r *evictRig) send(m any) {
	r.sys.Root.Send(r.node, m)
	actortest.Sync(r.t, r.sys, r.node)
}

// tell gives an order to uid's PodActor and waits until the NodeActor
// handled what it sent.
func (r *evictRig) tell(uid types.UID, m any) {
	r.t.Helper()
	r.mu.Lock()
	pid := r.actors[uid]
	r.mu.Unlock()
	if pid == nil {
		r.t.Fatalf("no pod actor for %s", uid)
	}
	r.sys.Root.Send(pid, m)
	actortest.Sync(r.t, r.sys, pid)
	actortest.Sync(r.t, r.sys, r.node)
}

// received lists what uid's PodActors got, as "SyncPod", "KillPod
// evicted grace=0 <message>", "Resync".
func (r *evictRig) received(uid types.UID) []string {
	r.t.Helper()
	r.mu.Lock()
	pid := r.actors[uid]
	r.mu.Unlock()
	if pid != nil {
		actortest.Sync(r.t, r.sys, pid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.got[uid] {
		switch m := m.(type) {
		case *messages.SyncPod:
			out = append(out, "SyncPod")
		case *messages.KillPod:
			s := "KillPod"
			if m.Evicted {
				s += " evicted"
			}
			if m.GracePeriod != nil {
				s += fmt.Sprintf(" grace=%d", *m.GracePeriod)
			}
			out = append(out, s+" "+m.Message)
		case *messages.Resync:
			out = append(out, "Resync")
		}
	}
	return out
}

func (r *evictRig) statusOf(uid types.UID) *v1.Pod {
	actortest.Sync(r.t, r.sys, r.status)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updates[uid]
}

func (r *evictRig) forgotten(uid types.UID) bool {
	actortest.Sync(r.t, r.sys, r.status)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.forgets {
		if f.UID == uid {
			return true
		}
	}
	return false
}

// finish has uid's PodActor report PodTerminated with status and waits
// until the NodeActor stopped it.
func (r *evictRig) finish(uid types.UID, status *v1.PodStatus) {
	r.t.Helper()
	r.mu.Lock()
	pid := r.actors[uid]
	r.mu.Unlock()
	r.sys.Root.Send(pid, finish{status: status})
	actortest.Eventually(r.t, "the pod actor stopped", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.actors[uid] == nil
	})
	actortest.Sync(r.t, r.sys, r.node)
}

func evictedFinal() *v1.PodStatus {
	return &v1.PodStatus{Phase: v1.PodFailed, Reason: messages.ReasonEvicted, Message: lowMemory,
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown"}}}}}
}

func TestEvictedPodStaysFailedAndIsNotRunAgain(t *testing.T) {
	for _, source := range []string{messages.SourceAPI, messages.SourceFile} {
		t.Run(source, func(t *testing.T) {
			r := newEvictRig(t, messages.NodePressure{})
			p := mkPod("a", "img:1")
			r.send(set(source, p))
			if source != messages.SourceAPI {
				r.send(set(messages.SourceAPI))
			}
			zero := int64(0)
			r.send(&messages.EvictPod{UID: "a", GracePeriod: &zero, Message: lowMemory, Signal: "memory.available"})
			want := []string{"SyncPod", "KillPod evicted grace=0 " + lowMemory}
			if got := r.received("a"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("pod actor received %q, want %q", got, want)
			}
			// A second eviction of the same pod is not a second kill.
			r.send(&messages.EvictPod{UID: "a", GracePeriod: &zero, Message: lowMemory, Signal: "memory.available"})
			r.finish("a", evictedFinal())
			if r.forgotten("a") {
				t.Fatal("the evicted pod's status was forgotten: it must stay Failed")
			}
			// Its source still wants it: it is not run again.
			r.send(set(source, p))
			if got := r.received("a"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the source sent it again the pod received %q, want no more than %q", got, want)
			}
			// A restarted StatusActor gets its final status again.
			r.send(&messages.Resync{Ask: 1})
			st := r.statusOf("a")
			if st == nil || st.Status.Phase != v1.PodFailed || st.Status.Reason != messages.ReasonEvicted || st.Status.Message != lowMemory {
				t.Fatalf("republished status %+v, want Failed/Evicted", st)
			}
			if cs := st.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
				t.Errorf("republished containers %+v, want the PodActor's final ones", cs)
			}
			// Dropped by its source: forgotten.
			r.send(set(source))
			if !r.forgotten("a") {
				t.Error("the evicted pod was not forgotten once its source dropped it")
			}
		})
	}
}

func TestEvictedPodWithoutAFinalStatusIsFailedEvicted(t *testing.T) {
	r := newEvictRig(t, messages.NodePressure{})
	r.send(set(messages.SourceAPI, mkPod("a", "img:1")))
	r.send(&messages.EvictPod{UID: "a", Message: lowMemory, Signal: "memory.available"})
	r.finish("a", nil) // a PodActor that had no pod to publish
	st := r.statusOf("a")
	if st == nil || st.Status.Phase != v1.PodFailed || st.Status.Reason != messages.ReasonEvicted || st.Status.Message != lowMemory {
		t.Fatalf("status %+v, want Failed/Evicted with the message", st)
	}
	if len(st.Status.Conditions) != 1 || st.Status.Conditions[0].Type != v1.DisruptionTarget ||
		st.Status.Conditions[0].Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("conditions %+v, want DisruptionTarget/TerminationByKubelet", st.Status.Conditions)
	}
}

func TestEvictedPodDeletedMeanwhileIsDeleted(t *testing.T) {
	r := newEvictRig(t, messages.NodePressure{})
	p := mkPod("a", "img:1")
	r.send(set(messages.SourceAPI, p))
	r.send(&messages.EvictPod{UID: "a", Message: lowMemory, Signal: "memory.available"})
	deleted := p.DeepCopy()
	now := metav1.NewTime(time.Unix(1000, 0))
	zero := int64(0)
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, &zero
	r.send(set(messages.SourceAPI, deleted))
	got := r.received("a")
	if last := got[len(got)-1]; last != "KillPod evicted grace=0 "+lowMemory {
		t.Fatalf("the deletion's kill %q lost the eviction", last)
	}
	r.finish("a", evictedFinal())
	actortest.Sync(t, r.sys, r.status)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.forgets) != 1 || !r.forgets[0].DeleteFromAPI {
		t.Fatalf("forgets %+v, want the final delete from the API server", r.forgets)
	}
}

func TestRestartedPodActorOfAnEvictedPodGetsItsPodFirst(t *testing.T) {
	r := newEvictRig(t, messages.NodePressure{})
	r.send(set(messages.SourceAPI, mkPod("a", "img:1")))
	r.send(&messages.EvictPod{UID: "a", Message: lowMemory, Signal: "memory.available"})
	r.tell("a", needPod{})
	got := r.received("a")
	want := []string{"SyncPod", "KillPod evicted " + lowMemory, "SyncPod", "KillPod evicted " + lowMemory}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("received %q, want %q", got, want)
	}
}

func TestAdmissionUnderPressure(t *testing.T) {
	bestEffort := func(uid string) *v1.Pod { return mkPod(uid, "img:1") }
	burstable := func(uid string) *v1.Pod {
		p := mkPod(uid, "img:1")
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
		return p
	}
	critical := func(uid string) *v1.Pod {
		p := mkPod(uid, "img:1")
		prio := podspec.SystemCriticalPriority
		p.Spec.Priority = &prio
		return p
	}
	mirror := func(uid string) *v1.Pod {
		p := mkPod(uid, "img:1")
		p.Annotations = map[string]string{podspec.ConfigMirrorAnnotation: "x"}
		return p
	}
	tolerating := func(uid string) *v1.Pod {
		p := mkPod(uid, "img:1")
		p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
		return p
	}
	memory := messages.NodePressure{Memory: true}
	disk := messages.NodePressure{Disk: true}
	both := messages.NodePressure{Memory: true, Disk: true}
	pid := messages.NodePressure{PID: true}
	for _, tc := range []struct {
		name     string
		pressure messages.NodePressure
		pod      *v1.Pod
		source   string
		msg      string // "" admitted
	}{
		{name: "no pressure", pod: bestEffort("a"), source: messages.SourceAPI},
		{name: "memory: best effort refused", pressure: memory, pod: bestEffort("a"), source: messages.SourceAPI, msg: "The node had condition: [MemoryPressure]. "},
		{name: "memory: burstable admitted", pressure: memory, pod: burstable("a"), source: messages.SourceAPI},
		{name: "memory: best effort tolerating the taint admitted", pressure: memory, pod: tolerating("a"), source: messages.SourceAPI},
		{name: "memory: critical admitted", pressure: memory, pod: critical("a"), source: messages.SourceAPI},
		{name: "memory: static admitted", pressure: memory, pod: bestEffort("a"), source: messages.SourceFile},
		{name: "disk: burstable refused", pressure: disk, pod: burstable("a"), source: messages.SourceAPI, msg: "The node had condition: [DiskPressure]. "},
		{name: "disk: tolerating memory pressure refused", pressure: disk, pod: tolerating("a"), source: messages.SourceAPI, msg: "The node had condition: [DiskPressure]. "},
		{name: "disk: mirror admitted", pressure: disk, pod: mirror("a"), source: messages.SourceAPI},
		{name: "disk: static admitted", pressure: disk, pod: burstable("a"), source: messages.SourceURL},
		{name: "disk: pushed refused (not static)", pressure: disk, pod: burstable("a"), source: messages.SourcePush, msg: "The node had condition: [DiskPressure]. "},
		{name: "memory and disk: burstable refused", pressure: both, pod: burstable("a"), source: messages.SourceAPI, msg: "The node had condition: [MemoryPressure DiskPressure]. "},
		{name: "pid: burstable refused", pressure: pid, pod: burstable("a"), source: messages.SourceAPI, msg: "The node had condition: [PIDPressure]. "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nodeStatus{pressure: tc.pressure}
			reason, msg := n.admitPressure(tc.pod, tc.source)
			if msg != tc.msg || (msg != "") != (reason == messages.ReasonEvicted) {
				t.Errorf("admission = %q %q, want %q", reason, msg, tc.msg)
			}
		})
	}
}

func TestPressureFromTheEvictionActorRefusesPods(t *testing.T) {
	r := newEvictRig(t, messages.NodePressure{Memory: true})
	actortest.Eventually(t, "the pressure asked at start", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.asked == 1
	})
	r.send(set(messages.SourceAPI, mkPod("a", "img:1")))
	st := r.statusOf("a")
	if st == nil || st.Status.Phase != v1.PodFailed || st.Status.Reason != messages.ReasonEvicted ||
		st.Status.Message != "The node had condition: [MemoryPressure]. " {
		t.Fatalf("status %+v, want the BestEffort pod refused (Failed/Evicted)", st)
	}
	if got := r.received("a"); len(got) != 0 {
		t.Fatalf("a refused pod's actor got %q", got)
	}
	// The pressure ends: the next pod is admitted.
	r.send(&messages.NodePressure{})
	r.send(set(messages.SourceAPI, mkPod("a", "img:1"), mkPod("b", "img:1")))
	if got := r.received("b"); fmt.Sprint(got) != "[SyncPod]" {
		t.Fatalf("b received %q, want it run", got)
	}
}
