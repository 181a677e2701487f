package eviction

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

func hardMemory(t *testing.T) []Threshold {
	return mustThresholds(t, map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
}

func TestPodAboveItsRequestIsEvictedBeforeGuaranteed(t *testing.T) {
	guaranteed := pod("guaranteed", "1Gi", "1Gi")
	burstable := pod("burstable", "100Mi", "")
	pods := []v1.Pod{guaranteed, burstable}
	// The guaranteed pod uses more memory, but within its request; the
	// burstable one uses more than it asked for.
	s := summary{memAvail: 50 * mi, memWorkingSet: 4 * gi, pods: []statsapi.PodStats{
		podMem(guaranteed, 900*mi), podMem(burstable, 300*mi),
	}}
	h := newHarness(t, hardMemory(t), s.build(), pods)

	out := h.evaluate()
	if out.Evicted != burstable.UID || out.Signal != "memory.available" {
		t.Fatalf("evicted %q for %q, want %q for memory.available", out.Evicted, out.Signal, burstable.UID)
	}
	ev := h.waitEvictions(burstable)
	wantMsg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. " +
		"Container app was using 300Mi, request is 100Mi, has larger consumption of memory. "
	if ev[0].UID != burstable.UID || ev[0].Message != wantMsg || ev[0].Signal != "memory.available" {
		t.Errorf("EvictPod = %+v, want the burstable pod with %q", ev[0], wantMsg)
	}
	if ev[0].GracePeriod == nil || *ev[0].GracePeriod != 0 {
		t.Errorf("grace period %v, want 0 for a hard threshold", ev[0].GracePeriod)
	}
	if !out.Pressure.Memory || out.Pressure.Disk || out.Pressure.PID {
		t.Errorf("pressure %+v, want memory only", out.Pressure)
	}
	var podEvent, nodeEvent bool
	for _, e := range h.rec.list() {
		if e.kind == "Pod" && e.name == "default/burstable" && e.eventtype == v1.EventTypeWarning && e.reason == "Evicted" && e.msg == wantMsg {
			podEvent = true
		}
		if e.kind == "Node" && e.reason == "EvictionThresholdMet" && e.msg == "Attempting to reclaim memory" {
			nodeEvent = true
		}
	}
	if !podEvent || !nodeEvent {
		t.Errorf("events %+v: want the pod's Warning Evicted and the node's EvictionThresholdMet", h.rec.list())
	}
	if got := h.metrics.count("memory.available"); got != 1 {
		t.Errorf("kubelet_evictions{eviction_signal=memory.available} = %d, want 1", got)
	}
}

func TestOneEvictionPerPassAndWaitForTheEvictedPod(t *testing.T) {
	a, b := pod("a", "", ""), pod("b", "", "")
	s := summary{memAvail: 10 * mi, memWorkingSet: 4 * gi, pods: []statsapi.PodStats{podMem(a, 500*mi), podMem(b, 400*mi)}}
	h := newHarness(t, hardMemory(t), s.build(), []v1.Pod{a, b})

	if out := h.evaluate(); out.Evicted != a.UID {
		t.Fatalf("first pass evicted %q, want the largest consumer %q", out.Evicted, a.UID)
	}
	// The evicted pod has not ended yet: the next pass evicts nothing.
	if out := h.evaluate(); out.Evicted != "" {
		t.Fatalf("evicted %q while the pod evicted before was still running", out.Evicted)
	}
	h.waitEvictions(a)
	// Once it ended (Failed), the still-starved node evicts the next one.
	h.setPhase(a.UID, v1.PodFailed)
	if out := h.evaluate(); out.Evicted != b.UID {
		t.Fatalf("after the first ended, evicted %q, want %q", out.Evicted, b.UID)
	}
	h.waitEvictions(a, b)
}

func TestEvictedPodThatDoesNotEndIsWaitedForBounded(t *testing.T) {
	a, b := pod("a", "", ""), pod("b", "", "")
	s := summary{memAvail: 10 * mi, memWorkingSet: 4 * gi, pods: []statsapi.PodStats{podMem(a, 500*mi), podMem(b, 400*mi)}}
	h := newHarness(t, hardMemory(t), s.build(), []v1.Pod{a, b})
	if out := h.evaluate(); out.Evicted != a.UID {
		t.Fatalf("evicted %q, want %q", out.Evicted, a.UID)
	}
	h.clk.Step(evictionWait - time.Second)
	h.evaluate()
	h.waitEvictions(a)
	h.clk.Step(time.Second)
	h.evaluate() // this pass or the period's evicts the next pod
	h.waitEvictions(a, b)
}

func TestRankingUnderMemoryPressure(t *testing.T) {
	low := withPriority(pod("low-within-request", "1Gi", ""), 0)
	high := withPriority(pod("high-above-request", "100Mi", ""), 1000)
	lowAbove := withPriority(pod("low-above-request", "100Mi", ""), 0)
	bigAbove := withPriority(pod("low-far-above-request", "100Mi", ""), 0)
	noStats := pod("no-stats", "", "")
	stats := statsOf(summary{pods: []statsapi.PodStats{
		podMem(low, 900*mi), podMem(high, 2*gi), podMem(lowAbove, 200*mi), podMem(bigAbove, 600*mi),
	}}.build())
	pods := []*v1.Pod{&low, &high, &lowAbove, &bigAbove, &noStats}
	rankPods(pods, SignalMemoryAvailable, stats, false)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	want := []string{"no-stats", "low-far-above-request", "low-above-request", "high-above-request", "low-within-request"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ranking %v, want %v", got, want)
	}
}

func TestRankingUnderPIDPressure(t *testing.T) {
	a := withPriority(pod("a", "", ""), 10)
	b := withPriority(pod("b", "", ""), 0)
	c := withPriority(pod("c", "", ""), 0)
	stats := statsOf(summary{pods: []statsapi.PodStats{podProcs(a, 1000), podProcs(b, 10), podProcs(c, 50)}}.build())
	pods := []*v1.Pod{&a, &b, &c}
	rankPods(pods, SignalPIDAvailable, stats, false)
	if got := pods[0].Name + pods[1].Name + pods[2].Name; got != "cba" {
		t.Errorf("ranking %s, want c b a (priority, then more processes)", got)
	}
}

func TestCriticalPodsAreNotEvicted(t *testing.T) {
	static := pod("static", "", "")
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	mirror := pod("mirror", "", "")
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": "abc"}
	critical := withPriority(pod("critical", "", ""), SystemCriticalPriority)
	api := pod("api", "", "")
	api.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
	s := summary{memAvail: 10 * mi, memWorkingSet: 4 * gi, pods: []statsapi.PodStats{
		podMem(static, 3*gi), podMem(mirror, 2*gi), podMem(critical, gi), podMem(api, 10*mi),
	}}
	h := newHarness(t, hardMemory(t), s.build(), []v1.Pod{static, mirror, critical, api})
	if out := h.evaluate(); out.Evicted != api.UID {
		t.Fatalf("evicted %q, want the only pod that is not critical (%q)", out.Evicted, api.UID)
	}
	h.setPhase(api.UID, v1.PodFailed)
	if out := h.evaluate(); out.Evicted != "" {
		t.Fatalf("evicted the critical pod %q", out.Evicted)
	}
	h.waitEvictions(api)
}

func TestSoftThresholdRespectsItsGracePeriod(t *testing.T) {
	ts := mustThresholds(t, nil, map[string]string{"memory.available": "500Mi"}, map[string]string{"memory.available": "1m"}, nil)
	a := pod("a", "", "")
	grace := int64(60)
	a.Spec.TerminationGracePeriodSeconds = &grace
	s := summary{memAvail: 300 * mi, memWorkingSet: 4 * gi, pods: []statsapi.PodStats{podMem(a, gi)}}
	h := newHarness(t, ts, s.build(), []v1.Pod{a}, func(c *Config, _ *harness) { c.MaxPodGracePeriodSeconds = 20 })

	out := h.evaluate()
	if out.Evicted != "" || !out.Pressure.Memory {
		t.Fatalf("at once: evicted %q, pressure %+v; want no eviction but MemoryPressure", out.Evicted, out.Pressure)
	}
	h.clk.Step(59 * time.Second)
	if out := h.evaluate(); out.Evicted != "" {
		t.Fatalf("evicted %q before the grace period", out.Evicted)
	}
	h.clk.Step(time.Second)
	h.evaluate()
	ev := h.waitEvictions(a)
	if ev[0].GracePeriod == nil || *ev[0].GracePeriod != 20 {
		t.Fatalf("evictions %+v, want one with grace min(60, --eviction-max-pod-grace-period 20) = 20", ev)
	}
}

func TestSoftThresholdBrokenRestartsItsGracePeriod(t *testing.T) {
	ts := mustThresholds(t, nil, map[string]string{"memory.available": "500Mi"}, map[string]string{"memory.available": "1m"}, nil)
	a := pod("a", "", "")
	low := summary{memAvail: 300 * mi, memWorkingSet: 4 * gi, pods: []statsapi.PodStats{podMem(a, gi)}}
	high := low
	high.memAvail = 2 * gi
	h := newHarness(t, ts, low.build(), []v1.Pod{a})
	h.evaluate()
	h.clk.Step(40 * time.Second)
	h.stats.set(high.build())
	h.evaluate()
	h.stats.set(low.build())
	h.clk.Step(40 * time.Second)
	h.evaluate()
	h.waitEvictions() // 80 s met with a break at 40 s: none
	h.clk.Step(time.Minute)
	h.evaluate()
	h.waitEvictions(a)
}

func TestPressureClearsOnlyAfterTheTransitionPeriod(t *testing.T) {
	low := summary{memAvail: 50 * mi, memWorkingSet: 4 * gi}
	high := summary{memAvail: 2 * gi, memWorkingSet: 2 * gi}
	h := newHarness(t, hardMemory(t), low.build(), nil, func(c *Config, _ *harness) { c.Node = nil })

	if out := h.evaluate(); !out.Pressure.Memory {
		t.Fatalf("pressure %+v, want MemoryPressure", out.Pressure)
	}
	actortest.Eventually(t, "the subscriber told of MemoryPressure", func() bool {
		ps := h.sub.pressures()
		return len(ps) > 0 && ps[len(ps)-1].Memory && strings.Join(ps[len(ps)-1].Signals, ",") == "memory.available"
	})
	h.stats.set(high.build())
	h.clk.Step(time.Minute)
	if out := h.evaluate(); !out.Pressure.Memory || len(out.Pressure.Signals) != 0 {
		t.Fatalf("a minute after the threshold cleared: pressure %+v, want MemoryPressure still, no signal", out.Pressure)
	}
	h.clk.Step(4*time.Minute - time.Second)
	if out := h.evaluate(); !out.Pressure.Memory {
		t.Fatalf("before the transition period ended: pressure %+v, want MemoryPressure", out.Pressure)
	}
	h.clk.Step(time.Second)
	if out := h.evaluate(); out.Pressure.Memory {
		t.Fatalf("after the transition period: pressure %+v, want none", out.Pressure)
	}
	actortest.Eventually(t, "the subscriber told the pressure ended", func() bool {
		ps := h.sub.pressures()
		return len(ps) > 0 && !ps[len(ps)-1].Memory
	})
	// GetNodePressure answers the same.
	res, err := h.sys.Root.RequestFuture(h.pid, &messages.GetNodePressure{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if p := res.(*messages.NodePressure); p.Memory || p.Disk || p.PID {
		t.Errorf("GetNodePressure = %+v, want none", p)
	}
}

func TestDiskPressureReclaimsImagesFirst(t *testing.T) {
	a := pod("a", "", "")
	starved := summary{memAvail: 2 * gi, memWorkingSet: gi, fsCap: 100 * gi, fsAvail: 5 * gi, inodes: 1000, inodesFree: 900,
		pods: []statsapi.PodStats{podDisk(a, 10*gi)}}
	relieved := starved
	relieved.fsAvail = 30 * gi
	ts := mustThresholds(t, map[string]string{"nodefs.available": "10%"}, nil, nil, map[string]string{"nodefs.available": "2Gi"})
	h := newHarness(t, ts, starved.build(), []v1.Pod{a}, func(_ *Config, h *harness) {
		h.gc.answer = func(ctx actorContext, m any) {
			if r, ok := m.(*messages.ReclaimContainers); ok {
				ctx.Send(r.ReplyTo, &messages.ContainersReclaimed{Containers: 3})
			}
		}
		h.images.answer = func(ctx actorContext, m any) {
			if r, ok := m.(*messages.ReclaimImages); ok {
				h.stats.set(relieved.build()) // the images freed the disk
				ctx.Send(r.ReplyTo, &messages.ImagesReclaimed{Freed: 25 << 30, Removed: 4})
			}
		}
	})
	out := h.evaluate()
	if out.Evicted != "" {
		t.Fatalf("evicted %q although reclaiming images sufficed", out.Evicted)
	}
	if !out.Pressure.Disk {
		t.Errorf("pressure %+v, want DiskPressure (held for the transition period)", out.Pressure)
	}
	if n := len(h.gc.messages()); n != 1 {
		t.Errorf("container GC asked %d times, want 1", n)
	}
	imgs := h.images.messages()
	if len(imgs) != 1 {
		t.Fatalf("ImageActor asked %d times, want 1", len(imgs))
	}
	// 10% of 100Gi + 2Gi minimum reclaim - 5Gi available.
	if want := int64(7 << 30); imgs[0].(*messages.ReclaimImages).Bytes != want {
		t.Errorf("ReclaimImages.Bytes = %d, want %d", imgs[0].(*messages.ReclaimImages).Bytes, want)
	}
	h.waitEvictions()
}

func TestDiskPressureEvictsWhenReclaimIsNotEnough(t *testing.T) {
	small, big := pod("small", "", ""), pod("big", "", "")
	starved := summary{fsCap: 100 * gi, fsAvail: 5 * gi, inodes: 1000, inodesFree: 900,
		pods: []statsapi.PodStats{podDisk(small, gi), podDisk(big, 20*gi)}}
	ts := mustThresholds(t, map[string]string{"nodefs.available": "10%"}, nil, nil, nil)
	h := newHarness(t, ts, starved.build(), []v1.Pod{small, big}, func(_ *Config, h *harness) {
		h.gc.answer = func(ctx actorContext, m any) {
			if r, ok := m.(*messages.ReclaimContainers); ok {
				ctx.Send(r.ReplyTo, &messages.ContainersReclaimed{})
			}
		}
		h.images.answer = func(ctx actorContext, m any) {
			if r, ok := m.(*messages.ReclaimImages); ok {
				ctx.Send(r.ReplyTo, &messages.ImagesReclaimed{Err: "no unused image"})
			}
		}
	})
	out := h.evaluate()
	if out.Evicted != big.UID || out.Signal != "nodefs.available" {
		t.Fatalf("evicted %q for %q, want %q for nodefs.available", out.Evicted, out.Signal, big.UID)
	}
	ev := h.waitEvictions(big)
	want := "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. " +
		"Container app was using 20Gi, request is 0, has larger consumption of ephemeral-storage. "
	if ev[0].Message != want {
		t.Fatalf("message %q, want %q", ev[0].Message, want)
	}
	if len(h.images.messages()) != 1 {
		t.Errorf("the images were not reclaimed first")
	}
}

func TestMemoryNotifierTriggersAPassAtOnce(t *testing.T) {
	n := &fakeNotifier{fire: make(chan struct{})}
	fine := summary{memAvail: 2 * gi, memWorkingSet: 6 * gi}
	h := newHarness(t, hardMemory(t), fine.build(), nil, func(c *Config, _ *harness) {
		c.MemoryNotifier = func() (MemoryNotifier, error) { return n, nil }
	})
	h.evaluate()
	// capacity 8Gi - threshold 100Mi + inactive file (usage - working set: 100Mi).
	actortest.Eventually(t, "the usage threshold set", func() bool {
		set := n.thresholds()
		return len(set) > 0 && len(set[0]) == 1 && set[0][0] == int64(8*gi)
	})
	before := h.stats.called()
	n.fire <- struct{}{}
	actortest.Eventually(t, "a pass without the period passing", func() bool { return h.stats.called() > before })
}

func TestNoSummaryEvictsNothing(t *testing.T) {
	a := pod("a", "", "")
	h := newHarness(t, hardMemory(t), summary{memAvail: 10 * mi, memWorkingSet: gi}.build(), []v1.Pod{a})
	h.stats.mu.Lock()
	h.stats.err = errNoStats
	h.stats.mu.Unlock()
	if out := h.evaluate(); out.Err == "" || out.Evicted != "" {
		t.Fatalf("outcome %+v, want an error and no eviction", out)
	}
}

func TestHousekeepingPeriodRunsPasses(t *testing.T) {
	h := newHarness(t, hardMemory(t), summary{memAvail: 2 * gi, memWorkingSet: gi}.build(), nil)
	h.evaluate()
	before := h.stats.called()
	h.clk.Step(DefaultHousekeepingPeriod)
	actortest.Eventually(t, "a pass after the housekeeping period", func() bool { return h.stats.called() > before })
}

func TestUsageThresholds(t *testing.T) {
	ts := mustThresholds(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "10%"},
		map[string]string{"memory.available": "1m"}, nil)
	s := summary{memAvail: 6 * gi, memWorkingSet: 4 * gi}.build() // capacity 10Gi, inactive 100Mi
	got := usageThresholds(ts, s)
	want := []int64{int64(9*gi + 100*mi), int64(10*gi - gi + 100*mi)}
	if len(got) != 2 || got[0] != want[0] {
		t.Fatalf("usage thresholds %v, want %v", got, want)
	}
	q := resource.NewQuantity(got[1], resource.BinarySI)
	if q.Value() != want[1] {
		t.Errorf("10%% threshold at usage %v, want %v", q, want[1])
	}
}

func TestFirstPassTellsTheSubscribers(t *testing.T) {
	// A (re)started actor tells its subscribers the pressure, even none:
	// they may hold the pressure an earlier incarnation told them.
	h := newHarness(t, hardMemory(t), summary{memAvail: 2 * gi, memWorkingSet: gi}.build(), nil, coldStart)
	actortest.Eventually(t, "the subscriber told there is no pressure", func() bool {
		ps := h.sub.pressures()
		return len(ps) == 1 && !ps[0].Memory && !ps[0].Disk && !ps[0].PID
	})
}
