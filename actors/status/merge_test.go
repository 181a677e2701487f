package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

func TestMergedKeepsConditionsOthersOwn(t *testing.T) {
	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue}
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	notReady := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "NodeNotReady"}
	ourDisruption := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet"}
	theirDisruption := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"}
	tests := []struct {
		name    string
		desired []v1.PodCondition
		api     []v1.PodCondition
		want    []v1.PodCondition
	}{
		{name: "a readiness gate's condition is kept", desired: []v1.PodCondition{ready}, api: []v1.PodCondition{gate, notReady}, want: []v1.PodCondition{gate, ready}},
		{name: "our own conditions replace the API's", desired: []v1.PodCondition{ready}, api: []v1.PodCondition{notReady}, want: []v1.PodCondition{ready}},
		{name: "a DisruptionTarget set by others is kept", desired: []v1.PodCondition{ready}, api: []v1.PodCondition{theirDisruption}, want: []v1.PodCondition{theirDisruption, ready}},
		{name: "our DisruptionTarget wins", desired: []v1.PodCondition{ourDisruption}, api: []v1.PodCondition{theirDisruption}, want: []v1.PodCondition{ourDisruption}},
		{name: "nothing in the API", desired: []v1.PodCondition{ready}, want: []v1.PodCondition{ready}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := merged(&v1.PodStatus{Conditions: tc.desired}, &v1.PodStatus{Conditions: tc.api})
			if len(got.Conditions) != len(tc.want) {
				t.Fatalf("conditions %+v, want %+v", got.Conditions, tc.want)
			}
			for i := range tc.want {
				if got.Conditions[i].Type != tc.want[i].Type || got.Conditions[i].Reason != tc.want[i].Reason {
					t.Fatalf("conditions %+v, want %+v", got.Conditions, tc.want)
				}
			}
		})
	}
}

// TestWriterKeepsReadinessGateConditions: a readiness gate's condition,
// set in the API by someone else, survives the node's next status write
// (the patch is computed from what the API holds: without the merge it
// deleted the condition), and its arrival alone writes nothing.
func TestWriterKeepsReadinessGateConditions(t *testing.T) {
	h := newWriterHarness(t)
	p := apiPodWith("a", "uid-a", v1.PodPending)
	p.ResourceVersion = "10"
	h.api.pods["default/a"] = p
	ours := apiPodWith("a", "uid-a", v1.PodRunning)
	ours.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReasonGatesForTest}}
	h.update(ours)
	h.waitFor("Running written", func() bool { return h.api.count("patch a Running") == 1 })

	gated := h.api.get("a").Status.DeepCopy()
	gated.Conditions = append(gated.Conditions, v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue})
	h.api.mu.Lock()
	h.api.pods["default/a"].Status = *gated.DeepCopy()
	h.api.pods["default/a"].ResourceVersion = "12"
	h.api.mu.Unlock()
	h.sys.Root.Send(h.pid, &messages.PodAPIStatus{UID: "uid-a", ResourceVersion: "12", Status: gated})
	_ = h.sys.Root.RequestFuture(h.pid, &messages.GetPods{}, time.Second).Wait()
	if n := h.api.count("patch a"); n != 1 {
		t.Fatalf("%d patches after the gate's condition arrived, want 1 (it is not ours to write)", n)
	}

	ready := apiPodWith("a", "uid-a", v1.PodRunning)
	ready.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	h.update(ready)
	h.waitFor("Ready written", func() bool { return h.api.count("patch a Running") == 2 })
	got := h.api.get("a").Status.Conditions
	if len(got) != 2 || got[0].Type != "example.com/gate" || got[1].Type != v1.PodReady || got[1].Status != v1.ConditionTrue {
		t.Fatalf("conditions in the API %+v, want the gate's kept and Ready=True", got)
	}
}

const ReasonGatesForTest = "ReadinessGatesNotReady"

// The claim statuses kube-controller-manager writes are not the node's:
// a status the node computes keeps the API's (NodeRestriction refuses a
// node's patch that changes them: "node cannot update resource claim
// statues").
func TestMergedKeepsTheClaimStatusesOfTheAPI(t *testing.T) {
	name := "pod-dev-x7k2p"
	api := &v1.PodStatus{
		ResourceClaimStatuses:       []v1.PodResourceClaimStatus{{Name: "dev", ResourceClaimName: &name}},
		ExtendedResourceClaimStatus: &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "pod-extended-resources-abc"},
		Conditions:                  []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}},
	}
	desired := &v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	got := merged(desired, api)
	if len(got.ResourceClaimStatuses) != 1 || *got.ResourceClaimStatuses[0].ResourceClaimName != name ||
		got.ExtendedResourceClaimStatus == nil || got.ExtendedResourceClaimStatus.ResourceClaimName != "pod-extended-resources-abc" {
		t.Fatalf("merged claim statuses %+v %+v, want the API's", got.ResourceClaimStatuses, got.ExtendedResourceClaimStatus)
	}
	if got.Phase != v1.PodRunning || len(got.Conditions) != 1 || got.Conditions[0].Status != v1.ConditionTrue {
		t.Fatalf("merged %+v: the node's own fields lost", got)
	}
	if desired.ResourceClaimStatuses != nil {
		t.Fatal("merged changed the desired status it was given")
	}
}
