package kube

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// upstreamPodStatusPatch is the patch as upstream's status manager builds
// it (pkg/util/pod PatchPodStatus, preparePatchBytesForPodStatus): the
// two-way merge patch of the two pods, decoded to add metadata.uid and
// encoded again. It is the reference the patch PatchPodStatus sends is
// checked against, and the "before" of the benchmark.
func upstreamPodStatusPatch(uid types.UID, oldStatus, newStatus *v1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *oldStatus})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *newStatus})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"uid": string(uid)}
	return json.Marshal(m)
}

// startTransition is a pod's status write when its only container has
// started: Pending to Running, Ready and ContainersReady turn True, the
// container runs, the pod IP is known.
func startTransition() (types.UID, *v1.PodStatus, *v1.PodStatus) {
	created := metav1.NewTime(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC))
	started := metav1.NewTime(created.Add(2 * time.Second))
	old := &v1.PodStatus{
		Phase: v1.PodPending,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: created},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: created},
			{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: created, Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, LastTransitionTime: created, Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: created},
		},
		HostIP:    "10.0.0.5",
		HostIPs:   []v1.HostIP{{IP: "10.0.0.5"}},
		StartTime: &created,
		QOSClass:  v1.PodQOSBestEffort,
		ContainerStatuses: []v1.ContainerStatus{{
			Name:  "app",
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			Image: "registry.k8s.io/pause:3.10",
		}},
	}
	started2 := true
	upd := old.DeepCopy()
	upd.Phase = v1.PodRunning
	upd.Conditions[2] = v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: started}
	upd.Conditions[3] = v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: started}
	upd.PodIP = "10.244.1.17"
	upd.PodIPs = []v1.PodIP{{IP: "10.244.1.17"}}
	upd.ContainerStatuses = []v1.ContainerStatus{{
		Name:        "app",
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
		Ready:       true,
		Started:     &started2,
		Image:       "registry.k8s.io/pause:3.10",
		ImageID:     "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
		ContainerID: "containerd://4f0e3b1a2c7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f",
	}}
	return "6a1f3e0c-7b1d-4c55-9a3e-2d9f1c0b8e77", old, upd
}

// decode is a JSON document as a map, to compare patches by content rather
// than by key order.
func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("patch %s: %v", b, err)
	}
	return m
}

func TestWithUID(t *testing.T) {
	tests := []struct {
		name  string
		patch string
		uid   types.UID
		want  string
	}{
		{name: "empty patch", patch: `{}`, uid: "u1", want: `{"metadata":{"uid":"u1"}}`},
		{name: "status patch", patch: `{"status":{"phase":"Running"}}`, uid: "u1",
			want: `{"metadata":{"uid":"u1"},"status":{"phase":"Running"}}`},
		{name: "uid to escape", patch: `{"status":{"phase":"Running"}}`, uid: "a\"b\\c\n<é>\xff",
			want: `{"metadata":{"uid":"a\"b\\c\n\u003cé\u003e\ufffd"},"status":{"phase":"Running"}}`},
		{name: "empty uid", patch: `{}`, uid: "", want: `{"metadata":{"uid":""}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := withUID([]byte(tc.patch), tc.uid)
			if string(got) != tc.want {
				t.Errorf("withUID(%s, %q) = %s, want %s", tc.patch, tc.uid, got, tc.want)
			}
			// Invalid UTF-8 reads back as U+FFFD, as []rune makes it.
			if m := decode(t, got); m["metadata"].(map[string]any)["uid"] != string([]rune(string(tc.uid))) {
				t.Errorf("uid decodes to %q, want %q", m["metadata"].(map[string]any)["uid"], tc.uid)
			}
		})
	}
}

// TestPodStatusPatchStartTransition: the patch of a typical start is the
// upstream one, key for key.
func TestPodStatusPatchStartTransition(t *testing.T) {
	uid, old, upd := startTransition()
	want, err := upstreamPodStatusPatch(uid, old, upd)
	if err != nil {
		t.Fatal(err)
	}
	got, err := podStatusPatch(uid, old, upd)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decode(t, got), decode(t, want)) {
		t.Errorf("patch\n%s\nwant (upstream)\n%s", got, want)
	}
}

// BenchmarkPodStatusPatch builds the status patch of a typical start
// (startTransition) the upstream way, through the two-way diff with the UID
// spliced in (the fallback), and the way PatchPodStatus does.
func BenchmarkPodStatusPatch(b *testing.B) {
	uid, old, upd := startTransition()
	if _, ok := directPodStatusPatch(uid, old, upd); !ok {
		b.Fatal("the start transition does not take the direct patch")
	}
	for _, bc := range []struct {
		name string
		fn   func(types.UID, *v1.PodStatus, *v1.PodStatus) ([]byte, error)
	}{
		{"upstream", upstreamPodStatusPatch},
		{"twoway-splice", twoWayPodStatusPatch},
		{"direct", podStatusPatch},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(uid, old, upd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ---- the direct patch against the upstream one on random statuses

// genStatus builds random pod statuses, and changes of them, from a seeded
// source: what a status write can see, JSON-special strings included.
type genStatus struct {
	r  *rand.Rand
	t0 time.Time
}

func newGenStatus(seed uint64) *genStatus {
	return &genStatus{r: rand.New(rand.NewPCG(seed, 0x5eed)), t0: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)}
}

func pick[T any](g *genStatus, l ...T) T { return l[g.r.IntN(len(l))] }

func (g *genStatus) chance(p float64) bool { return g.r.Float64() < p }

// text is a string as a message or reason may be: empty, plain, or with
// what JSON escapes (quotes, controls, HTML, U+2028, invalid UTF-8; "\xff"
// and "\xfe" encode the same).
func (g *genStatus) text() string {
	return pick(g, "", "", "plain", "ContainersNotReady", `quote " and backslash \`, "<b>&amp;</b>",
		"line\nbreak\ttab\r", "ünïcödé ✓ 日本", "sep\u2028\u2029", "ctl\x00\x1f", "bad \xff", "bad \xfe",
		"containers with unready status: [app sidecar]")
}

// mtime is a metav1.Time: zero (null), a second, the same second with a
// fraction or in another zone, or a later second.
func (g *genStatus) mtime() metav1.Time {
	switch g.r.IntN(6) {
	case 0:
		return metav1.Time{}
	case 1:
		return metav1.NewTime(g.t0.Add(500 * time.Millisecond))
	case 2:
		return metav1.NewTime(g.t0.In(time.FixedZone("X", 3600)))
	case 3:
		return metav1.NewTime(g.t0.Add(time.Duration(g.r.IntN(3)) * time.Second))
	default:
		return metav1.NewTime(g.t0)
	}
}

func (g *genStatus) timePtr() *metav1.Time {
	if g.chance(0.3) {
		return nil
	}
	t := g.mtime()
	return &t
}

var condTypes = []v1.PodConditionType{v1.PodScheduled, v1.PodInitialized, v1.PodReady, v1.ContainersReady,
	v1.PodReadyToStartContainers, v1.DisruptionTarget, "example.com/gate", "", `odd "type" <x>`}

func (g *genStatus) condition(t v1.PodConditionType) v1.PodCondition {
	c := v1.PodCondition{Type: t, Status: pick(g, v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown, "")}
	if g.chance(0.2) {
		c.ObservedGeneration = g.r.Int64N(3)
	}
	if g.chance(0.3) {
		c.LastProbeTime = g.mtime()
	}
	if g.chance(0.8) {
		c.LastTransitionTime = g.mtime()
	}
	c.Reason, c.Message = g.text(), g.text()
	return c
}

// conditions is a list of distinct types, nil or empty when none, with
// now and then a repeated type (which the direct patch leaves to the
// two-way one).
func (g *genStatus) conditions() []v1.PodCondition {
	n := g.r.IntN(6)
	if n == 0 {
		return pick(g, nil, []v1.PodCondition{})
	}
	var l []v1.PodCondition
	for _, i := range g.r.Perm(len(condTypes))[:n] {
		l = append(l, g.condition(condTypes[i]))
	}
	if g.chance(0.02) {
		l = append(l, g.condition(l[0].Type))
	}
	return l
}

var ipPool = []string{"10.244.1.17", "10.244.1.18", "fd00::17", "192.168.0.1", ""}

func (g *genStatus) ipList() []string {
	n := g.r.IntN(4)
	if n == 0 {
		return pick(g, nil, []string{})
	}
	var l []string
	for _, i := range g.r.Perm(len(ipPool))[:n] {
		l = append(l, ipPool[i])
	}
	if g.chance(0.02) {
		l = append(l, l[0])
	}
	return l
}

func (g *genStatus) state() v1.ContainerState {
	switch g.r.IntN(4) {
	case 0:
		return v1.ContainerState{}
	case 1:
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: pick(g, "ContainerCreating", "CrashLoopBackOff", "ErrImagePull"), Message: g.text()}}
	case 2:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: g.mtime()}}
	default:
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: int32(g.r.IntN(3)) * 137, Signal: int32(g.r.IntN(2)) * 9, Reason: pick(g, "Completed", "Error", "OOMKilled"),
			Message: g.text(), StartedAt: g.mtime(), FinishedAt: g.mtime(), ContainerID: pick(g, "", "containerd://abc"),
		}}
	}
}

func (g *genStatus) containerStatuses() []v1.ContainerStatus {
	n := g.r.IntN(3)
	if n == 0 {
		return pick(g, nil, []v1.ContainerStatus{})
	}
	l := make([]v1.ContainerStatus, n)
	for i := range l {
		started := g.chance(0.5)
		l[i] = v1.ContainerStatus{
			Name: pick(g, "app", "sidecar", "init"), State: g.state(), LastTerminationState: g.state(),
			Ready: g.chance(0.5), RestartCount: int32(g.r.IntN(3)), Image: "busybox", ImageID: pick(g, "", "docker.io/library/busybox@sha256:1"),
			ContainerID: pick(g, "", "containerd://abc", "containerd://def"), Started: pick(g, nil, &started),
		}
		if g.chance(0.1) {
			l[i].AllocatedResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse(pick(g, "100m", "0.1", "1"))}
		}
	}
	return l
}

// status is a random PodStatus; rare fields the direct patch does not diff
// are set now and then.
func (g *genStatus) status() *v1.PodStatus {
	s := &v1.PodStatus{
		Phase:                 pick[v1.PodPhase](g, "", v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown),
		Conditions:            g.conditions(),
		Message:               g.text(),
		Reason:                pick(g, "", "Evicted", "NodeLost", "bad \xff"),
		HostIP:                pick(g, "", "10.0.0.5"),
		PodIP:                 pick(g, "", "10.244.1.17", "fd00::17"),
		StartTime:             g.timePtr(),
		InitContainerStatuses: g.containerStatuses(),
		ContainerStatuses:     g.containerStatuses(),
		QOSClass:              pick[v1.PodQOSClass](g, "", v1.PodQOSBestEffort, v1.PodQOSBurstable),
	}
	for _, ip := range g.ipList() {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	for _, ip := range g.ipList() {
		s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
	}
	if g.chance(0.1) {
		s.ObservedGeneration = g.r.Int64N(3)
	}
	if g.chance(0.05) {
		s.EphemeralContainerStatuses = g.containerStatuses()
	}
	if g.chance(0.05) {
		s.NominatedNodeName = "node-b"
	}
	if g.chance(0.05) {
		s.Resize = v1.PodResizeStatusInProgress
	}
	if g.chance(0.05) {
		s.AllocatedResources = v1.ResourceList{v1.ResourceMemory: resource.MustParse(pick(g, "64Mi", "67108864"))}
	}
	if g.chance(0.05) {
		claimName := "claim-1"
		s.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: pick(g, nil, &claimName)}}
	}
	return s
}

// change is a new status from old: each part kept, changed a little
// (conditions added, removed, reordered, edited), or drawn again.
func (g *genStatus) change(old *v1.PodStatus) *v1.PodStatus {
	if g.chance(0.1) {
		return g.status()
	}
	s := old.DeepCopy()
	other := g.status()
	if g.chance(0.5) {
		s.Phase = other.Phase
	}
	if g.chance(0.7) {
		s.Conditions = g.changeConditions(s.Conditions)
	}
	if g.chance(0.2) {
		s.Message, s.Reason = other.Message, other.Reason
	}
	if g.chance(0.2) {
		s.HostIP, s.HostIPs = other.HostIP, other.HostIPs
	}
	if g.chance(0.4) {
		s.PodIP, s.PodIPs = other.PodIP, other.PodIPs
	}
	if g.chance(0.3) && len(s.PodIPs) > 1 {
		g.r.Shuffle(len(s.PodIPs), func(i, j int) { s.PodIPs[i], s.PodIPs[j] = s.PodIPs[j], s.PodIPs[i] })
	}
	if g.chance(0.3) {
		s.StartTime = other.StartTime
	}
	switch cs := s.ContainerStatuses; {
	case g.chance(0.5):
		s.ContainerStatuses = other.ContainerStatuses
	case len(cs) > 0 && cs[0].State.Running != nil && g.chance(0.5):
		// Unequal structs that encode the same: no change to write.
		cs[0].State.Running.StartedAt = metav1.NewTime(cs[0].State.Running.StartedAt.Add(time.Millisecond))
	case len(cs) > 0 && g.chance(0.3):
		cs[0].State = g.state()
		cs[0].Ready = !cs[0].Ready
	}
	if g.chance(0.2) {
		s.InitContainerStatuses = other.InitContainerStatuses
	}
	if g.chance(0.1) {
		s.EphemeralContainerStatuses = other.EphemeralContainerStatuses
	}
	if g.chance(0.1) {
		s.QOSClass, s.ObservedGeneration, s.NominatedNodeName, s.Resize = other.QOSClass, other.ObservedGeneration, other.NominatedNodeName, other.Resize
	}
	if g.chance(0.1) {
		s.AllocatedResources, s.ResourceClaimStatuses = other.AllocatedResources, other.ResourceClaimStatuses
	}
	return s
}

func (g *genStatus) changeConditions(l []v1.PodCondition) []v1.PodCondition {
	if g.chance(0.2) {
		return g.conditions()
	}
	if len(l) > 0 && g.chance(0.4) { // remove one
		i := g.r.IntN(len(l))
		l = append(l[:i:i], l[i+1:]...)
	}
	if g.chance(0.4) { // add one of a new type
		for _, t := range condTypes {
			if indexKey(l, conditionType, string(t)) < 0 {
				l = append(l, g.condition(t))
				break
			}
		}
	}
	if len(l) > 1 && g.chance(0.3) {
		g.r.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
	}
	for i := range l {
		if g.chance(0.3) {
			c := g.condition(l[i].Type)
			switch g.r.IntN(3) {
			case 0: // a transition: status, time, reason
				l[i].Status, l[i].LastTransitionTime, l[i].Reason = c.Status, c.LastTransitionTime, c.Reason
			case 1: // only the message
				l[i].Message = c.Message
			default:
				l[i] = c
			}
		}
	}
	if len(l) == 0 {
		return pick(g, nil, []v1.PodCondition{})
	}
	return l
}

// server is the status the API server holds: the old one, with conditions
// that others own (the scheduler's PodScheduled, a readiness gate's) and a
// claim status added, at random places.
func (g *genStatus) server(old *v1.PodStatus) *v1.PodStatus {
	s := old.DeepCopy()
	for _, t := range []v1.PodConditionType{v1.PodScheduled, "example.com/gate", "example.com/other-gate"} {
		if indexKey(s.Conditions, conditionType, string(t)) >= 0 || g.chance(0.3) {
			continue
		}
		i := g.r.IntN(len(s.Conditions) + 1)
		s.Conditions = slices.Insert(s.Conditions, i, v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(g.t0)})
	}
	if g.chance(0.3) {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: "10.9.9.9"})
	}
	if g.chance(0.2) {
		s.NominatedNodeName = "node-c"
	}
	return s
}

// applied is base with patch applied as the API server applies a strategic
// merge patch to a pod, decoded.
func applied(base *v1.Pod, patch []byte) (*v1.Pod, error) {
	b, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	out, err := strategicpatch.StrategicMergePatch(b, patch, v1.Pod{})
	if err != nil {
		return nil, err
	}
	p := &v1.Pod{}
	return p, json.Unmarshal(out, p)
}

// checkPatch compares the patch PatchPodStatus sends with upstream's for
// one change of status: the same keys and values once decoded, and the
// same pod once applied, to the old status and to the server's.
func checkPatch(t *testing.T, g *genStatus) (direct bool) {
	t.Helper()
	const uid = types.UID("6a1f3e0c-7b1d-4c55-9a3e-2d9f1c0b8e77")
	old := g.status()
	upd := g.change(old)
	srv := g.server(old)
	want, err := upstreamPodStatusPatch(uid, old, upd)
	if err != nil {
		t.Fatalf("upstream patch: %v", err)
	}
	got, err := podStatusPatch(uid, old, upd)
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	_, direct = directPodStatusPatch(uid, old, upd)
	if !reflect.DeepEqual(decode(t, got), decode(t, want)) {
		t.Fatalf("old %+v\nnew %+v\npatch\n%s\nwant (upstream)\n%s", old, upd, got, want)
	}
	for _, base := range []*v1.PodStatus{old, srv} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: uid}, Status: *base}
		gotPod, gotErr := applied(pod, got)
		wantPod, wantErr := applied(pod, want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("base %+v\napplying %s: %v\nupstream's %s: %v", base, got, gotErr, want, wantErr)
		}
		if !reflect.DeepEqual(gotPod, wantPod) {
			t.Fatalf("base %+v\npatch %s gives\n%+v\nupstream's %s gives\n%+v", base, got, gotPod.Status, want, wantPod.Status)
		}
	}
	return direct
}

// TestPodStatusPatchMatchesUpstream checks the patch on random changes of
// status (see checkPatch); most of them must take the direct patch.
func TestPodStatusPatchMatchesUpstream(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	direct := 0
	for seed := range uint64(n) {
		if checkPatch(t, newGenStatus(seed)) {
			direct++
		}
	}
	if direct < n*8/10 {
		t.Errorf("%d of %d patches were direct, want most", direct, n)
	}
}

// FuzzPodStatusPatch is TestPodStatusPatchMatchesUpstream with seeds from
// the fuzzer.
func FuzzPodStatusPatch(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		checkPatch(t, newGenStatus(seed))
	})
}

// TestPodStatusCovered: the direct patch knows every field of the
// k8s.io/api in go.mod. A new field turns it off (every status write then
// pays for the two-way diff): this test says so at the upgrade.
func TestPodStatusCovered(t *testing.T) {
	if !podStatusCovered {
		t.Fatal("v1.PodStatus (or PodCondition, PodIP, HostIP) has fields directPodStatusPatch does not know: " +
			"every status patch takes the two-way diff; teach podpatch.go the new fields and their patch strategies")
	}
}

func TestHasFields(t *testing.T) {
	type two struct {
		A string   `json:"a,omitempty"`
		B []string `json:"b,omitempty" patchStrategy:"merge" patchMergeKey:"k"`
	}
	tests := []struct {
		name string
		want []fieldTags
		ok   bool
	}{
		{name: "same", want: []fieldTags{{"A", "a,omitempty", "", ""}, {"B", "b,omitempty", "merge", "k"}}, ok: true},
		{name: "a field more", want: []fieldTags{{"A", "a,omitempty", "", ""}}},
		{name: "another strategy", want: []fieldTags{{"A", "a,omitempty", "", ""}, {"B", "b,omitempty", "", ""}}},
		{name: "another merge key", want: []fieldTags{{"A", "a,omitempty", "", ""}, {"B", "b,omitempty", "merge", "x"}}},
		{name: "another json name", want: []fieldTags{{"A", "a", "", ""}, {"B", "b,omitempty", "merge", "k"}}},
		{name: "another field", want: []fieldTags{{"A", "a,omitempty", "", ""}, {"C", "b,omitempty", "merge", "k"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hasFields(reflect.TypeFor[two](), tc.want); got != tc.ok {
				t.Errorf("hasFields = %v, want %v", got, tc.ok)
			}
		})
	}
}

// TestDirectPodStatusPatchLeavesToTwoWay: what the direct patch does not
// diff takes the two-way one, and PatchPodStatus's patch is upstream's.
func TestDirectPodStatusPatchLeavesToTwoWay(t *testing.T) {
	mem := func(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse(q)} }
	cond := func(typ v1.PodConditionType, st v1.ConditionStatus) v1.PodCondition {
		return v1.PodCondition{Type: typ, Status: st}
	}
	tests := []struct {
		name     string
		old, upd v1.PodStatus
		direct   bool
	}{
		{name: "allocated resources changed", old: v1.PodStatus{AllocatedResources: mem("64Mi")},
			upd: v1.PodStatus{AllocatedResources: mem("128Mi")}},
		{name: "allocated resources set", upd: v1.PodStatus{AllocatedResources: mem("64Mi")}},
		{name: "allocated resources the same", old: v1.PodStatus{AllocatedResources: mem("64Mi")},
			upd: v1.PodStatus{Phase: v1.PodRunning, AllocatedResources: mem("64Mi")}, direct: true},
		{name: "allocated resources empty and nil", old: v1.PodStatus{AllocatedResources: v1.ResourceList{}},
			upd: v1.PodStatus{Phase: v1.PodRunning}, direct: true},
		{name: "resources set", upd: v1.PodStatus{Resources: &v1.ResourceRequirements{}}},
		{name: "resource claim status set", upd: v1.PodStatus{ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "gpu"}}}},
		{name: "repeated condition type",
			old: v1.PodStatus{Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse)}},
			upd: v1.PodStatus{Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue), cond(v1.PodReady, v1.ConditionFalse)}}},
		{name: "condition type not UTF-8",
			old: v1.PodStatus{Conditions: []v1.PodCondition{cond("\xff", v1.ConditionFalse)}},
			upd: v1.PodStatus{Conditions: []v1.PodCondition{cond("\xff", v1.ConditionTrue)}}},
		{name: "repeated pod IP", old: v1.PodStatus{PodIPs: []v1.PodIP{{IP: "10.0.0.1"}}},
			upd: v1.PodStatus{PodIPs: []v1.PodIP{{IP: "10.0.0.1"}, {IP: "10.0.0.1"}}}},
		{name: "conditions", old: v1.PodStatus{Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse)}},
			upd: v1.PodStatus{Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue)}}, direct: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := directPodStatusPatch("u1", &tc.old, &tc.upd); ok != tc.direct {
				t.Errorf("direct patch: %v, want %v", ok, tc.direct)
			}
			got, err := podStatusPatch("u1", &tc.old, &tc.upd)
			if err != nil {
				t.Fatal(err)
			}
			want, err := upstreamPodStatusPatch("u1", &tc.old, &tc.upd)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(decode(t, got), decode(t, want)) {
				t.Errorf("patch\n%s\nwant (upstream)\n%s", got, want)
			}
		})
	}
}
