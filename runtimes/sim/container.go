package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const exitKilled = 137

type container struct {
	id          string
	name        string // reservation key
	seq         uint64
	sb          *sandbox
	meta        *runtimeapi.ContainerMetadata
	imageID     string
	imageSpec   *runtimeapi.ImageSpec
	labels      map[string]string
	annotations map[string]string
	mounts      []mount             // the config's mounts, where all are plain (else rawMounts)
	rawMounts   []*runtimeapi.Mount // the config's mounts, where one is not plain
	logPath     string              // absolute (sandbox log dir joined with the config's path) or ""
	env         map[string]string   // the config's envs (nil without); see environ
	argv        []string
	linuxRes    *runtimeapi.LinuxContainerResources // statuses wrap it in a ContainerResources
	stopSignal  runtimeapi.Signal

	state runtimeapi.ContainerState
	// starting: a StartContainer is between its checks and the start
	// (set under r.mu shared, so a CAS; cleared under r.mu).
	starting   atomic.Bool
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string

	fs map[string][]byte // the container's tiny filesystem (nil until written: fsw)
	// What the container consumes on command (usage.go): bytes alloc'd
	// (while it runs), processes spawned (while it runs), and bytes fill'd
	// per file of fs (on its writable layer until removed).
	memAlloc uint64
	spawned  uint64
	pids     []int // simulated pids while it runs: the main process, then spawn's
	filled   map[string]uint64
	proc     *proc // main program while running
	execs    map[*proc]struct{}

	attached map[*attachment]struct{} // attached clients (stream.go)
}

// killAll stops the main program and every exec without reporting; the
// caller holds r.mu.
func (c *container) killAll() {
	if c.proc != nil {
		c.proc.kill()
	}
	for p := range c.execs {
		if !p.dead {
			p.killed = exitKilled
			p.kill()
		}
	}
	c.execs = nil
	c.detachAll()
}

// fsw is the container's filesystem for writing, made on the first write.
func (c *container) fsw() map[string][]byte {
	if c.fs == nil {
		c.fs = map[string][]byte{}
	}
	return c.fs
}

// mountList is the config's mounts, as statuses answer them.
func (c *container) mountList() []*runtimeapi.Mount {
	if c.mounts == nil {
		return c.rawMounts
	}
	out := make([]*runtimeapi.Mount, len(c.mounts))
	for i, m := range c.mounts {
		out[i] = &runtimeapi.Mount{
			ContainerPath:  m.containerPath,
			HostPath:       m.hostPath,
			Readonly:       m.readonly,
			SelinuxRelabel: m.selinuxRelabel,
			Propagation:    m.propagation,
		}
	}
	return out
}

// resources is what statuses answer: the config's (or the last update's)
// Linux resources, nil without.
func (c *container) resources() *runtimeapi.ContainerResources {
	if c.linuxRes == nil {
		return nil
	}
	return &runtimeapi.ContainerResources{Linux: c.linuxRes}
}

func containerName(m *runtimeapi.ContainerMetadata, sb *sandbox) string {
	return strings.Join([]string{m.GetName(), sb.meta.GetName(), sb.meta.GetNamespace(), sb.meta.GetUid(), fmt.Sprint(m.GetAttempt())}, "_")
}

// CreateContainer creates a container in a ready sandbox. The image must be
// present (pulled or preloaded) and the (sandbox, name, attempt) triple free.
func (r *Runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	if cfg.GetMetadata() == nil || cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must include metadata with a name")
	}
	if cfg.GetImage().GetImage() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must include an image")
	}
	var env map[string]string // nil without envs (HOSTNAME: environ)
	if envs := cfg.GetEnvs(); len(envs) > 0 {
		env = make(map[string]string, len(envs))
		for _, kv := range envs {
			env[kv.GetKey()] = string(kv.GetValue())
		}
	}
	cfgMounts := cfg.GetMounts()
	var devNodes []string
	if len(cfg.GetCDIDevices()) > 0 {
		res, err := resolveCDI(r.cfg.CDISpecDirs, cfg.GetCDIDevices())
		if err != nil {
			return nil, err
		}
		if env, cfgMounts, err = applyCDI(cfg, env, res); err != nil {
			return nil, err
		}
		devNodes = res.devices
	}
	argv := append(append([]string(nil), cfg.GetCommand()...), cfg.GetArgs()...)
	// What needs no state is made before the lock, which every other
	// call that changes state waits for: the ID (from the kernel's random
	// source), the container, the parsed image reference, the label keys.
	c := &container{
		id:          newID(),
		meta:        cfg.GetMetadata(),
		imageSpec:   r.intern.imageSpec(cfg.GetImage()),
		annotations: r.intern.sharedMap(r.intern.labels(cfg.GetAnnotations(), nil)),
		env:         env,
		argv:        argv,
		linuxRes:    cfg.GetLinux().GetResources(),
		stopSignal:  cfg.GetStopSignal(),
		state:       runtimeapi.ContainerState_CONTAINER_CREATED,
	}
	if plain, ok := r.intern.plainMounts(cfgMounts); ok {
		c.mounts = plain
	} else {
		c.rawMounts = cfgMounts
	}
	for _, p := range devNodes { // a CDI device's nodes, seen as files
		c.fsw()[p] = nil
	}
	q := queryImage(cfg.GetImage().GetImage())
	sb, err := r.lockSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q is not ready", sb.id)
	}
	name := containerName(cfg.GetMetadata(), sb)
	if id, ok := r.ctrNames[name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "failed to reserve container name %q: name %q is reserved for %q", name, name, id)
	}
	img := r.resolveLocked(q)
	if img == nil {
		return nil, status.Errorf(codes.NotFound, "failed to get image %q: image not found (pull it first)", cfg.GetImage().GetImage())
	}
	if sb.logDir != "" && cfg.GetLogPath() != "" {
		c.logPath = filepath.Join(sb.logDir, cfg.GetLogPath())
	}
	c.name, c.sb, c.imageID, c.createdAt = name, sb, img.id, now()
	// Under the lock, where the sandbox is known: a pod's UID, name and
	// namespace labels are the sandbox's strings.
	c.labels = r.intern.labels(cfg.GetLabels(), sb.labels, c.meta.GetName())
	r.seq++
	c.seq = r.seq
	r.containers[c.id] = c
	r.ctrNames[name] = c.id
	r.ctrLabels.add(c.id, c.labels)
	sb.containers = append(sb.containers, c) // in seq order
	r.publish(c.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

// StartContainer starts a CREATED container after StartLatency and runs its
// program.
func (r *Runtime) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	id := req.GetContainerId()
	// The checks only read: r.mu shared, so the starts of many pods do
	// not queue here behind each other (at 10,000 pods starting, this
	// section's exclusive lock was most of the sim's lock waiting).
	c, err := r.rlockContainer(id)
	if err != nil {
		return nil, err
	}
	if st := c.state; st != runtimeapi.ContainerState_CONTAINER_CREATED || !c.starting.CompareAndSwap(false, true) {
		r.mu.RUnlock()
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is in %s state, want CONTAINER_CREATED", id, st)
	}
	if c.sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		c.starting.Store(false)
		r.mu.RUnlock()
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q of container %q is not ready", c.sb.id, id)
	}
	logPath := c.logPath
	r.mu.RUnlock()

	err = r.wait(ctx, r.cfg.StartLatency)
	if err == nil && logPath != "" {
		err = createLog(logPath)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	c.starting.Store(false)
	if r.containers[id] != c {
		return nil, status.Errorf(codes.NotFound, "container %q was removed while starting", id)
	}
	if err != nil {
		return nil, err
	}
	if c.sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %q was stopped while container %q was starting", c.sb.id, id)
	}
	if full, ok := r.cgPidsRoomLocked(c.sb, 1); !ok {
		// runc cannot fork the container's init past the pod's pids.max.
		return nil, status.Errorf(codes.Unknown, "failed to start containerd task %q: OCI runtime start failed: "+
			"unable to start container process: can't fork: resource temporarily unavailable (pids limit of cgroup %s reached)", id, full)
	}
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.pids = r.newPidsLocked(1)
	c.startedAt = now()
	r.publish(c.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, c.sb)
	p := r.newProc(context.Background(), c, false)
	p.onExit = func(code int) { r.containerExitedLocked(c, p, code) }
	c.proc = p
	// The program runs without the lock (it takes it as it goes); the
	// start returns once it first blocks or ends.
	r.mu.Unlock()
	p.start(ctx, c.argv)
	r.mu.Lock()
	return &runtimeapi.StartContainerResponse{}, nil
}

func createLog(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return status.Errorf(codes.Internal, "create container log directory: %v", err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return status.Errorf(codes.Internal, "create container log: %v", err)
	}
	return f.Close()
}

// containerExitedLocked records the natural end of a container's program.
func (r *Runtime) containerExitedLocked(c *container, p *proc, code int) {
	if c.proc != p || c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	r.markExitedLocked(c, code, reason)
}

// killContainerLocked ends a running container with code; others are left as
// they are.
func (r *Runtime) killContainerLocked(c *container, code int, reason string) {
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	r.markExitedLocked(c, code, reason)
}

func (r *Runtime) markExitedLocked(c *container, code int, reason string) {
	c.killAll()
	c.proc = nil
	c.memAlloc, c.spawned, c.pids = 0, 0, nil
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.exitCode = int32(code)
	c.reason = reason
	c.finishedAt = now()
	r.publish(c.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, c.sb)
}

// StopContainer ends a running container with exit code 137 after
// StopLatency (capped by the request's timeout). Stopping a container that is
// not running is a no-op.
func (r *Runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	id := req.GetContainerId()
	c, err := r.lockContainer(id)
	if err != nil {
		return nil, err
	}
	running := c.state == runtimeapi.ContainerState_CONTAINER_RUNNING
	r.mu.Unlock()
	if !running {
		return &runtimeapi.StopContainerResponse{}, nil
	}
	delay := r.cfg.StopLatency
	if t := time.Duration(req.GetTimeout()) * time.Second; t < delay {
		delay = max(t, 0)
	}
	if err := r.wait(ctx, delay); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killContainerLocked(c, exitKilled, "Error")
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer forcibly stops and removes a container. Removing an
// unknown container is not an error (the CRI asks for idempotence).
func (r *Runtime) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.GetContainerId()]
	if !ok {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	r.killContainerLocked(c, exitKilled, "Error")
	r.removeContainerLocked(c)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *Runtime) removeContainerLocked(c *container) {
	c.killAll()
	r.retiredCPU += c.cpuNanos(now())
	delete(r.containers, c.id)
	delete(r.ctrNames, c.name)
	r.ctrLabels.remove(c.id, c.labels)
	c.sb.removeContainer(c)
	r.publish(c.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, c.sb)
}

// containerStatus builds the status; the caller holds r.mu (shared is
// enough).
func (r *Runtime) containerStatus(c *container) *runtimeapi.ContainerStatus {
	spec, ref := r.imageNames(c)
	return &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.meta,
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       spec,
		ImageRef:    ref,
		ImageId:     c.imageID,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      c.labels,
		Annotations: c.annotations,
		Mounts:      c.mountList(),
		LogPath:     c.logPath,
		Resources:   c.resources(),
		StopSignal:  c.stopSignal,
	}
}

// imageNames returns the image spec and reference shown in statuses, the way
// containerd does: the first repo tag and the first repo digest.
func (r *Runtime) imageNames(c *container) (*runtimeapi.ImageSpec, string) {
	img, ok := r.images[c.imageID]
	if !ok {
		return c.imageSpec, c.imageID
	}
	spec, ref := c.imageSpec, c.imageID
	if len(img.repoTags) > 0 {
		spec = &runtimeapi.ImageSpec{Image: img.repoTags[0]}
	}
	if len(img.repoDigests) > 0 {
		ref = img.repoDigests[0]
	}
	return spec, ref
}

// ContainerStatus returns one container's status.
func (r *Runtime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := r.rlockContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	resp := &runtimeapi.ContainerStatusResponse{Status: r.containerStatus(c)}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"runtime":%q,"sandboxID":%q,"argv":%q}`, RuntimeName, c.sb.id, c.argv)}
	}
	return resp, nil
}

// filterContainers returns the containers matching id, sandbox and labels,
// in creation order; the caller holds r.mu (shared is enough).
func (r *Runtime) filterContainers(id, sandboxID string, labels map[string]string, state *runtimeapi.ContainerStateValue) []*container {
	var cands []*container
	switch {
	case id != "":
		if c, ok := r.containers[id]; ok {
			cands = []*container{c}
		} else {
			for cid, c := range r.containers {
				if strings.HasPrefix(cid, id) {
					cands = append(cands, c)
				}
			}
		}
	case sandboxID != "":
		sb, ok := r.sandboxes[sandboxID]
		if !ok {
			return nil
		}
		cands = append([]*container(nil), sb.containers...)
	default:
		if ids, ok := r.ctrLabels.candidates(labels); ok {
			cands = make([]*container, 0, len(ids))
			for _, id := range ids {
				cands = append(cands, r.containers[id])
			}
			break
		}
		cands = make([]*container, 0, len(r.containers))
		for _, c := range r.containers {
			cands = append(cands, c)
		}
	}
	out := cands[:0]
	for _, c := range cands {
		if sandboxID != "" && c.sb.id != sandboxID {
			continue
		}
		if state != nil && state.GetState() != c.state {
			continue
		}
		if !matchLabels(c.labels, labels) {
			continue
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// ListContainers lists containers matching the filter (id, state, sandbox,
// labels). Over gRPC an unfiltered list is served from its cached encoding
// (listcache.go).
func (r *Runtime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.listContainersLocked(req.GetFilter()), nil
}

// listContainersLocked is the containers matching f (nil: all), in
// creation order; the caller holds r.mu (shared is enough).
func (r *Runtime) listContainersLocked(f *runtimeapi.ContainerFilter) *runtimeapi.ListContainersResponse {
	cs := r.filterContainers(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector(), f.GetState())
	out := make([]*runtimeapi.Container, 0, len(cs))
	for _, c := range cs {
		spec, _ := r.imageNames(c)
		out = append(out, &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sb.id,
			Metadata:     c.meta,
			Image:        spec,
			ImageRef:     c.imageID,
			ImageId:      c.imageID,
			State:        c.state,
			CreatedAt:    c.createdAt,
			Labels:       c.labels,
			Annotations:  c.annotations,
		})
	}
	return &runtimeapi.ListContainersResponse{Containers: out}
}

// UpdateContainerResources applies new resources to a created or running
// container as containerd 2.x does: the values given replace the
// container's (containerStatus reports them), the rest stay. A memory
// limit below what the running container uses fails on cgroup v1 as runc
// does (the kernel cannot reclaim: EBUSY) and changes nothing; on v2 it
// is set and the container is OOM-killed.
func (r *Runtime) UpdateContainerResources(_ context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := r.lockContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED && c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not created or running", c.id)
	}
	upd := req.GetLinux()
	if upd == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	if err := validContainerResources(upd); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "failed to update resources of container %q: %v", c.id, err)
	}
	limit := upd.GetMemoryLimitInBytes()
	if limit > 0 && c.running() && c.workingSet() > uint64(limit) && r.cgVersion() == 1 {
		return nil, status.Errorf(codes.Unknown, "failed to update resources: failed to update resources: /usr/bin/runc did not terminate successfully: "+
			"exit status 1: unable to set memory limit to %d (current usage: %d, peak usage: %d)", limit, c.workingSet(), c.workingSet())
	}
	next := mergeResources(c.linuxRes, upd)
	if parent, ok := r.cgContainerQuotaFitsLocked(c, next); !ok && upd.GetCpuQuota() != 0 {
		// cgroup v1: the kernel refuses a quota above the pod cgroup's.
		return nil, status.Errorf(codes.Unknown, "failed to update resources: failed to update resources: /usr/bin/runc did not terminate successfully: "+
			"exit status 1: failed to write %q: write /sys/fs/cgroup/cpu%s/%s/cpu.cfs_quota_us: invalid argument", fmt.Sprint(next.GetCpuQuota()), parent, c.id)
	}
	c.linuxRes = next
	if limit > 0 && c.running() && c.workingSet() > uint64(limit) {
		r.killContainerLocked(c, exitKilled, "OOMKilled")
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// validContainerResources refuses what runc refuses.
func validContainerResources(r *runtimeapi.LinuxContainerResources) error {
	switch {
	case r.GetCpuPeriod() < 0 || (r.GetCpuPeriod() != 0 && (r.GetCpuPeriod() < cgMinPeriod || r.GetCpuPeriod() > cgMaxPeriod)):
		return fmt.Errorf("cpu period %d: invalid argument", r.GetCpuPeriod())
	case r.GetCpuQuota() < -1 || (r.GetCpuQuota() > 0 && r.GetCpuQuota() < cgMinQuota):
		return fmt.Errorf("cpu quota %d: invalid argument", r.GetCpuQuota())
	case r.GetCpuShares() < 0:
		return fmt.Errorf("cpu shares %d: invalid argument", r.GetCpuShares())
	case r.GetMemoryLimitInBytes() < 0:
		return fmt.Errorf("memory limit %d: invalid argument", r.GetMemoryLimitInBytes())
	}
	return nil
}

// ReopenContainerLog makes sure the log file exists again (after a
// rotation). Log lines are written with open-append-close, so there is no
// descriptor to reopen.
func (r *Runtime) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := r.lockContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	running := c.state == runtimeapi.ContainerState_CONTAINER_RUNNING
	logPath := c.logPath
	r.mu.Unlock()
	if !running {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running", c.id)
	}
	if logPath != "" {
		if err := createLog(logPath); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// ExecSync runs cmd (the same programs and shell as containers) against
// the container's filesystem, on the caller's goroutine, honouring the
// timeout in seconds (0 = none).
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: empty command")
	}
	c, err := r.lockContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not in running state", c.id)
	}
	if r.closed {
		r.mu.Unlock()
		return nil, status.Error(codes.Unavailable, "sim: runtime closed")
	}
	runCtx := ctx
	if req.GetTimeout() > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, time.Duration(req.GetTimeout())*time.Second)
		defer cancel()
	}
	p := r.newProc(runCtx, c, true)
	if c.execs == nil {
		c.execs = map[*proc]struct{}{}
	}
	c.execs[p] = struct{}{}
	r.mu.Unlock()

	var stdout, stderr lockedBuffer
	code := p.runWait(p.ctx, stdio{out: &stdout, err: &stderr}, req.GetCmd())

	r.mu.Lock()
	delete(c.execs, p)
	killed := p.killed
	p.kill() // background jobs of a script end with it
	r.mu.Unlock()
	switch {
	case killed != 0:
		code = killed
	case runCtx.Err() != nil && ctx.Err() == nil:
		return nil, status.Errorf(codes.DeadlineExceeded, "command %q timed out after %ds", req.GetCmd(), req.GetTimeout())
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(code)}, nil
}
