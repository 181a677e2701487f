package devices

import (
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/podspec"
)

// Pure functions of allocation: which extended resources a pod's
// containers ask for, and which devices each container gets (upstream's
// device manager: init containers first, devices of a finished init
// container reusable by the later containers).

// isExtended is podspec.IsExtendedResource.
func isExtended(name v1.ResourceName) bool { return podspec.IsExtendedResource(name) }

// containerNeed is what one container of a pod asks for.
type containerNeed struct {
	name    string
	init    bool // an init container
	sidecar bool // an init container with restartPolicy Always: keeps its devices
	req     map[string]int
}

// podNeeds returns the extended resources each container of pod asks for,
// init containers first, in spec order; only containers that ask for some.
// served tells the resources a provider serves (counted even when they do
// not look extended). Limits are taken, requests where there is no limit.
func podNeeds(pod *v1.Pod, served func(string) bool) []containerNeed {
	var out []containerNeed
	add := func(c *v1.Container, init bool) {
		req := map[string]int{}
		for name, q := range c.Resources.Limits {
			if n := q.Value(); n > 0 && (served(string(name)) || isExtended(name)) {
				req[string(name)] = int(n)
			}
		}
		for name, q := range c.Resources.Requests {
			if _, limited := c.Resources.Limits[name]; limited {
				continue
			}
			if n := q.Value(); n > 0 && (served(string(name)) || isExtended(name)) {
				req[string(name)] = int(n)
			}
		}
		if len(req) == 0 {
			return
		}
		sidecar := init && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		out = append(out, containerNeed{name: c.Name, init: init, sidecar: sidecar, req: req})
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i], true)
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], false)
	}
	return out
}

// preferFunc asks a resource's provider which size devices of available
// it prefers, mustInclude among them; nil: no preference.
type preferFunc func(resource string, available, mustInclude []string, size int) []string

// plan is the devices of each container (by name) and resource.
type plan map[string]map[string][]string

// errUnavailable is an allocation that cannot be met; its text is
// upstream's.
type errUnavailable struct {
	resource             string
	requested, available int
	unregistered         bool
}

func (e *errUnavailable) Error() string {
	if e.unregistered {
		return fmt.Sprintf("cannot allocate unregistered device %s", e.resource)
	}
	return fmt.Sprintf("requested number of devices unavailable for %s. Requested: %d, Available: %d",
		e.resource, e.requested, e.available)
}

// makePlan chooses the devices of every container of needs in order. free
// holds the devices each known resource can give (healthy, used by no
// other pod), sorted; it is not modified. prefer may be nil.
//
// As upstream's device manager: a container first takes the devices that
// earlier init containers (not sidecars) of the pod held, then free ones;
// the devices of an init container that is not a sidecar become reusable
// by later containers, those of sidecars and regular containers do not.
func makePlan(needs []containerNeed, free map[string][]string, prefer preferFunc) (plan, error) {
	avail := make(map[string][]string, len(free))
	for r, ids := range free {
		avail[r] = slices.Clone(ids)
	}
	reuse := map[string][]string{} // sorted
	out := plan{}
	for _, c := range needs {
		got := map[string][]string{}
		for _, res := range sortedKeys(c.req) {
			n := c.req[res]
			a, known := avail[res]
			if !known {
				return nil, &errUnavailable{resource: res, unregistered: true}
			}
			reusable := reuse[res]
			var ids []string
			if len(reusable) >= n {
				ids = slices.Clone(reusable[:n])
			} else {
				need := n - len(reusable)
				if len(a) < need {
					return nil, &errUnavailable{resource: res, requested: need, available: len(a)}
				}
				ids = pick(res, a, reusable, n, prefer)
				avail[res] = without(a, ids)
			}
			got[res] = ids
			if c.init && !c.sidecar {
				reuse[res] = union(reuse[res], ids)
			} else {
				reuse[res] = without(reuse[res], ids)
			}
		}
		out[c.name] = got
	}
	return out, nil
}

// pick chooses n devices: all of must (reusable ones), then those the
// provider prefers among available, then the rest in sorted ID order. A
// preference naming unknown or duplicate devices is ignored where it does.
func pick(res string, available, must []string, n int, prefer preferFunc) []string {
	ids := slices.Clone(must)
	taken := map[string]bool{}
	for _, id := range ids {
		taken[id] = true
	}
	if prefer != nil {
		isAvail := map[string]bool{}
		for _, id := range available {
			isAvail[id] = true
		}
		for _, id := range prefer(res, union(available, must), slices.Clone(must), n) {
			if len(ids) == n {
				break
			}
			if isAvail[id] && !taken[id] {
				ids = append(ids, id)
				taken[id] = true
			}
		}
	}
	for _, id := range available {
		if len(ids) == n {
			break
		}
		if !taken[id] {
			ids = append(ids, id)
			taken[id] = true
		}
	}
	sort.Strings(ids)
	return ids
}

// devicesOf is every device of a plan, by resource, sorted.
func (p plan) devicesOf() map[string][]string {
	out := map[string][]string{}
	for _, byRes := range p {
		for r, ids := range byRes {
			out[r] = union(out[r], ids)
		}
	}
	return out
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// union returns the sorted union of a and b.
func union(a, b []string) []string {
	set := map[string]bool{}
	for _, id := range a {
		set[id] = true
	}
	for _, id := range b {
		set[id] = true
	}
	return sortedKeys(set)
}

// without returns a less the IDs of b, order kept.
func without(a, b []string) []string {
	if len(b) == 0 {
		return slices.Clone(a)
	}
	drop := map[string]bool{}
	for _, id := range b {
		drop[id] = true
	}
	out := make([]string, 0, len(a))
	for _, id := range a {
		if !drop[id] {
			out = append(out, id)
		}
	}
	return out
}
