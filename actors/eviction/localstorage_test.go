package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// storagePod is a running pod with one container "app" (its
// limits.ephemeral-storage as given, "" none) and an emptyDir "scratch"
// (its sizeLimit as given, "" none; medium Memory when memory).
func storagePod(name, ctrLimit, sizeLimit string, memory bool) v1.Pod {
	p := pod(name, "", "")
	if ctrLimit != "" {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(ctrLimit)}
	}
	ed := &v1.EmptyDirVolumeSource{}
	if sizeLimit != "" {
		q := resource.MustParse(sizeLimit)
		ed.SizeLimit = &q
	}
	if memory {
		ed.Medium = v1.StorageMediumMemory
	}
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: ed}}}
	return p
}

// storageStats: container "app" with rootfs and logs bytes, the emptyDir
// "scratch" using vol bytes, the pod's ephemeral storage eph bytes.
func storageStats(p v1.Pod, rootfs, logs, vol, eph uint64) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
		Containers: []statsapi.ContainerStats{{Name: "app",
			Rootfs: &statsapi.FsStats{UsedBytes: u(rootfs)}, Logs: &statsapi.FsStats{UsedBytes: u(logs)}}},
		VolumeStats:      []statsapi.VolumeStats{{Name: "scratch", FsStats: statsapi.FsStats{UsedBytes: u(vol)}}},
		EphemeralStorage: &statsapi.FsStats{UsedBytes: u(eph)},
	}
}

func TestLocalStorageViolations(t *testing.T) {
	withInit := func(p v1.Pod, limit string, sidecar bool) v1.Pod {
		c := v1.Container{Name: "init", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}}}
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = []v1.Container{c}
		return p
	}
	twoContainers := func(p v1.Pod, second string) v1.Pod {
		c := v1.Container{Name: "second"}
		if second != "" {
			c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(second)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
		return p
	}
	tests := []struct {
		name                 string
		pod                  v1.Pod
		rootfs, logs, vol    uint64
		eph                  uint64
		noStats, dedicatedFs bool
		wantSignal, wantMsg  string
	}{
		{name: "emptyDir under its sizeLimit", pod: storagePod("p", "", "5Mi", false), vol: 4 * mi, eph: 4 * mi},
		{name: "emptyDir over its sizeLimit", pod: storagePod("p", "", "5Mi", false), vol: 20 * mi, eph: 20 * mi,
			wantSignal: "emptydirfs.limit", wantMsg: `Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". `},
		{name: "memory emptyDir over its sizeLimit too, as upstream", pod: storagePod("p", "", "5Mi", true), vol: 6 * mi,
			wantSignal: "emptydirfs.limit", wantMsg: `Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". `},
		{name: "emptyDir without a sizeLimit", pod: storagePod("p", "", "", false), vol: 1 << 40, eph: 1 << 40},
		{name: "zero sizeLimit is no limit", pod: storagePod("p", "", "0", false), vol: 20 * mi},
		{name: "no stats: nothing", pod: storagePod("p", "1Mi", "1Mi", false), noStats: true},
		{name: "emptyDir checked before the pod's limit", pod: storagePod("p", "1Mi", "5Mi", false), vol: 6 * mi, eph: 6 * mi,
			wantSignal: "emptydirfs.limit", wantMsg: `Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". `},
		{name: "pod over the sum of its containers' limits", pod: twoContainers(storagePod("p", "10Mi", "", false), "10Mi"), vol: 25 * mi, eph: 25 * mi,
			wantSignal: "ephemeralpodfs.limit", wantMsg: "Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. "},
		{name: "pod under the sum", pod: twoContainers(storagePod("p", "10Mi", "", false), "10Mi"), vol: 15 * mi, eph: 15 * mi},
		{name: "one container limited: the pod's limit is its", pod: twoContainers(storagePod("p", "10Mi", "", false), ""), vol: 11 * mi, eph: 11 * mi,
			wantSignal: "ephemeralpodfs.limit", wantMsg: "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{name: "a larger init container raises the pod's limit", pod: withInit(storagePod("p", "10Mi", "", false), "30Mi", false), vol: 20 * mi, eph: 20 * mi},
		{name: "a sidecar adds to the pod's limit", pod: withInit(storagePod("p", "10Mi", "", false), "5Mi", true), vol: 14 * mi, eph: 14 * mi},
		{name: "container rootfs and logs over its limit", pod: storagePod("p", "10Mi", "", false), rootfs: 8 * mi, logs: 3 * mi, eph: 9 * mi,
			wantSignal: "ephemeralcontainerfs.limit", wantMsg: `Container app exceeded its local ephemeral storage limit "10Mi". `},
		{name: "dedicated image fs: the container's logs alone", pod: storagePod("p", "10Mi", "", false), rootfs: 8 * mi, logs: 3 * mi, eph: 9 * mi, dedicatedFs: true},
		{name: "container under its limit", pod: storagePod("p", "10Mi", "", false), rootfs: 8 * mi, logs: 1 * mi, eph: 9 * mi},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.pod
			stats := statsOf(&statsapi.Summary{})
			if !tt.noStats {
				stats = statsOf(&statsapi.Summary{Pods: []statsapi.PodStats{storageStats(p, tt.rootfs, tt.logs, tt.vol, tt.eph)}})
			}
			got := localStorageViolations([]*v1.Pod{&p}, stats, tt.dedicatedFs)
			if tt.wantSignal == "" {
				if len(got) != 0 {
					t.Fatalf("violations %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].pod != &p || got[0].signal != tt.wantSignal || got[0].message != tt.wantMsg {
				t.Fatalf("violations %+v, want %s %q", got, tt.wantSignal, tt.wantMsg)
			}
		})
	}
}

func TestPodsOverLocalStorageLimitsAreEvictedWithoutPressure(t *testing.T) {
	over := storagePod("over", "", "5Mi", false)
	under := storagePod("under", "", "5Mi", false)
	big := storagePod("big", "10Mi", "", false)
	critical := withPriority(storagePod("critical", "", "5Mi", false), SystemCriticalPriority)
	pods := []v1.Pod{over, under, big, critical}
	// No threshold is met: the node is fine.
	s := summary{memAvail: 4 * gi, memWorkingSet: gi, fsCap: 100 * gi, fsAvail: 90 * gi, inodes: 1000, inodesFree: 900, pods: []statsapi.PodStats{
		storageStats(over, 0, 0, 20*mi, 20*mi), storageStats(under, 0, 0, 4*mi, 4*mi),
		storageStats(big, 12*mi, 0, 0, 12*mi), storageStats(critical, 0, 0, 20*mi, 20*mi),
	}}
	h := newHarness(t, mustThresholds(t, DefaultHard(), nil, nil, nil), s.build(), pods)

	out := h.evaluate()
	if out.Evicted != over.UID || out.Signal != "emptydirfs.limit" || out.Pressure.Disk || out.Pressure.Memory {
		t.Fatalf("pass: evicted %q for %q, pressure %+v; want %q for emptydirfs.limit, no pressure", out.Evicted, out.Signal, out.Pressure, over.UID)
	}
	ev := h.waitEvictions(over, big)
	want := map[string]string{
		string(over.UID): `Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". `,
		string(big.UID):  "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ",
	}
	for _, e := range ev {
		if e.Message != want[string(e.UID)] || e.GracePeriod == nil || *e.GracePeriod != 1 {
			t.Errorf("EvictPod %+v (grace %v): want message %q and grace 1", e, e.GracePeriod, want[string(e.UID)])
		}
	}
	var events int
	for _, e := range h.rec.list() {
		if e.kind == "Pod" && e.eventtype == v1.EventTypeWarning && e.reason == "Evicted" && e.msg == want["uid-"+e.name[len("default/"):]] {
			events++
		}
	}
	if events != 2 {
		t.Errorf("events %+v: want the Warning Evicted of both pods", h.rec.list())
	}
	if h.metrics.count("emptydirfs.limit") != 1 || h.metrics.count("ephemeralpodfs.limit") != 1 {
		t.Errorf("kubelet_evictions = %+v, want emptydirfs.limit 1 and ephemeralpodfs.limit 1", h.metrics.evictions)
	}
	// The evicted pods have not ended yet: not evicted again.
	if out := h.evaluate(); out.Evicted != "" {
		t.Fatalf("evicted %q again while it was stopping", out.Evicted)
	}
	h.waitEvictions(over, big)
}
