package pod

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
)

// fakeRuntime is an in-memory CRI runtime for one actor's unit tests: it
// records calls, reserves names like containerd and takes injected errors.
type fakeRuntime struct {
	mu         sync.Mutex
	clk        clock.PassiveClock
	seq        int
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
	sandboxOf  map[string]string
	calls      []string
	errs       map[string]error // method -> error returned once
	execCodes  map[string]int32 // container name -> exit code of execs (default 0)
	execs      map[string]int   // container name -> exec count
	execLog    []string         // container name + " " + command, in order
	stopGrace  []int64          // StopContainer timeouts, in order
	stopped    []string         // names of the containers StopContainer stopped, in order
}

var _ Runtime = (*fakeRuntime)(nil)

func newFakeRuntime(clk clock.PassiveClock) *fakeRuntime {
	return &fakeRuntime{
		clk:        clk,
		sandboxes:  map[string]*runtimeapi.PodSandboxStatus{},
		containers: map[string]*runtimeapi.ContainerStatus{},
		sandboxOf:  map[string]string{},
		errs:       map[string]error{},
		execCodes:  map[string]int32{},
		execs:      map[string]int{},
	}
}

// ExecSync answers with the exit code set for the container's name.
func (f *fakeRuntime) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ExecSync"); err != nil {
		return nil, nil, 0, err
	}
	c, ok := f.containers[id]
	if !ok || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, nil, 0, errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("container %s not running", id))
	}
	f.execs[c.Metadata.Name]++
	f.execLog = append(f.execLog, c.Metadata.Name+" "+strings.Join(cmd, " "))
	code := f.execCodes[c.Metadata.Name]
	if code != 0 {
		return nil, []byte("probe says no"), code, nil
	}
	return []byte("ok"), nil, 0, nil
}

func (f *fakeRuntime) setExec(name string, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execCodes[name] = code
}

func (f *fakeRuntime) execCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.execs[name]
}

func (f *fakeRuntime) call(method string) error {
	f.calls = append(f.calls, method)
	if err, ok := f.errs[method]; ok {
		delete(f.errs, method)
		return err
	}
	return nil
}

func (f *fakeRuntime) failNext(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method] = err
}

func (f *fakeRuntime) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == method {
			n++
		}
	}
	return n
}

func (f *fakeRuntime) now() int64 { return f.clk.Now().UnixNano() }

func (f *fakeRuntime) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RunPodSandbox"); err != nil {
		return "", err
	}
	for _, s := range f.sandboxes {
		if s.Metadata.Uid == cfg.Metadata.Uid && s.Metadata.Attempt == cfg.Metadata.Attempt {
			return "", errdefs.Wrap(errdefs.ErrAlreadyExists, fmt.Errorf("name reserved for %s", s.Id))
		}
	}
	f.seq++
	id := fmt.Sprintf("sb%d", f.seq)
	f.sandboxes[id] = &runtimeapi.PodSandboxStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: f.now(), Labels: cfg.Labels, Annotations: cfg.Annotations,
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: fmt.Sprintf("10.0.0.%d", f.seq)},
	}
	return id, nil
}

func (f *fakeRuntime) StopPodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("StopPodSandbox"); err != nil {
		return err
	}
	s, ok := f.sandboxes[id]
	if !ok {
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("sandbox %s", id))
	}
	s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for cid, sb := range f.sandboxOf {
		if c := f.containers[cid]; sb == id && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			f.exit(c, 137)
		}
	}
	return nil
}

func (f *fakeRuntime) RemovePodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RemovePodSandbox"); err != nil {
		return err
	}
	delete(f.sandboxes, id)
	for cid, sb := range f.sandboxOf {
		if sb == id {
			delete(f.containers, cid)
			delete(f.sandboxOf, cid)
		}
	}
	return nil
}

func (f *fakeRuntime) CreateContainer(_ context.Context, podID string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateContainer"); err != nil {
		return "", err
	}
	if _, ok := f.sandboxes[podID]; !ok {
		return "", errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("sandbox %s", podID))
	}
	for cid, c := range f.containers {
		if f.sandboxOf[cid] == podID && c.Metadata.Name == cfg.Metadata.Name && c.Metadata.Attempt == cfg.Metadata.Attempt {
			return "", errdefs.Wrap(errdefs.ErrAlreadyExists, fmt.Errorf("name is reserved for %s", cid))
		}
	}
	f.seq++
	id := fmt.Sprintf("c%d", f.seq)
	f.containers[id] = &runtimeapi.ContainerStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: f.now(), Labels: cfg.Labels, Annotations: cfg.Annotations,
		Image: cfg.Image, ImageRef: "sha256:" + cfg.Image.Image, Mounts: cfg.Mounts,
		LogPath: filepath.Join(sbCfg.GetLogDirectory(), cfg.GetLogPath()),
	}
	f.sandboxOf[id] = podID
	return id, nil
}

func (f *fakeRuntime) StartContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("StartContainer"); err != nil {
		return err
	}
	c, ok := f.containers[id]
	if !ok {
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("container %s", id))
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("container %s is %s", id, c.State))
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = f.now()
	return nil
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string, timeout int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("StopContainer"); err != nil {
		return err
	}
	f.stopGrace = append(f.stopGrace, timeout)
	c, ok := f.containers[id]
	if !ok {
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("container %s", id))
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		f.exit(c, 137)
		f.stopped = append(f.stopped, c.Metadata.Name)
	}
	return nil
}

func (f *fakeRuntime) exit(c *runtimeapi.ContainerStatus, code int32) {
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = f.now()
}

func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RemoveContainer"); err != nil {
		return err
	}
	delete(f.containers, id)
	delete(f.sandboxOf, id)
	return nil
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ListPodSandbox"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		if match(s.Labels, filter.GetLabelSelector()) {
			out = append(out, &runtimeapi.PodSandbox{Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt, Labels: s.Labels})
		}
	}
	return out, nil
}

func (f *fakeRuntime) PodSandboxStatus(_ context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("PodSandboxStatus"); err != nil {
		return nil, err
	}
	s, ok := f.sandboxes[id]
	if !ok {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("sandbox %s", id))
	}
	return cloneSandbox(s), nil
}

func (f *fakeRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ListContainers"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		if match(c.Labels, filter.GetLabelSelector()) {
			out = append(out, &runtimeapi.Container{Id: c.Id, PodSandboxId: f.sandboxOf[c.Id], Metadata: c.Metadata, State: c.State, Labels: c.Labels})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ContainerStatus"); err != nil {
		return nil, err
	}
	c, ok := f.containers[id]
	if !ok {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("container %s", id))
	}
	return cloneContainer(c), nil
}

// exitContainer makes the running container of name exit with code (as if
// its process ended).
func (f *fakeRuntime) exitContainer(name string, code int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			f.exit(c, code)
			return true
		}
	}
	return false
}

// list returns a copy of all containers.
func (f *fakeRuntime) list() []*runtimeapi.ContainerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.ContainerStatus
	for _, c := range f.containers {
		out = append(out, cloneContainer(c))
	}
	return out
}

func (f *fakeRuntime) sandboxCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sandboxes)
}

func cloneSandbox(s *runtimeapi.PodSandboxStatus) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt,
		Labels: s.Labels, Annotations: s.Annotations, Network: s.Network}
}

func cloneContainer(c *runtimeapi.ContainerStatus) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{Id: c.Id, Metadata: c.Metadata, State: c.State, CreatedAt: c.CreatedAt,
		StartedAt: c.StartedAt, FinishedAt: c.FinishedAt, ExitCode: c.ExitCode, Labels: c.Labels,
		Annotations: c.Annotations, Image: c.Image, ImageRef: c.ImageRef, Reason: c.Reason, Mounts: c.Mounts,
		LogPath: c.LogPath, Message: c.Message}
}

func match(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
