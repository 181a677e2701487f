package pod

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/podspec"
)

const oomTestCapacity = int64(4) << 30 // the machine's memory: 4Gi

// newOOMHarness runs pod on a machine of oomTestCapacity bytes of memory,
// with a fake CgroupActor as the resize tests.
func newOOMHarness(t *testing.T, pod *v1.Pod) *resizeHarness {
	t.Helper()
	rh := &resizeHarness{events: &eventRec{}, metrics: newResizeMetrics()}
	rh.harness = newHarnessSys(t, pod, func(sys *actor.ActorSystem, d *Deps) {
		d.Config.MemoryCapacity = oomTestCapacity
		rh.cg = &fakeCgroups{rt: d.Runtime.(*fakecri.Runtime)}
		d.Cgroups = sys.Root.Spawn(actor.PropsFromFunc(rh.cg.receive))
		d.Events = rh.events
		d.Metrics = rh.metrics
	})
	return rh
}

func (h *resizeHarness) appConfigOOM() int64 {
	cfg := h.rt.ContainerConfig(h.appID())
	if cfg == nil {
		h.t.Fatal("no config for the app container")
	}
	return cfg.GetLinux().GetResources().GetOomScoreAdj()
}

// The container is created with upstream's OOM score adjustment for the
// machine's capacity, and a resize sends it with every update (the
// allocation's, as upstream's UpdateContainerResources): unchanged when
// the memory request is, the new request's when it changes.
func TestOOMScoreAdjCreateAndResize(t *testing.T) {
	before := res("100m", "200m", "1Gi", "2Gi") // Burstable: 1000 - 1000*1/4 = 750
	pod := resizePod(before)
	h := newOOMHarness(t, pod)
	h.waitStatus("running", matches(before))
	if got := h.appConfigOOM(); got != 750 {
		t.Fatalf("created with oom_score_adj %d, want 750", got)
	}

	// CPU and memory limit resized, memory request unchanged: 750 kept.
	cpuOnly := res("200m", "400m", "1Gi", "3Gi")
	p2 := resized(pod, cpuOnly)
	h.syncPod(p2)
	h.waitStatus("resized", matches(cpuOnly))
	ups := h.rt.Updates()
	if len(ups) != 2 {
		t.Fatalf("updates %+v, want memory then cpu", ups)
	}
	for _, u := range ups {
		if u.Resources.GetOomScoreAdj() != 750 {
			t.Fatalf("update %+v lost the oom_score_adj (want 750)", u.Resources)
		}
	}

	// The memory request doubles (with the limit, so that the runtime is
	// updated): 1000 - 1000*2/4 = 500 from then on.
	memReq := res("200m", "400m", "2Gi", "3500Mi")
	h.syncPod(resized(p2, memReq))
	h.waitStatus("memory request resized", matches(memReq))
	ups = h.rt.Updates()
	if len(ups) != 3 || ups[2].Resources.GetOomScoreAdj() != 500 || ups[2].Resources.GetMemoryLimitInBytes() != 3500<<20 {
		t.Fatalf("updates %+v, want a third (memory 3500Mi, the new request's oom_score_adj 500)", ups)
	}
}

// A Guaranteed pod's container gets -997, a BestEffort one 1000.
func TestOOMScoreAdjQOS(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    v1.ResourceRequirements
		want int64
	}{
		{"guaranteed", res("100m", "100m", "64Mi", "64Mi"), -997},
		{"besteffort", v1.ResourceRequirements{}, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newOOMHarness(t, resizePod(tc.r))
			h.waitFor("app running", func() bool { return h.appID() != "" })
			if got := h.appConfigOOM(); got != tc.want {
				t.Fatalf("oom_score_adj %d, want %d", got, tc.want)
			}
		})
	}
}

// The status of a BestEffort container carries empty (not nil) resources
// and no allocated resources; one that requests ephemeral-storage reports
// it in both, as upstream (the allocated container's resources).
func TestStatusResourcesBestEffortAndEphemeral(t *testing.T) {
	h := newOOMHarness(t, resizePod(v1.ResourceRequirements{}))
	st := h.waitStatus("best-effort running", func(st *v1.PodStatus) bool {
		return running(st) && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil
	})
	cs := st.ContainerStatuses[0]
	if cs.Resources == nil || cs.Resources.Requests != nil || cs.Resources.Limits != nil || cs.AllocatedResources != nil {
		t.Fatalf("best-effort status resources %+v, allocated %v: want empty, nil", cs.Resources, cs.AllocatedResources)
	}

	r := res("100m", "", "64Mi", "")
	r.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("1")
	r.Limits = nil
	h2 := newOOMHarness(t, resizePod(r))
	st = h2.waitStatus("burstable running", func(st *v1.PodStatus) bool {
		return running(st) && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].Resources != nil
	})
	cs = st.ContainerStatuses[0]
	if !podspec.SameResourceLists(cs.Resources.Requests, r.Requests) || cs.Resources.Limits != nil ||
		!podspec.SameResourceLists(cs.AllocatedResources, r.Requests) {
		t.Fatalf("status resources %+v, allocated %v: want the requests %v (ephemeral-storage included), no limits",
			cs.Resources, cs.AllocatedResources, r.Requests)
	}
	// The runtime holds shares for the request, no quota: nothing else.
	if lr := h2.appResources(); lr.GetCpuQuota() > 0 || lr.GetCpuShares() != 102 {
		t.Fatalf("runtime holds %+v", lr)
	}
}
