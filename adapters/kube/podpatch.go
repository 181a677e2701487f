package kube

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podStatusPatch is the strategic merge patch PatchPodStatus sends: what
// upstream's status manager sends (pkg/util/pod PatchPodStatus): the two-way
// patch from a pod with only uid and oldStatus to one with only uid and
// newStatus, with metadata.uid added as a precondition.
func podStatusPatch(uid types.UID, oldStatus, newStatus *v1.PodStatus) ([]byte, error) {
	oldPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *oldStatus}
	newPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *newStatus}
	patch, err := twoWay(oldPod, newPod, v1.Pod{})
	if err != nil {
		return nil, err
	}
	return withUID(patch, uid), nil
}

// withUID adds "metadata":{"uid":uid} to patch, a JSON object written by
// CreateTwoWayMergePatch, by splicing bytes instead of decoding and encoding
// the patch again. The patch has no metadata of its own: both sides of the
// diff carry the same metadata (the UID only).
func withUID(patch []byte, uid types.UID) []byte {
	out := make([]byte, 0, len(patch)+len(uid)+24)
	out = append(out, `{"metadata":{"uid":`...)
	out = appendJSONString(out, string(uid))
	out = append(out, '}')
	if len(patch) > len("{}") {
		out = append(out, ',')
		return append(out, patch[1:]...)
	}
	return append(out, '}')
}

// appendJSONString appends s as a JSON string. Plain ASCII (the common case:
// UIDs, reasons, IPs) is copied as is; anything else is left to
// encoding/json, so escaping and invalid UTF-8 are handled exactly as in
// the rest of the patch.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
