package node

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/checkpoint"
)

// The allocation checkpoint (upstream's allocated_pods_state): every
// admitted pod's allocated resources, its containers' by name and its
// pod-level ones, so that a restarted agent admits the pods with the
// resources they run with and neither applies a resize again nor loses
// one it allocated. It is written off the mailbox: the actor hands the
// saver its records (immutable; a change replaces one) and the saver
// writes the newest set, so a burst of admissions costs one write per
// write time, not one per pod.

// AllocationStore keeps the allocation checkpoint (the agent wires a file
// at <root-dir>/allocated_pods_state). Load of a missing checkpoint
// returns nil, nil; Save replaces it whole (atomically, where it can).
type AllocationStore interface {
	Load() ([]byte, error)
	Save([]byte) error
}

// allocationVersion is the format written; another version is ignored.
const allocationVersion = 1

// allocData is the checkpoint's data, in internal/checkpoint's envelope.
type allocData struct {
	Pods []*allocRecord `json:"pods"`
}

// allocRecord is one pod's allocation. Records are never changed once
// made (the saver may be encoding one).
type allocRecord struct {
	UID        types.UID                          `json:"uid"`
	Pod        *v1.ResourceRequirements           `json:"pod,omitempty"`
	Containers map[string]v1.ResourceRequirements `json:"containers"`
}

func recordOf(p *v1.Pod) *allocRecord {
	r := &allocRecord{UID: p.UID, Containers: map[string]v1.ResourceRequirements{}}
	if p.Spec.Resources != nil {
		r.Pod = p.Spec.Resources.DeepCopy()
	}
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			r.Containers[list[i].Name] = *list[i].Resources.DeepCopy()
		}
	}
	return r
}

// matches reports whether p asks for the allocated resources.
func (r *allocRecord) matches(p *v1.Pod) bool {
	return equality.Semantic.DeepEqual(r, recordOf(p))
}

// apply is p with the allocated resources (a copy when they differ; the
// pod's containers not in the record keep theirs).
func (r *allocRecord) apply(p *v1.Pod) *v1.Pod {
	if r.matches(p) {
		return p
	}
	out := p.DeepCopy()
	if r.Pod != nil {
		out.Spec.Resources = r.Pod.DeepCopy()
	} else {
		out.Spec.Resources = nil
	}
	for _, list := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			if res, ok := r.Containers[list[i].Name]; ok {
				list[i].Resources = *res.DeepCopy()
			}
		}
	}
	return out
}

// allocations is the NodeActor's allocation part: the records by pod, and
// those loaded from the checkpoint that no pod has claimed yet.
type allocations struct {
	saver *allocSaver // nil: no checkpoint
	pods  map[types.UID]*allocRecord
}

// load reads the checkpoint (a corrupt one is logged and ignored: the
// pods are allocated what they ask for).
func (al *allocations) load(s *allocSaver, log *slog.Logger) {
	al.saver, al.pods = s, map[types.UID]*allocRecord{}
	if s == nil {
		return
	}
	b, err := s.load()
	if err != nil || b == nil {
		if err != nil {
			log.Warn("allocation checkpoint unreadable, pods get what they ask for", "err", err)
		}
		return
	}
	var d allocData
	if err := checkpoint.Decode(b, allocationVersion, &d); err != nil {
		log.Warn("allocation checkpoint ignored", "err", err)
		return
	}
	for _, r := range d.Pods {
		if r != nil && r.UID != "" {
			al.pods[r.UID] = r
		}
	}
}

func (al *allocations) get(uid types.UID) *allocRecord { return al.pods[uid] }

// view is p with its allocated resources, when it has a record.
func (al *allocations) view(p *v1.Pod) *v1.Pod {
	if r := al.pods[p.UID]; r != nil {
		return r.apply(p)
	}
	return p
}

// set makes p's resources its allocation.
func (al *allocations) set(p *v1.Pod, log *slog.Logger) {
	if r := al.pods[p.UID]; r != nil && r.matches(p) {
		return
	}
	al.pods[p.UID] = recordOf(p)
	al.save(log)
}

// forget drops uid's allocation (the pod is gone).
func (al *allocations) forget(uid types.UID, log *slog.Logger) {
	if _, ok := al.pods[uid]; !ok {
		return
	}
	delete(al.pods, uid)
	al.save(log)
}

// keepOnly drops the records of the pods keep says no to (loaded for pods
// that did not come back).
func (al *allocations) keepOnly(keep func(types.UID) bool, log *slog.Logger) {
	n := len(al.pods)
	maps.DeleteFunc(al.pods, func(uid types.UID, _ *allocRecord) bool { return !keep(uid) })
	if len(al.pods) != n {
		al.save(log)
	}
}

func (al *allocations) save(log *slog.Logger) {
	if al.saver != nil {
		al.saver.save(maps.Clone(al.pods), log)
	}
}

// allocSaver writes the newest set of records off the mailbox. It outlives
// the NodeActor's incarnations (settings holds it): a restarted NodeActor
// loads what the last one handed it, written or not.
type allocSaver struct {
	store AllocationStore

	mu      sync.Mutex
	next    map[types.UID]*allocRecord // to write; nil: nothing new
	last    []byte                     // the newest encoded (what load returns first)
	writing bool
	done    *sync.Cond // writing ended (tests: flush)
}

func newAllocSaver(s AllocationStore) *allocSaver {
	if s == nil {
		return nil
	}
	as := &allocSaver{store: s}
	as.done = sync.NewCond(&as.mu)
	return as
}

func (s *allocSaver) load() ([]byte, error) {
	s.mu.Lock()
	next, last := s.next, s.last
	s.mu.Unlock()
	if next != nil {
		return encodeAllocs(next)
	}
	if last != nil {
		return last, nil
	}
	return s.store.Load()
}

func (s *allocSaver) save(pods map[types.UID]*allocRecord, log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = pods
	if s.writing {
		return // the writer takes it next
	}
	s.writing = true
	go s.write(log)
}

func (s *allocSaver) write(log *slog.Logger) {
	for {
		s.mu.Lock()
		pods := s.next
		s.next = nil
		if pods == nil {
			s.writing = false
			s.done.Broadcast()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		b, err := encodeAllocs(pods)
		if err == nil {
			s.mu.Lock()
			s.last = b
			s.mu.Unlock()
			err = s.store.Save(b)
		}
		if err != nil {
			log.Error("write allocation checkpoint", "err", err)
		}
	}
}

// flush waits until what was handed to the saver is written.
func (s *allocSaver) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.writing {
		s.done.Wait()
	}
}

func encodeAllocs(pods map[types.UID]*allocRecord) ([]byte, error) {
	d := allocData{Pods: make([]*allocRecord, 0, len(pods))}
	for _, r := range pods {
		d.Pods = append(d.Pods, r)
	}
	// Sorted, so that equal sets write equal files.
	slices.SortFunc(d.Pods, func(x, y *allocRecord) int { return strings.Compare(string(x.UID), string(y.UID)) })
	return checkpoint.Encode(allocationVersion, &d)
}
