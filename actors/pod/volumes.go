package pod

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
