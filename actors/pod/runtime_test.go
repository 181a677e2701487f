package pod

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/messages"
)

// describeSnap writes a snapshot as "sandboxes | name: containers | index",
// each object as id=STATE in the snapshot's order.
func describeSnap(s *snapshot, sandboxOf map[string]string) string {
	if s == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, sb := range s.sandboxes {
		fmt.Fprintf(&b, "%s=%s ", sb.Id, strings.TrimPrefix(sb.State.String(), "SANDBOX_"))
	}
	for _, name := range slices.Sorted(maps.Keys(s.containers)) {
		fmt.Fprintf(&b, "| %s:", name)
		for _, c := range s.containers[name] {
			fmt.Fprintf(&b, " %s=%s", c.Id, strings.TrimPrefix(c.State.String(), "CONTAINER_"))
		}
		b.WriteString(" ")
	}
	b.WriteString("|")
	for _, id := range slices.Sorted(maps.Keys(sandboxOf)) {
		fmt.Fprintf(&b, " %s>%s", id, sandboxOf[id])
	}
	return b.String()
}

func sandboxStatusOf(id string, attempt uint32, state runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{Id: id, State: state,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1", Attempt: attempt}}
}

func containerStatusOf(id, name string, attempt uint32, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{Id: id, State: state, Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt}}
}

const (
	sbReady    = runtimeapi.PodSandboxState_SANDBOX_READY
	sbNotReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	cRunning   = runtimeapi.ContainerState_CONTAINER_RUNNING
	cExited    = runtimeapi.ContainerState_CONTAINER_EXITED
	cCreated   = runtimeapi.ContainerState_CONTAINER_CREATED
	cUnknown   = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

func TestSnapshotApply(t *testing.T) {
	// base: sandbox sb0 ready; app attempt 0 exited and attempt 1 running,
	// side attempt 0 running, all in sb0.
	base := func() *rtFixture {
		return newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, 0).running("sb0", "app", 1).running("sb0", "side", 0)
	}
	tests := []struct {
		name string
		rt   *rtFixture // nil: no snapshot yet
		d    *delta
		want string
	}{
		{
			name: "no snapshot yet: a new sandbox",
			d:    &delta{sandboxes: []*runtimeapi.PodSandboxStatus{sandboxStatusOf("sb0", 0, sbReady)}},
			want: "sb0=READY |",
		},
		{
			name: "an empty delta changes nothing",
			rt:   base(), d: &delta{},
			want: "sb0=READY | app: sb0-app-1=RUNNING sb0-app-0=EXITED | side: sb0-side-0=RUNNING | sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "a sandbox is replaced by its new status",
			rt:   base(), d: &delta{sandboxes: []*runtimeapi.PodSandboxStatus{sandboxStatusOf("sb0", 0, sbNotReady)}},
			want: "sb0=NOTREADY | app: sb0-app-1=RUNNING sb0-app-0=EXITED | side: sb0-side-0=RUNNING | sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "a new sandbox attempt comes first",
			rt:   base(), d: &delta{sandboxes: []*runtimeapi.PodSandboxStatus{sandboxStatusOf("sb1", 1, sbReady)}},
			want: "sb1=READY sb0=READY | app: sb0-app-1=RUNNING sb0-app-0=EXITED | side: sb0-side-0=RUNNING | sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "a container is replaced by its new status, in its place",
			rt:   base(), d: &delta{containers: []*runtimeapi.ContainerStatus{containerStatusOf("sb0-app-1", "app", 1, cExited)}},
			want: "sb0=READY | app: sb0-app-1=EXITED sb0-app-0=EXITED | side: sb0-side-0=RUNNING | sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "a new container attempt comes first, with its sandbox",
			rt:   base(),
			d: &delta{containers: []*runtimeapi.ContainerStatus{containerStatusOf("c9", "app", 2, cRunning)},
				sandboxOf: map[string]string{"c9": "sb0"}},
			want: "sb0=READY | app: c9=RUNNING sb0-app-1=RUNNING sb0-app-0=EXITED | side: sb0-side-0=RUNNING | c9>sb0 sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "a container of a new name",
			rt:   base(),
			d: &delta{containers: []*runtimeapi.ContainerStatus{containerStatusOf("c9", "init", 0, cCreated)},
				sandboxOf: map[string]string{"c9": "sb0"}},
			want: "sb0=READY | app: sb0-app-1=RUNNING sb0-app-0=EXITED | init: c9=CREATED | side: sb0-side-0=RUNNING | c9>sb0 sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "removed containers leave the snapshot and the index",
			rt:   base(), d: &delta{removed: []string{"sb0-app-0", "sb0-side-0"}},
			want: "sb0=READY | app: sb0-app-1=RUNNING | sb0-app-1>sb0",
		},
		{
			name: "a removed sandbox leaves",
			rt:   base().sandbox("sb1", 1, true), d: &delta{removed: []string{"sb0"}},
			want: "sb1=READY | app: sb0-app-1=RUNNING sb0-app-0=EXITED | side: sb0-side-0=RUNNING | sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "an unknown ID removed: nothing happens",
			rt:   base(), d: &delta{removed: []string{"nope"}},
			want: "sb0=READY | app: sb0-app-1=RUNNING sb0-app-0=EXITED | side: sb0-side-0=RUNNING | sb0-app-0>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
		{
			name: "add, change and remove at once",
			rt:   base(),
			d: &delta{
				containers: []*runtimeapi.ContainerStatus{containerStatusOf("sb0-side-0", "side", 0, cExited), containerStatusOf("c9", "app", 2, cCreated)},
				sandboxOf:  map[string]string{"c9": "sb0"},
				removed:    []string{"sb0-app-0"},
			},
			want: "sb0=READY | app: c9=CREATED sb0-app-1=RUNNING | side: sb0-side-0=EXITED | c9>sb0 sb0-app-1>sb0 sb0-side-0>sb0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in *snapshot
			var idx map[string]string
			if tt.rt != nil {
				in, idx = tt.rt.snap, tt.rt.sandboxOf
			}
			before := describeSnap(in, idx)
			got, gotIdx := in.apply(idx, tt.d)
			if s := describeSnap(got, gotIdx); s != tt.want {
				t.Errorf("applied:\n got  %s\n want %s", s, tt.want)
			}
			if after := describeSnap(in, idx); after != before {
				t.Errorf("the input changed:\n was %s\n now %s", before, after)
			}
		})
	}
}

// The input is left as it is even when the output is changed afterwards:
// an inspection in flight may hold it.
func TestSnapshotApplySharesNoContainers(t *testing.T) {
	rt := newRT().sandbox("sb0", 0, true).running("sb0", "app", 0)
	out, idx := rt.snap.apply(rt.sandboxOf, &delta{containers: []*runtimeapi.ContainerStatus{containerStatusOf("c9", "app", 1, cRunning)},
		sandboxOf: map[string]string{"c9": "sb0"}})
	out.containers["app"][0] = containerStatusOf("x", "app", 9, cExited)
	out.sandboxes[0] = sandboxStatusOf("y", 9, sbNotReady)
	idx["z"] = "sb0"
	if got, want := describeSnap(rt.snap, rt.sandboxOf), "sb0=READY | app: sb0-app-0=RUNNING | sb0-app-0>sb0"; got != want {
		t.Fatalf("the input changed with the output: %s, want %s", got, want)
	}
}

// sliceOf is the runtime cache's slice that shows the fixture as it is.
func sliceOf(f *rtFixture) *messages.RuntimePod {
	p := &messages.RuntimePod{UID: "uid-1", Sandboxes: []messages.RuntimeSandbox{}, Containers: []messages.RuntimeContainer{}}
	for _, sb := range f.snap.sandboxes {
		p.Sandboxes = append(p.Sandboxes, messages.RuntimeSandbox{ID: sb.Id, State: sb.State})
	}
	for _, name := range slices.Sorted(maps.Keys(f.snap.containers)) {
		for _, c := range f.snap.containers[name] {
			p.Containers = append(p.Containers, messages.RuntimeContainer{ID: c.Id, SandboxID: f.sandboxOf[c.Id], State: c.State})
		}
	}
	return p
}

func TestSnapshotMatches(t *testing.T) {
	base := func() *rtFixture {
		return newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, 0).running("sb0", "app", 1)
	}
	tests := []struct {
		name  string
		rt    *rtFixture // the actor's view; nil: none yet
		slice func(p *messages.RuntimePod) *messages.RuntimePod
		want  bool
	}{
		{name: "the same objects in the same states", rt: base(), slice: same, want: true},
		{
			name: "the same, listed in another order", rt: base(), want: true,
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				slices.Reverse(p.Containers)
				return p
			},
		},
		{name: "an empty pod and an empty slice", rt: newRT(), slice: same, want: true},
		{name: "no slice", rt: base(), slice: func(*messages.RuntimePod) *messages.RuntimePod { return nil }},
		{name: "no view yet", slice: func(*messages.RuntimePod) *messages.RuntimePod { return sliceOf(base()) }},
		{
			name: "a new container", rt: base(),
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				p.Containers = append(p.Containers, messages.RuntimeContainer{ID: "c9", SandboxID: "sb0", State: cCreated})
				return p
			},
		},
		{
			name: "a container missing", rt: base(),
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				p.Containers = p.Containers[1:]
				return p
			},
		},
		{
			name: "a container replaced by another of the same state", rt: base(),
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				p.Containers[0] = messages.RuntimeContainer{ID: "other", SandboxID: "sb0", State: p.Containers[0].State}
				return p
			},
		},
		{
			name: "a container's state changed", rt: base(),
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				for i := range p.Containers {
					if p.Containers[i].State == cRunning {
						p.Containers[i].State = cExited
					}
				}
				return p
			},
		},
		{
			name: "a container in state UNKNOWN, in the view too", slice: same,
			rt: func() *rtFixture { f := base(); f.add("sb0", "side", 0, cUnknown); return f }(),
		},
		{
			name: "a new sandbox", rt: base(),
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				p.Sandboxes = append(p.Sandboxes, messages.RuntimeSandbox{ID: "sb1", State: sbReady})
				return p
			},
		},
		{
			name: "the sandbox missing", rt: base(),
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				p.Sandboxes = nil
				return p
			},
		},
		{
			name: "the sandbox's state changed", rt: base(),
			slice: func(p *messages.RuntimePod) *messages.RuntimePod {
				p.Sandboxes[0].State = sbNotReady
				return p
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var snap *snapshot
			var p *messages.RuntimePod
			if tt.rt != nil {
				snap = tt.rt.snap
				p = tt.slice(sliceOf(tt.rt)) // new objects: a case may change them
			} else {
				p = tt.slice(nil)
			}
			if got := snap.matches(p); got != tt.want {
				t.Errorf("matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func same(p *messages.RuntimePod) *messages.RuntimePod { return p }
