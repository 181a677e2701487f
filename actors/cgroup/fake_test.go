package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// fakeManager is an in-memory cgroup tree: each cgroup's values (what was
// written last, field by field) and processes. refuse makes a write fail
// as the kernel would.
type fakeManager struct {
	mu      sync.Mutex
	driver  podspec.CgroupDriver
	cgroups map[string]*fakeCgroup
	// refuse: the error a write (Create/Update) to a cgroup whose path
	// contains the key returns.
	refuse map[string]error
	// gate, when set, holds every Create until it is closed.
	gate chan struct{}
}

type fakeCgroup struct {
	values podspec.CgroupResources
	pids   []int
}

var _ Manager = (*fakeManager)(nil)

func newFakeManager(existing ...string) *fakeManager {
	f := &fakeManager{driver: podspec.CgroupDriverCgroupfs, cgroups: map[string]*fakeCgroup{"": {}}, refuse: map[string]error{}}
	for _, e := range existing {
		f.cgroups[e] = &fakeCgroup{}
	}
	return f
}

func key(n podspec.CgroupName) string { return strings.Join(n, "/") }

func (f *fakeManager) Version() int                 { return 1 }
func (f *fakeManager) Driver() podspec.CgroupDriver { return f.driver }

func (f *fakeManager) Exists(n podspec.CgroupName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.cgroups[key(n)]
	return ok
}

func (f *fakeManager) refused(n podspec.CgroupName) error {
	for k, err := range f.refuse {
		if strings.Contains(key(n), k) {
			return err
		}
	}
	return nil
}

func (f *fakeManager) Create(n podspec.CgroupName, r *podspec.CgroupResources) error {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refused(n); err != nil {
		return err
	}
	for i := 1; i <= len(n); i++ {
		if _, ok := f.cgroups[key(n[:i])]; !ok {
			f.cgroups[key(n[:i])] = &fakeCgroup{}
		}
	}
	apply(&f.cgroups[key(n)].values, r)
	return nil
}

func apply(to *podspec.CgroupResources, r *podspec.CgroupResources) {
	if r == nil {
		return
	}
	if r.CPUShares != nil {
		to.CPUShares = r.CPUShares
	}
	if r.CPUQuota != nil {
		to.CPUQuota = r.CPUQuota
	}
	if r.CPUPeriod != nil {
		to.CPUPeriod = r.CPUPeriod
	}
	if r.Memory != nil {
		to.Memory = r.Memory
	}
	if r.PidsLimit != nil {
		to.PidsLimit = r.PidsLimit
	}
	if r.HugePageLimit != nil {
		to.HugePageLimit = maps.Clone(r.HugePageLimit)
	}
}

func (f *fakeManager) Update(n podspec.CgroupName, r *podspec.CgroupResources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cgroups[key(n)]
	if !ok {
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s not found", key(n)))
	}
	if err := f.refused(n); err != nil {
		return err
	}
	apply(&c.values, r)
	return nil
}

func (f *fakeManager) Read(n podspec.CgroupName) (*podspec.CgroupResources, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cgroups[key(n)]
	if !ok {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s not found", key(n)))
	}
	v := c.values
	return &v, nil
}

func (f *fakeManager) Destroy(n podspec.CgroupName) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := key(n)
	if _, ok := f.cgroups[k]; !ok {
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s not found", k))
	}
	for other, c := range f.cgroups {
		if (other == k || strings.HasPrefix(other, k+"/")) && len(c.pids) > 0 {
			return errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("cgroup %s holds processes", k))
		}
	}
	for other := range f.cgroups {
		if other == k || strings.HasPrefix(other, k+"/") {
			delete(f.cgroups, other)
		}
	}
	return nil
}

func (f *fakeManager) Pids(n podspec.CgroupName) ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := key(n)
	if _, ok := f.cgroups[k]; !ok {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("not found"))
	}
	var out []int
	for other, c := range f.cgroups {
		if other == k || strings.HasPrefix(other, k+"/") {
			out = append(out, c.pids...)
		}
	}
	return out, nil
}

func (f *fakeManager) Children(n podspec.CgroupName) ([]podspec.CgroupName, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := key(n)
	if _, ok := f.cgroups[k]; !ok {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("not found"))
	}
	var out []podspec.CgroupName
	for _, other := range slices.Sorted(maps.Keys(f.cgroups)) {
		rest, ok := strings.CutPrefix(other, k+"/")
		if k == "" {
			rest, ok = other, other != ""
		}
		if ok && !strings.Contains(rest, "/") {
			out = append(out, n.Child(rest))
		}
	}
	return out, nil
}

// values are a cgroup's values; ok false when it does not exist.
func (f *fakeManager) values(path string) (podspec.CgroupResources, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cgroups[path]
	if !ok {
		return podspec.CgroupResources{}, false
	}
	return c.values, true
}

func (f *fakeManager) exists(path string) bool {
	_, ok := f.values(path)
	return ok
}

func (f *fakeManager) addProcess(path string, pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cgroups[path].pids = append(f.cgroups[path].pids, pid)
}

func (f *fakeManager) setRefuse(sub string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.refuse, sub)
	} else {
		f.refuse[sub] = err
	}
}
