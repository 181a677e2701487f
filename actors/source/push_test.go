package source

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// step is one request to the push source and what should follow.
type step struct {
	msg        any
	wantResult messages.PushResult
	wantSent   string // describe() of what the node receives for this step
}

func request(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, msg any) messages.PushResult {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, msg, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("request %T: %v", msg, err)
	}
	r, ok := res.(*messages.PushResult)
	if !ok {
		t.Fatalf("reply %T, want *PushResult", res)
	}
	return *r
}

func TestPush(t *testing.T) {
	a, a2, b := pod("a", "uid-a"), pod("a", "uid-a2"), pod("b", "uid-b")
	aUpdated := a.DeepCopy()
	aUpdated.Spec.Containers[0].Image = "busybox:2"
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "add", steps: []step{
			{msg: &messages.PushPod{Pod: a}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
		}},
		{name: "the same pod again is unchanged and sends nothing", steps: []step{
			{msg: &messages.PushPod{Pod: a}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
			{msg: &messages.PushPod{Pod: a.DeepCopy()}, wantResult: messages.PushResult{UID: "uid-a", Name: "a", Existed: true, Unchanged: true}},
			{msg: &messages.PushPod{Pod: a.DeepCopy(), Replace: true}, wantResult: messages.PushResult{UID: "uid-a", Name: "a", Existed: true, Unchanged: true}},
			// A pod pushed next is the only thing the node gets: the steps
			// before sent nothing (the same sender's messages keep their order).
			{msg: &messages.PushPod{Pod: b}, wantResult: messages.PushResult{UID: "uid-b", Name: "b"}, wantSent: "push ADD [b]; "},
		}},
		{name: "another spec under the name is a conflict and changes nothing", steps: []step{
			{msg: &messages.PushPod{Pod: a}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
			{msg: &messages.PushPod{Pod: aUpdated}, wantResult: messages.PushResult{UID: "uid-a", Name: "a", Existed: true, Conflict: true}},
			{msg: &messages.PushPod{Pod: a2}, wantResult: messages.PushResult{UID: "uid-a", Name: "a", Existed: true, Conflict: true}},
			// Still the first pod: pushing it again is unchanged.
			{msg: &messages.PushPod{Pod: a.DeepCopy()}, wantResult: messages.PushResult{UID: "uid-a", Name: "a", Existed: true, Unchanged: true}},
			// A pod pushed next is the only thing the node gets: the steps
			// before sent nothing (the same sender's messages keep their order).
			{msg: &messages.PushPod{Pod: b}, wantResult: messages.PushResult{UID: "uid-b", Name: "b"}, wantSent: "push ADD [b]; "},
		}},
		{name: "replace with the same uid is one add", steps: []step{
			{msg: &messages.PushPod{Pod: a}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
			{msg: &messages.PushPod{Pod: aUpdated, Replace: true}, wantResult: messages.PushResult{UID: "uid-a", Name: "a", Existed: true}, wantSent: "push ADD [a]; "},
		}},
		{name: "replace with another uid removes the old one first", steps: []step{
			{msg: &messages.PushPod{Pod: a}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
			{msg: &messages.PushPod{Pod: a2, Replace: true}, wantResult: messages.PushResult{UID: "uid-a2", Name: "a", Existed: true}, wantSent: "push REMOVE [a]; push ADD [a]; "},
		}},
		{name: "replace of a name not pushed creates it", steps: []step{
			{msg: &messages.PushPod{Pod: a, Replace: true}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
		}},
		{name: "remove", steps: []step{
			{msg: &messages.PushPod{Pod: a}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
			{msg: &messages.PushPod{Pod: b}, wantResult: messages.PushResult{UID: "uid-b", Name: "b"}, wantSent: "push ADD [b]; "},
			{msg: &messages.RemovePushedPod{Namespace: "default", Name: "a"}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push REMOVE [a]; "},
			{msg: &messages.RemovePushedPod{Namespace: "default", Name: "a"}, wantResult: messages.PushResult{Name: "a", NotFound: true}},
		}},
		{name: "not found", steps: []step{
			{msg: &messages.RemovePushedPod{Namespace: "default", Name: "x"}, wantResult: messages.PushResult{Name: "x", NotFound: true}},
		}},
		{name: "other namespace is another pod", steps: []step{
			{msg: &messages.PushPod{Pod: a}, wantResult: messages.PushResult{UID: "uid-a", Name: "a"}, wantSent: "push ADD [a]; "},
			{msg: &messages.RemovePushedPod{Namespace: "kube-system", Name: "a"}, wantResult: messages.PushResult{Name: "a", NotFound: true}},
		}},
		{name: "pod without uid is refused", steps: []step{
			{msg: &messages.PushPod{Pod: pod("z", "")}, wantResult: messages.PushResult{Err: "pod with a name and a UID is required"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys, rec, node := newSystem(t)
			pid := sys.Root.Spawn(actor.PropsFromProducer(NewPush(node, "n1", quietLog())))
			defer sys.Root.Stop(pid)
			actortest.Eventually(t, "synced", func() bool { return len(rec.snapshot()) == 1 })
			if got := describe(rec.snapshot()); got != "synced push; " {
				t.Fatalf("on start: %s", got)
			}
			for i, s := range tt.steps {
				before := len(rec.snapshot())
				if got := request(t, sys, pid, s.msg); got != s.wantResult {
					t.Fatalf("step %d: result %+v, want %+v", i, got, s.wantResult)
				}
				// The node messages are sent before the reply, from the same
				// actor, so they are already delivered or in the node's mailbox.
				want := s.wantSent
				actortest.Eventually(t, "node messages", func() bool { return describe(rec.snapshot()[before:]) == want || want == "" })
				if got := describe(rec.snapshot()[before:]); got != want {
					t.Fatalf("step %d: node got %q, want %q", i, got, want)
				}
			}
		})
	}
}

type crash struct{}

func TestPushSurvivesRestart(t *testing.T) {
	sys, rec, node := newSystem(t)
	panicOnCrash := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*crash); ok {
				panic("test crash")
			}
			next(c, env)
		}
	}
	props := actor.PropsFromProducer(NewPush(node, "n1", quietLog()), actor.WithReceiverMiddleware(panicOnCrash))
	pid := sys.Root.Spawn(props)
	defer sys.Root.Stop(pid)
	request(t, sys, pid, &messages.PushPod{Pod: pod("a", "uid-a")})
	actortest.Eventually(t, "add", func() bool { return len(rec.snapshot()) == 2 })

	sys.Root.Send(pid, &crash{})
	actortest.Eventually(t, "resync after restart", func() bool { return len(rec.snapshot()) == 4 })
	if got := describe(rec.snapshot()[2:]); got != "push SET [a]; synced push; " {
		t.Fatalf("after restart node got %q", got)
	}
	if got := request(t, sys, pid, &messages.RemovePushedPod{Namespace: "default", Name: "a"}); got.NotFound || got.UID != "uid-a" {
		t.Fatalf("remove after restart: %+v", got)
	}
}

// TestSamePushedPod: one manifest pushed twice differs only in when it was
// seen; any other difference is another pod.
func TestSamePushedPod(t *testing.T) {
	a := pod("a", "uid-a")
	a.Annotations = map[string]string{configSeenAnnotation: "t1", "kubernetes.io/config.source": "push"}
	seenLater := a.DeepCopy()
	seenLater.Annotations[configSeenAnnotation] = "t2"
	notSeen := a.DeepCopy()
	delete(notSeen.Annotations, configSeenAnnotation)
	annotated := a.DeepCopy()
	annotated.Annotations["team"] = "x"
	labelled := a.DeepCopy()
	labelled.Labels = map[string]string{"app": "a"}
	otherUID := a.DeepCopy()
	otherUID.UID = "uid-a2"
	otherSpec := a.DeepCopy()
	otherSpec.Spec.Containers[0].Image = "busybox:2"
	for _, tt := range []struct {
		name string
		b    *v1.Pod
		want bool
	}{
		{"seen later", seenLater, true},
		{"not seen", notSeen, true},
		{"another annotation", annotated, false},
		{"a label", labelled, false},
		{"another uid", otherUID, false},
		{"another spec", otherSpec, false},
	} {
		if got := samePushedPod(a, tt.b); got != tt.want {
			t.Errorf("%s: samePushedPod = %v, want %v", tt.name, got, tt.want)
		}
	}
}
