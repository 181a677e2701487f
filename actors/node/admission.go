package node

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// admission is the admission part of the NodeActor: what the admitted pods
// hold, kept up to date on every change of an entry (no walk over all pods
// per update), and the checks of a new pod against it. An admitted pod
// counts from its admission until it is killed: its share of the pod
// count, its cpu, memory and ephemeral-storage requests, its host ports,
// its namespace/name and (extended true) its extended resources.
type admission struct {
	// extended: count the extended resources (a DevicesActor is wired).
	extended bool

	nActive, nStatic, nAPI int
	requested              v1.ResourceList
	hostPorts              map[string]map[string]int // "TCP/80" -> host IP -> pods
	extUsed                map[v1.ResourceName]int64 // extended resources of admitted pods
	names                  map[string]types.UID      // namespace/name -> the admitted pod holding it
	namesShrink            actorkit.Shrinker
}

// track adds (sign 1) or removes (sign -1) the share of pod p of source.
func (ad *admission) track(p *v1.Pod, source string, sign int) {
	ad.nActive += sign
	if source == messages.SourceAPI {
		ad.nAPI += sign
	} else {
		ad.nStatic += sign
	}
	ad.trackHostPorts(p, sign)
	ad.trackName(p, sign)
	if ad.extended {
		ad.trackExtended(p, sign)
	}
	if ad.requested == nil {
		ad.requested = v1.ResourceList{}
	}
	for _, name := range admittedResources {
		q := podRequest(p, name)
		if q.IsZero() {
			continue
		}
		cur := ad.requested[name]
		if sign > 0 {
			cur.Add(q)
		} else {
			cur.Sub(q)
		}
		ad.requested[name] = cur
	}
}

// active is the number of admitted pods.
func (ad *admission) active() int { return ad.nActive }

// fits checks the pod count against maxPods (0: no bound), then the pod's
// cpu, memory and ephemeral-storage requests against what the admitted
// pods leave of allocatable (a resource missing: not checked). The message
// is upstream's: "Node didn't have enough resource: cpu, requested: 1000,
// used: 500, capacity: 1200" (cpu in millicores, the others in bytes).
func (ad *admission) fits(p *v1.Pod, maxPods int, allocatable v1.ResourceList) (reason, msg string) {
	if maxPods > 0 && ad.active() >= maxPods {
		return ReasonOutOfPods, fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", ad.active(), maxPods)
	}
	for _, name := range admittedResources {
		capacity, ok := allocatable[name]
		if !ok {
			continue
		}
		want := podRequest(p, name)
		if want.IsZero() {
			continue
		}
		used := ad.requested[name].DeepCopy()
		total := used.DeepCopy()
		total.Add(want)
		if total.Cmp(capacity) > 0 {
			return "OutOf" + string(name), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				name, quantityValue(name, want), quantityValue(name, used), quantityValue(name, capacity))
		}
	}
	return "", ""
}

func quantityValue(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// fitsExtended checks the pod's extended resources against allocatable,
// what the DevicesActor reported (a resource it does not know has none),
// as fits does cpu and memory.
func (ad *admission) fitsExtended(p *v1.Pod, allocatable map[v1.ResourceName]int64) (reason, msg string) {
	p = podspec.WithoutDRAExtended(p) // DRA allocated those
	for _, name := range extendedNames(p) {
		want := extendedRequest(p, name)
		if want.IsZero() {
			continue
		}
		used := ad.extUsed[name]
		capacity := allocatable[name]
		if used+want.Value() > capacity {
			return "OutOf" + string(name), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				name, want.Value(), used, capacity)
		}
	}
	return "", ""
}

// trackExtended adds (sign 1) or removes (-1) the pod's extended requests.
func (ad *admission) trackExtended(p *v1.Pod, sign int) {
	p = podspec.WithoutDRAExtended(p) // DRA allocated those
	for _, name := range extendedNames(p) {
		q := extendedRequest(p, name)
		if ad.extUsed == nil {
			ad.extUsed = map[v1.ResourceName]int64{}
		}
		ad.extUsed[name] += int64(sign) * q.Value()
		if ad.extUsed[name] <= 0 {
			delete(ad.extUsed, name)
		}
	}
}

// trackName makes the pod hold its namespace/name (sign 1) if the name is
// free, or frees it (-1) if the pod holds it. An admitted pod holds its
// name until it is killed, as its host ports.
func (ad *admission) trackName(p *v1.Pod, sign int) {
	key := podName(p)
	holder, held := ad.names[key]
	switch {
	case sign > 0 && !held:
		if ad.names == nil {
			ad.names = map[string]types.UID{}
		}
		ad.names[key] = p.UID
	case sign < 0 && held && holder == p.UID:
		delete(ad.names, key)
	}
}

// nameHolder is the other admitted pod that holds p's namespace/name; ok
// false when none does (or p itself).
func (ad *admission) nameHolder(p *v1.Pod) (holder types.UID, ok bool) {
	holder, held := ad.names[podName(p)]
	if !held || holder == p.UID {
		return "", false
	}
	return holder, true
}

// trackHostPorts adds (sign 1) or removes (-1) the pod's host ports.
func (ad *admission) trackHostPorts(p *v1.Pod, sign int) {
	forHostPorts(p, func(key, ip string) {
		if ad.hostPorts == nil {
			ad.hostPorts = map[string]map[string]int{}
		}
		ips := ad.hostPorts[key]
		if ips == nil {
			ips = map[string]int{}
			ad.hostPorts[key] = ips
		}
		ips[ip] += sign
		if ips[ip] <= 0 {
			delete(ips, ip)
		}
		if len(ips) == 0 {
			delete(ad.hostPorts, key)
		}
	})
}

// hostPortConflict reports the first of the pod's host ports already taken
// (a wildcard address conflicts with every address of the same port).
func (ad *admission) hostPortConflict(p *v1.Pod) (string, bool) {
	conflict := ""
	forHostPorts(p, func(key, ip string) {
		if conflict != "" {
			return
		}
		used := ad.hostPorts[key]
		if len(used) == 0 {
			return
		}
		if ip == "0.0.0.0" || used["0.0.0.0"] > 0 || used[ip] > 0 {
			conflict = ip + ":" + key
		}
	})
	return conflict, conflict == ""
}

// compact rebuilds the map of names once it shrank to a quarter of its
// peak (actorkit.Shrink).
func (ad *admission) compact() {
	ad.names = actorkit.Shrink(&ad.namesShrink, ad.names)
}
