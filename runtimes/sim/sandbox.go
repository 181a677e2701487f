package sim

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type sandbox struct {
	id          string
	name        string // reservation key
	seq         uint64
	meta        *runtimeapi.PodSandboxMetadata
	labels      map[string]string
	annotations map[string]string
	handler     string
	hostname    string
	logDir      string
	nsOptions   *runtimeapi.NamespaceOption
	hostNetwork bool
	state       runtimeapi.PodSandboxState
	createdAt   int64
	ip          uint32       // 0 for host network
	containers  []*container // in creation (seq) order
	cgKey       string       // the cgroup parent's key in the cgroup tree ("": none; cgroups.go)
	pausePid    int          // the pause process's simulated pid while ready
}

// sameAs is like when it equals s (one string kept, not two).
func sameAs(s, like string) string {
	if s == like {
		return like
	}
	return s
}

// listenAddr is the address container listeners bind to.
func (sb *sandbox) listenAddr() string {
	if sb.ip == 0 {
		return "127.0.0.1"
	}
	return ipString(sb.ip)
}

func sandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return strings.Join([]string{m.GetName(), m.GetNamespace(), m.GetUid(), fmt.Sprint(m.GetAttempt())}, "_")
}

// RunPodSandbox creates a ready sandbox with its own loopback address.
func (r *Runtime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	if cfg.GetMetadata() == nil || cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must include metadata with a name")
	}
	nsOpts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if nsOpts == nil {
		nsOpts = &runtimeapi.NamespaceOption{}
	}
	meta := cfg.GetMetadata()
	cgName, err := parseCgroupParent(cfg.GetLinux().GetCgroupParent())
	if err != nil {
		return nil, err
	}
	local := []string{meta.GetName(), meta.GetNamespace(), meta.GetUid()}
	sb := &sandbox{
		id:          newID(),
		name:        sandboxName(meta),
		meta:        meta,
		labels:      r.intern.labels(cfg.GetLabels(), nil, local...),
		annotations: r.intern.labels(cfg.GetAnnotations(), nil, local...),
		handler:     req.GetRuntimeHandler(),
		hostname:    sameAs(cfg.GetHostname(), meta.GetName()),
		logDir:      cfg.GetLogDirectory(),
		nsOptions:   r.intern.namespaceOptions(nsOpts),
		hostNetwork: nsOpts.GetNetwork() == runtimeapi.NamespaceMode_NODE,
		state:       runtimeapi.PodSandboxState_SANDBOX_READY,
		cgKey:       cgKey(cgName),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, status.Error(codes.Unavailable, "sim: runtime closed")
	}
	if id, ok := r.sbNames[sb.name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "failed to reserve sandbox name %q: name %q is reserved for %q", sb.name, sb.name, id)
	}
	if !sb.hostNetwork {
		ip, err := r.allocIP()
		if err != nil {
			return nil, err
		}
		sb.ip = ip
	}
	// The pod joins its cgroup, made if missing as runc makes a
	// container's cgroup parent.
	r.cgEnsureLocked(cgName)
	sb.pausePid = r.newPidsLocked(1)[0]
	r.seq++
	sb.seq = r.seq
	sb.createdAt = now()
	r.sandboxes[sb.id] = sb
	r.sbNames[sb.name] = sb.id
	r.sbLabels.add(sb.id, sb.labels)
	r.publish(sb.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb)
	r.publish(sb.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: sb.id}, nil
}

// StopPodSandbox stops every container of the sandbox (after StopLatency)
// and marks it NOTREADY. Stopping a stopped sandbox is a no-op.
func (r *Runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id := req.GetPodSandboxId()
	sb, err := r.lockSandbox(id)
	if err != nil {
		return nil, err
	}
	ready := sb.state == runtimeapi.PodSandboxState_SANDBOX_READY
	r.mu.Unlock()
	if ready {
		if err := r.wait(ctx, r.cfg.StopLatency); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sandboxes[id] != sb {
		return &runtimeapi.StopPodSandboxResponse{}, nil // removed meanwhile
	}
	r.stopSandboxLocked(sb)
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *Runtime) stopSandboxLocked(sb *sandbox) {
	for _, c := range sb.sortedContainers() {
		r.killContainerLocked(c, exitKilled, "Error")
	}
	sb.pausePid = 0
	if sb.state != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		sb.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.publish(sb.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb)
	}
}

// RemovePodSandbox forcibly stops and removes the sandbox and its
// containers, and frees its name and address. Removing an unknown sandbox is
// not an error (the CRI asks for idempotence).
func (r *Runtime) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[req.GetPodSandboxId()]
	if !ok {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	r.stopSandboxLocked(sb)
	for _, c := range sb.sortedContainers() {
		r.removeContainerLocked(c)
	}
	delete(r.sandboxes, sb.id)
	delete(r.sbNames, sb.name)
	r.sbLabels.remove(sb.id, sb.labels)
	if sb.ip != 0 {
		delete(r.ipUsed, sb.ip)
	}
	// The kubelet reads the pod UID from the event's sandbox status.
	r.publish(sb.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// sortedContainers is a copy of the sandbox's containers, in creation
// order (the caller may remove them while it goes through it).
func (sb *sandbox) sortedContainers() []*container {
	return append([]*container(nil), sb.containers...)
}

// removeContainer takes c out of the sandbox's containers, keeping their
// order.
func (sb *sandbox) removeContainer(c *container) {
	for i, x := range sb.containers {
		if x == c {
			sb.containers = slices.Delete(sb.containers, i, i+1)
			return
		}
	}
}

// sandboxStatus builds the status; the caller holds r.mu (shared is enough).
func (r *Runtime) sandboxStatus(sb *sandbox) *runtimeapi.PodSandboxStatus {
	net := &runtimeapi.PodSandboxNetworkStatus{}
	if sb.ip != 0 {
		net.Ip = ipString(sb.ip)
	}
	return &runtimeapi.PodSandboxStatus{
		Id:             sb.id,
		Metadata:       sb.meta,
		State:          sb.state,
		CreatedAt:      sb.createdAt,
		Network:        net,
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: sb.nsOptions}},
		Labels:         sb.labels,
		Annotations:    sb.annotations,
		RuntimeHandler: sb.handler,
	}
}

func (r *Runtime) sandboxContainerStatuses(sb *sandbox) []*runtimeapi.ContainerStatus {
	cs := sb.sortedContainers()
	out := make([]*runtimeapi.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		out = append(out, r.containerStatus(c))
	}
	return out
}

// PodSandboxStatus returns the sandbox's status and its containers' statuses.
func (r *Runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := r.rlockSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	resp := &runtimeapi.PodSandboxStatusResponse{
		Status:             r.sandboxStatus(sb),
		ContainersStatuses: r.sandboxContainerStatuses(sb),
		Timestamp:          now(),
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"runtime":%q,"address":%q,"hostNetwork":%t}`, RuntimeName, sb.listenAddr(), sb.hostNetwork)}
	}
	return resp, nil
}

// ListPodSandbox lists sandboxes matching the filter (id, state, labels).
// Over gRPC an unfiltered list is served from its cached encoding
// (listcache.go).
func (r *Runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.listSandboxesLocked(req.GetFilter()), nil
}

// listSandboxesLocked is the sandboxes matching f (nil: all), in creation
// order; the caller holds r.mu (shared is enough).
func (r *Runtime) listSandboxesLocked(f *runtimeapi.PodSandboxFilter) *runtimeapi.ListPodSandboxResponse {
	var cands []*sandbox
	if id := f.GetId(); id != "" {
		if sb, ok := r.sandboxes[id]; ok {
			cands = []*sandbox{sb}
		} else {
			for sid, sb := range r.sandboxes {
				if strings.HasPrefix(sid, id) {
					cands = append(cands, sb)
				}
			}
		}
	} else if ids, ok := r.sbLabels.candidates(f.GetLabelSelector()); ok {
		cands = make([]*sandbox, 0, len(ids))
		for _, id := range ids {
			cands = append(cands, r.sandboxes[id])
		}
	} else {
		cands = make([]*sandbox, 0, len(r.sandboxes))
		for _, sb := range r.sandboxes {
			cands = append(cands, sb)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].seq < cands[j].seq })
	out := make([]*runtimeapi.PodSandbox, 0, len(cands))
	for _, sb := range cands {
		if st := f.GetState(); st != nil && st.GetState() != sb.state {
			continue
		}
		if !matchLabels(sb.labels, f.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             sb.id,
			Metadata:       sb.meta,
			State:          sb.state,
			CreatedAt:      sb.createdAt,
			Labels:         sb.labels,
			Annotations:    sb.annotations,
			RuntimeHandler: sb.handler,
		})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}
}
