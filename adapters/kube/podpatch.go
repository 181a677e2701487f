package kube

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podStatusPatch is the strategic merge patch PatchPodStatus sends: what
// upstream's status manager sends (pkg/util/pod PatchPodStatus): the two-way
// patch from a pod with only uid and oldStatus to one with only uid and
// newStatus, with metadata.uid added as a precondition.
//
// CreateTwoWayMergePatch encodes both pods, decodes them into maps and
// diffs the maps by reflection; at a thousand pods starting that was half of
// the CPU of a status write. directPodStatusPatch writes the same patch from
// the two structs; the two-way patch stays for what it does not cover.
func podStatusPatch(uid types.UID, oldStatus, newStatus *v1.PodStatus) ([]byte, error) {
	if podStatusCovered {
		if patch, ok := directPodStatusPatch(uid, oldStatus, newStatus); ok {
			return patch, nil
		}
	}
	return twoWayPodStatusPatch(uid, oldStatus, newStatus)
}

// twoWayPodStatusPatch is podStatusPatch through CreateTwoWayMergePatch.
func twoWayPodStatusPatch(uid types.UID, oldStatus, newStatus *v1.PodStatus) ([]byte, error) {
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
	out = appendUIDPrefix(out, uid)
	if len(patch) > len("{}") {
		out = append(out, ',')
		return append(out, patch[1:]...)
	}
	return append(out, '}')
}

// appendUIDPrefix appends the start of a patch object, up to its metadata.
func appendUIDPrefix(b []byte, uid types.UID) []byte {
	b = append(b, `{"metadata":{"uid":`...)
	b = appendJSONString(b, string(uid))
	return append(b, '}')
}

// ---- the direct patch of a PodStatus

// The patch strategies directPodStatusPatch implements, by the field's
// JSON name: its tags in k8s.io/api (json, patchStrategy, patchMergeKey).
// podStatusCovered checks at start that the types have exactly these
// fields; a field added by a newer k8s.io/api turns the direct patch off
// (every patch is then the two-way one) rather than being left out of it.
var (
	podStatusFields = []fieldTags{
		{"ObservedGeneration", "observedGeneration,omitempty", "", ""},
		{"Phase", "phase,omitempty", "", ""},
		{"Conditions", "conditions,omitempty", "merge", "type"},
		{"Message", "message,omitempty", "", ""},
		{"Reason", "reason,omitempty", "", ""},
		{"NominatedNodeName", "nominatedNodeName,omitempty", "", ""},
		{"HostIP", "hostIP,omitempty", "", ""},
		{"HostIPs", "hostIPs,omitempty", "merge", "ip"},
		{"PodIP", "podIP,omitempty", "", ""},
		{"PodIPs", "podIPs,omitempty", "merge", "ip"},
		{"StartTime", "startTime,omitempty", "", ""},
		{"InitContainerStatuses", "initContainerStatuses,omitempty", "", ""},
		{"ContainerStatuses", "containerStatuses,omitempty", "", ""},
		{"QOSClass", "qosClass,omitempty", "", ""},
		{"EphemeralContainerStatuses", "ephemeralContainerStatuses,omitempty", "", ""},
		{"Resize", "resize,omitempty", "", ""},
		// Not diffed: a change to any of these takes the two-way patch
		// (samePodStatusRest).
		{"ResourceClaimStatuses", "resourceClaimStatuses,omitempty", "merge,retainKeys", "name"},
		{"ExtendedResourceClaimStatus", "extendedResourceClaimStatus,omitempty", "", ""},
		{"AllocatedResources", "allocatedResources,omitempty", "", ""},
		{"Resources", "resources,omitempty", "", ""},
		{"NodeAllocatableResourceClaimStatuses", "nodeAllocatableResourceClaimStatuses,omitempty", "merge", "resourceClaimName"},
		{"VolumeHealth", "volumeHealth,omitempty", "", ""},
	}
	podConditionFields = []fieldTags{
		{"Type", "type", "", ""},
		{"ObservedGeneration", "observedGeneration,omitempty", "", ""},
		{"Status", "status", "", ""},
		{"LastProbeTime", "lastProbeTime,omitempty", "", ""},
		{"LastTransitionTime", "lastTransitionTime,omitempty", "", ""},
		{"Reason", "reason,omitempty", "", ""},
		{"Message", "message,omitempty", "", ""},
	}
	ipFields = []fieldTags{{"IP", "ip", "", ""}}

	podStatusCovered = hasFields(reflect.TypeFor[v1.PodStatus](), podStatusFields) &&
		hasFields(reflect.TypeFor[v1.PodCondition](), podConditionFields) &&
		hasFields(reflect.TypeFor[v1.PodIP](), ipFields) &&
		hasFields(reflect.TypeFor[v1.HostIP](), ipFields)
)

// fieldTags is a struct field's name and the tags that decide its patch.
type fieldTags struct {
	name, json, strategy, mergeKey string
}

// hasFields tells whether struct type t has exactly the fields want.
func hasFields(t reflect.Type, want []fieldTags) bool {
	if t.NumField() != len(want) {
		return false
	}
	for _, w := range want {
		f, ok := t.FieldByName(w.name)
		if !ok || f.Tag.Get("json") != w.json || f.Tag.Get("patchStrategy") != w.strategy ||
			f.Tag.Get("patchMergeKey") != w.mergeKey {
			return false
		}
	}
	return true
}

// directPodStatusPatch writes what twoWayPodStatusPatch gives, key for key
// once decoded, from the structs: scalars that changed (null where the new
// value is left out of the JSON), lists without a strategy whole, merge
// lists as CreateTwoWayMergePatch diffs them (changed fields of matched
// elements, new elements whole, $patch: delete for removed ones, then
// $setElementOrder). It answers false, for the two-way patch to be used,
// where a field it does not diff differs or a merge list has keys that
// the two-way diff would not tell apart.
func directPodStatusPatch(uid types.UID, o, n *v1.PodStatus) ([]byte, bool) {
	if !samePodStatusRest(o, n) {
		return nil, false
	}
	w := patchWriter{b: make([]byte, 0, 512)}
	w.b = appendUIDPrefix(w.b, uid)
	start := len(w.b)
	w.b = append(w.b, `,"status":{`...)
	bodyStart := len(w.b)

	w.int64("observedGeneration", o.ObservedGeneration, n.ObservedGeneration)
	w.str("phase", string(o.Phase), string(n.Phase))
	if !w.conditions(o.Conditions, n.Conditions) {
		return nil, false
	}
	w.str("message", o.Message, n.Message)
	w.str("reason", o.Reason, n.Reason)
	w.str("nominatedNodeName", o.NominatedNodeName, n.NominatedNodeName)
	w.str("hostIP", o.HostIP, n.HostIP)
	if !ips(&w, "hostIPs", o.HostIPs, n.HostIPs, hostIP) {
		return nil, false
	}
	w.str("podIP", o.PodIP, n.PodIP)
	if !ips(&w, "podIPs", o.PodIPs, n.PodIPs, podIP) {
		return nil, false
	}
	w.timePtr("startTime", o.StartTime, n.StartTime)
	if !w.containers("initContainerStatuses", o.InitContainerStatuses, n.InitContainerStatuses) ||
		!w.containers("containerStatuses", o.ContainerStatuses, n.ContainerStatuses) {
		return nil, false
	}
	w.str("qosClass", string(o.QOSClass), string(n.QOSClass))
	if !w.containers("ephemeralContainerStatuses", o.EphemeralContainerStatuses, n.EphemeralContainerStatuses) {
		return nil, false
	}
	w.str("resize", string(o.Resize), string(n.Resize))

	if len(w.b) == bodyStart {
		w.b = w.b[:start] // nothing changed: the UID alone
	} else {
		w.b = append(w.b, '}')
	}
	return append(w.b, '}'), true
}

// samePodStatusRest tells whether the fields directPodStatusPatch does not
// diff encode the same (the two-way diff compares the decoded JSON).
func samePodStatusRest(o, n *v1.PodStatus) bool {
	return sameJSON(o.ResourceClaimStatuses, n.ResourceClaimStatuses, len(o.ResourceClaimStatuses) == 0, len(n.ResourceClaimStatuses) == 0) &&
		sameJSON(o.ExtendedResourceClaimStatus, n.ExtendedResourceClaimStatus, o.ExtendedResourceClaimStatus == nil, n.ExtendedResourceClaimStatus == nil) &&
		sameJSON(o.AllocatedResources, n.AllocatedResources, len(o.AllocatedResources) == 0, len(n.AllocatedResources) == 0) &&
		sameJSON(o.Resources, n.Resources, o.Resources == nil, n.Resources == nil) &&
		sameJSON(o.NodeAllocatableResourceClaimStatuses, n.NodeAllocatableResourceClaimStatuses,
			len(o.NodeAllocatableResourceClaimStatuses) == 0, len(n.NodeAllocatableResourceClaimStatuses) == 0) &&
		sameJSON(o.VolumeHealth, n.VolumeHealth, len(o.VolumeHealth) == 0, len(n.VolumeHealth) == 0)
}

// sameJSON tells whether o and n encode the same; oOmitted and nOmitted
// say whether omitempty leaves them out.
func sameJSON(o, n any, oOmitted, nOmitted bool) bool {
	if oOmitted || nOmitted {
		return oOmitted == nOmitted
	}
	if reflect.DeepEqual(o, n) {
		return true
	}
	ob, oerr := json.Marshal(o)
	nb, nerr := json.Marshal(n)
	return oerr == nil && nerr == nil && bytes.Equal(ob, nb)
}

// patchWriter appends a patch to b.
type patchWriter struct {
	b []byte
}

// key writes an object's key, after a comma unless it is the object's
// first (no value written here ends in '{').
func (w *patchWriter) key(k string) {
	if c := w.b[len(w.b)-1]; c != '{' {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *patchWriter) null() { w.b = append(w.b, "null"...) }

// str writes a string field with omitempty.
func (w *patchWriter) str(k, o, n string) {
	if sameString(o, n) {
		return
	}
	w.key(k)
	if n == "" {
		w.null()
		return
	}
	w.b = appendJSONString(w.b, n)
}

// int64 writes an integer field with omitempty.
func (w *patchWriter) int64(k string, o, n int64) {
	if o == n {
		return
	}
	w.key(k)
	if n == 0 {
		w.null()
		return
	}
	w.b = strconv.AppendInt(w.b, n, 10)
}

// timePtr writes a *metav1.Time field with omitempty: left out when nil,
// null when zero (metav1.Time's encoding), else a time string. A change
// between left out and null is a change as well for the two-way diff.
func (w *patchWriter) timePtr(k string, o, n *metav1.Time) {
	if o == nil && n == nil {
		return
	}
	if o != nil && n != nil && sameTime(*o, *n) {
		return
	}
	w.key(k)
	if n == nil {
		w.null()
		return
	}
	w.time(*n)
}

// time writes a metav1.Time as it encodes.
func (w *patchWriter) time(t metav1.Time) {
	if t.IsZero() {
		w.null()
		return
	}
	w.b = append(w.b, '"')
	w.b = t.UTC().AppendFormat(w.b, time.RFC3339)
	w.b = append(w.b, '"')
}

// sameTime tells whether two metav1.Times encode the same: both null, or
// the same second (the encoding drops fractions and zones).
func sameTime(o, n metav1.Time) bool {
	if o.IsZero() || n.IsZero() {
		return o.IsZero() == n.IsZero()
	}
	return o.Unix() == n.Unix()
}

// sameString tells whether two strings encode the same: invalid UTF-8
// encodes as U+FFFD, byte for byte.
func sameString(o, n string) bool {
	if o == n {
		return true
	}
	if utf8.ValidString(o) && utf8.ValidString(n) {
		return false
	}
	return string([]rune(o)) == string([]rune(n))
}

// containers writes a list of container statuses. It has no patch
// strategy: a change replaces it whole. It answers false if the list does
// not encode.
func (w *patchWriter) containers(k string, o, n []v1.ContainerStatus) bool {
	switch {
	case len(o) == 0 && len(n) == 0:
		return true
	case len(n) == 0:
		w.key(k)
		w.null()
		return true
	case len(o) != 0 && reflect.DeepEqual(o, n):
		return true
	}
	nb, err := json.Marshal(n)
	if err != nil {
		return false
	}
	if len(o) != 0 {
		// Unequal structs may still encode the same (times within a second).
		ob, err := json.Marshal(o)
		if err != nil {
			return false
		}
		if bytes.Equal(ob, nb) {
			return true
		}
	}
	w.key(k)
	w.b = append(w.b, nb...)
	return true
}

// conditions writes the conditions, a list merged by type. It answers
// false where a type repeats or is not valid UTF-8, which the two-way diff
// (matching keys after decoding, by sorting) handles its own way.
func (w *patchWriter) conditions(o, n []v1.PodCondition) bool {
	const k = "conditions"
	if ok, done := mergeListTrivial(w, k, o, n, conditionType); done {
		return ok
	}
	if len(o) == 0 {
		w.key(k)
		w.b = append(w.b, '[')
		for i := range n {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.condition(&n[i])
		}
		w.b = append(w.b, ']')
		return true
	}
	mark := len(w.b)
	w.key(k)
	w.b = append(w.b, '[')
	listStart := len(w.b)
	for i := range n {
		j := indexKey(o, conditionType, string(n[i].Type))
		if j < 0 {
			w.elem(listStart)
			w.condition(&n[i])
			continue
		}
		elemStart := len(w.b)
		w.elem(listStart)
		w.b = append(w.b, '{')
		fieldsStart := len(w.b)
		w.conditionDiff(&o[j], &n[i])
		if len(w.b) == fieldsStart {
			w.b = w.b[:elemStart] // unchanged
			continue
		}
		w.key("type")
		w.b = appendJSONString(w.b, string(n[i].Type))
		w.b = append(w.b, '}')
	}
	endMergeList(w, k, "type", o, n, conditionType, mark, listStart)
	return true
}

// endMergeList ends the list k merged by the key named keyName (whose
// changed and added elements are written from listStart on, after the
// key written at mark): the removed elements as {"$patch":"delete"}, then
// the list closed, or taken out again when nothing was written, and the
// $setElementOrder directive when anything changed or the order did.
func endMergeList[E any](w *patchWriter, k, keyName string, o, n []E, key func(E) string, mark, listStart int) {
	for _, r := range removed(o, n, key) {
		w.elem(listStart)
		w.b = append(w.b, `{"$patch":"delete",`...)
		w.b = appendJSONString(w.b, keyName)
		w.b = append(w.b, ':')
		w.b = appendJSONString(w.b, r)
		w.b = append(w.b, '}')
	}
	changed := len(w.b) > listStart
	if changed {
		w.b = append(w.b, ']')
	} else {
		w.b = w.b[:mark]
	}
	if changed || !sameOrder(o, n, key) {
		w.key("$setElementOrder/" + k)
		w.b = append(w.b, '[')
		for i := range n {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '{')
			w.b = appendJSONString(w.b, keyName)
			w.b = append(w.b, ':')
			w.b = appendJSONString(w.b, key(n[i]))
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
}

// elem writes the comma before a list element that is not the first.
func (w *patchWriter) elem(listStart int) {
	if len(w.b) > listStart {
		w.b = append(w.b, ',')
	}
}

// condition writes a condition whole, as it encodes.
func (w *patchWriter) condition(c *v1.PodCondition) {
	w.b = append(w.b, `{"type":`...)
	w.b = appendJSONString(w.b, string(c.Type))
	if c.ObservedGeneration != 0 {
		w.key("observedGeneration")
		w.b = strconv.AppendInt(w.b, c.ObservedGeneration, 10)
	}
	w.key("status")
	w.b = appendJSONString(w.b, string(c.Status))
	w.key("lastProbeTime")
	w.time(c.LastProbeTime)
	w.key("lastTransitionTime")
	w.time(c.LastTransitionTime)
	if c.Reason != "" {
		w.key("reason")
		w.b = appendJSONString(w.b, c.Reason)
	}
	if c.Message != "" {
		w.key("message")
		w.b = appendJSONString(w.b, c.Message)
	}
	w.b = append(w.b, '}')
}

// conditionDiff writes the fields of a condition that changed, but its
// type (the same on both sides).
func (w *patchWriter) conditionDiff(o, n *v1.PodCondition) {
	w.int64("observedGeneration", o.ObservedGeneration, n.ObservedGeneration)
	if !sameString(string(o.Status), string(n.Status)) {
		// Never left out: "" is written, not null.
		w.key("status")
		w.b = appendJSONString(w.b, string(n.Status))
	}
	if !sameTime(o.LastProbeTime, n.LastProbeTime) {
		w.key("lastProbeTime")
		w.time(n.LastProbeTime)
	}
	if !sameTime(o.LastTransitionTime, n.LastTransitionTime) {
		w.key("lastTransitionTime")
		w.time(n.LastTransitionTime)
	}
	w.str("reason", o.Reason, n.Reason)
	w.str("message", o.Message, n.Message)
}

// mergeListTrivial writes what needs no diff of a list merged by key:
// nothing where both lists are empty, null where the new one is. done
// says it answered (ok: false where a key repeats or is not valid UTF-8).
func mergeListTrivial[E any](w *patchWriter, k string, o, n []E, key func(E) string) (ok, done bool) {
	switch {
	case !uniqueKeys(o, key) || !uniqueKeys(n, key):
		return false, true
	case len(o) == 0 && len(n) == 0:
		return true, true
	case len(n) == 0:
		w.key(k)
		w.null()
		return true, true
	}
	return true, false
}

// ips writes a list of {"ip": ...} merged by ip (podIPs, hostIPs): the
// added IPs, the removed ones, the order. It answers false where an IP
// repeats or is not valid UTF-8.
func ips[E any](w *patchWriter, k string, o, n []E, ip func(E) string) bool {
	if ok, done := mergeListTrivial(w, k, o, n, ip); done {
		return ok
	}
	mark := len(w.b)
	w.key(k)
	w.b = append(w.b, '[')
	listStart := len(w.b)
	for i := range n {
		if a := ip(n[i]); indexKey(o, ip, a) < 0 {
			w.elem(listStart)
			w.b = append(w.b, `{"ip":`...)
			w.b = appendJSONString(w.b, a)
			w.b = append(w.b, '}')
		}
	}
	if len(o) == 0 {
		// A list that was left out is added whole, with no order directive.
		w.b = append(w.b, ']')
		return true
	}
	endMergeList(w, k, "ip", o, n, ip, mark, listStart)
	return true
}

func conditionType(c v1.PodCondition) string { return string(c.Type) }

func podIP(p v1.PodIP) string   { return p.IP }
func hostIP(h v1.HostIP) string { return h.IP }

// uniqueKeys tells whether the merge keys of l are valid UTF-8 and differ.
// Lists are short (a few conditions, one or two IPs): pairs are compared.
func uniqueKeys[E any](l []E, key func(E) string) bool {
	for i := range l {
		ki := key(l[i])
		if !utf8.ValidString(ki) {
			return false
		}
		for j := range i {
			if key(l[j]) == ki {
				return false
			}
		}
	}
	return true
}

// indexKey is the index of the element of l with merge key k, or -1.
func indexKey[E any](l []E, key func(E) string, k string) int {
	for i := range l {
		if key(l[i]) == k {
			return i
		}
	}
	return -1
}

// removed is the merge keys of o missing in n, sorted (the two-way diff
// walks both lists sorted by key and writes deletions in that order).
func removed[E any](o, n []E, key func(E) string) []string {
	var gone []string
	for i := range o {
		if k := key(o[i]); indexKey(n, key, k) < 0 {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	return gone
}

// sameOrder tells whether o and n have the same merge keys in the same
// order.
func sameOrder[E any](o, n []E, key func(E) string) bool {
	if len(o) != len(n) {
		return false
	}
	for i := range o {
		if key(o[i]) != key(n[i]) {
			return false
		}
	}
	return true
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
