package pod

import (
	"maps"

	v1 "k8s.io/api/core/v1"
)

// volumeState is the pod's volumes as the VolumeActor set them up: the
// host path of each, once ready; asked while the answer is pending.
type volumeState struct {
	paths map[string]string
	asked bool
}

// ready reports whether containers may be created; ask is true when the
// VolumeActor must be asked now (once).
func (v *volumeState) ready(wired bool, volumes int) (ready, ask bool) {
	if !wired || volumes == 0 || v.paths != nil {
		return true, false
	}
	if v.asked {
		return false, false
	}
	v.asked = true
	return false, true
}

// answered records the VolumeActor's answer; false when none was pending.
func (v *volumeState) answered(paths map[string]string, failed bool) bool {
	if !v.asked {
		return false
	}
	v.asked = false
	if !failed {
		if paths == nil {
			paths = map[string]string{} // ready with no paths; nil means not ready
		}
		v.paths = paths
	}
	return true
}

// metadataChanged reports whether an update of the pod changes what its
// downward API files hold (labels or annotations, for a pod with downward
// API volumes or projected downward API sources): the VolumeActor must
// rewrite them, as upstream's volume manager does on a pod update.
func metadataChanged(old, cur *v1.Pod) bool {
	if old == nil || cur == nil {
		return false
	}
	if maps.Equal(old.Labels, cur.Labels) && maps.Equal(old.Annotations, cur.Annotations) {
		return false
	}
	for _, vol := range cur.Spec.Volumes {
		if vol.DownwardAPI != nil {
			return true
		}
		if vol.Projected != nil {
			for _, src := range vol.Projected.Sources {
				if src.DownwardAPI != nil {
					return true
				}
			}
		}
	}
	return false
}
