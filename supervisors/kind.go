package supervisors

import (
	"strings"

	"github.com/asynkron/protoactor-go/actor"
)

// Actor kinds, derived from the last segment of an actor's PID.
const (
	KindRoot     = "root"
	KindNode     = "node"
	KindPod      = "pod"
	KindProbe    = "probe"
	KindPLEG     = "pleg"
	KindImage    = "image"
	KindStatus   = "status"
	KindSource   = "source"
	KindVolume   = "volume"
	KindEviction = "eviction"
	KindDevice   = "device"
)

// KindOf returns the kind of the actor behind pid from the last segment of
// its id: "root/node/pod-1234/probe-web-liveness" is a probe, ".../images"
// an image actor, "source-file" a source. An unknown segment yields its
// part up to the first '-'. A nil PID has kind "".
func KindOf(pid *actor.PID) string {
	if pid == nil {
		return ""
	}
	return kindOfID(pid.Id)
}

func kindOfID(id string) string {
	seg := id
	if i := strings.LastIndexByte(seg, '/'); i >= 0 {
		seg = seg[i+1:]
	}
	if i := strings.IndexByte(seg, '-'); i >= 0 {
		seg = seg[:i]
	}
	switch seg {
	case "images":
		return KindImage
	case "volumes":
		return KindVolume
	case "devices":
		return KindDevice
	case "sources":
		return KindSource
	}
	return seg
}

// parentID returns the id of the parent in the naming hierarchy, "" for a
// top-level actor.
func parentID(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return ""
}
