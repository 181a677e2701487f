package pod

import (
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// What a PodActor keeps of the runtime's status answers: the fields its
// readers use (plan.go, status.go, probes.go, hooks.go, ops.go, dns.go,
// final.go, evict.go and runtime.go itself), not the whole protos. A
// status answer carries the pod's labels and annotations, the mounts, the
// image spec, the log path, resources and the sandbox's namespace options:
// ~3 KiB per pod that nothing reads once the answer is taken in (the
// termination message, which reads the mounts and the log path, is read
// before). A field a new reader needs is added here.
//
// The kept statuses are read only: the annotation maps and strings that
// repeat from pod to pod (a container spec's hash, the restart count and
// grace period, image refs, reasons) are shared between actors.

// keptAnnotations are the container annotations read from a status:
// the spec's hash (plan.go: a changed spec restarts the container), the
// restart count where the attempt is missing (restartCount) and the grace
// period of an orphan (orphanGrace). Absent and empty read the same.
var keptAnnotations = [...]string{
	podspec.AnnotationContainerHash,
	podspec.AnnotationRestartCount,
	podspec.AnnotationPodTerminationGrace,
	podspec.AnnotationContainerResources, // what it was created with (resize.go)
}

// compactSandbox is st with what a PodActor reads of a sandbox: its ID,
// metadata (the attempt), state, creation time and network (the pod IPs).
// Left out: its labels and annotations (the pod's own), namespace options
// and runtime handler. nil stays nil.
func compactSandbox(st *runtimeapi.PodSandboxStatus) *runtimeapi.PodSandboxStatus {
	if st == nil {
		return nil
	}
	return &runtimeapi.PodSandboxStatus{
		Id:        st.Id,
		Metadata:  st.Metadata,
		State:     st.State,
		CreatedAt: st.CreatedAt,
		Network:   st.Network,
	}
}

// compactContainer is st with what a PodActor reads of a container, and
// message as its message (the runtime's with the termination message):
// ID, metadata (name and attempt), state, times, exit code, image ref,
// reason, the kept annotations, and the name label only where the
// metadata has no name (nameOf). Left out: the other labels and
// annotations, mounts, image spec, log path, resources, user and stop
// signal. nil stays nil.
func compactContainer(st *runtimeapi.ContainerStatus, message string) *runtimeapi.ContainerStatus {
	if st == nil {
		return nil
	}
	c := &runtimeapi.ContainerStatus{
		Id:          st.Id,
		Metadata:    st.Metadata,
		State:       st.State,
		CreatedAt:   st.CreatedAt,
		StartedAt:   st.StartedAt,
		FinishedAt:  st.FinishedAt,
		ExitCode:    st.ExitCode,
		ImageRef:    shared.str(st.ImageRef),
		Reason:      shared.str(st.Reason),
		Message:     message,
		Annotations: shared.annotations(st.Annotations),
		Resources:   compactResources(st.GetResources()),
	}
	if st.GetMetadata().GetName() == "" {
		if name := podspec.ContainerNameOf(st.Labels); name != "" {
			c.Labels = map[string]string{podspec.LabelContainerName: name}
		}
	}
	return c
}

// internMax bounds each table of the interner: past it the table starts
// afresh (what was handed out stays valid, it is only not shared with
// later answers).
const internMax = 4096

// internAnnotationsMax bounds the annotations' table lower: their key holds
// the spec's hash, which is the pod's own where its spec is (a projected
// token volume's name has a random suffix), so that a thousand pods gone
// left a thousand maps no one shares, 0.56 MB, held until the table
// filled. Pods of one spec still share one map.
const internAnnotationsMax = 256

// shared is the interner of the PodActors' kept statuses (they run
// inspections concurrently: it locks).
var shared interner

type interner struct {
	mu   sync.Mutex
	strs map[string]string
	anns map[[len(keptAnnotations)]string]map[string]string
}

// str is s, shared with the equal strings handed out before.
func (in *interner) str(s string) string {
	if s == "" {
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.strs[s]; ok {
		return v
	}
	if in.strs == nil || len(in.strs) >= internMax {
		in.strs = map[string]string{}
	}
	in.strs[s] = s
	return s
}

// annotations is a read-only map of the kept annotations of ann (nil when
// it has none of them), shared with the equal maps handed out before.
func (in *interner) annotations(ann map[string]string) map[string]string {
	var key [len(keptAnnotations)]string
	n := 0
	for i, k := range keptAnnotations {
		if v := ann[k]; v != "" {
			key[i] = v
			n++
		}
	}
	if n == 0 {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if m, ok := in.anns[key]; ok {
		return m
	}
	m := make(map[string]string, n)
	for i, k := range keptAnnotations {
		if key[i] != "" {
			m[k] = key[i]
		}
	}
	if in.anns == nil || len(in.anns) >= internAnnotationsMax {
		in.anns = map[[len(keptAnnotations)]string]map[string]string{}
	}
	in.anns[key] = m
	return m
}
