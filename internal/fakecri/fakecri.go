// Package fakecri is an in-memory CRI runtime for unit tests, in the spirit
// of the upstream kubelet's FakeRuntime: it keeps sandboxes, containers and
// images with the state machine of a real runtime (name reservation,
// created -> running -> exited, a stopped sandbox kills its containers),
// records every call by its CRI method name, returns injected errors, holds
// calls in flight on demand and classifies its own errors with errdefs as the
// CRI adapter does, so errdefs.IsNotFound and friends work.
//
// One *Runtime satisfies the CRI-shaped interfaces the actors declare
// (actors/pod.Runtime, actors/pleg.Lister, actors/image.ImageService,
// actors/probe.Execer) and the node API's httpapi.StreamingRuntime. The
// package imports no actor: each actor's tests assert the fit with
// var _ Iface = (*fakecri.Runtime)(nil).
//
// Objects handed out (list items, statuses, snapshots) are deep copies: a
// test or an actor may keep them while the runtime changes.
//
// Method names, as used by Calls, Count, Inject, InjectAlways, Block,
// InFlight and MaxInFlight, are the CRI method names: RunPodSandbox,
// StopPodSandbox, RemovePodSandbox, PodSandboxStatus, ListPodSandbox,
// CreateContainer, StartContainer, StopContainer, RemoveContainer,
// ListContainers, ContainerStatus, ExecSync, Exec, Attach, PortForward,
// ImageStatus, PullImage, ListImages, RemoveImage. An unknown name panics,
// so a typo fails the test instead of injecting nothing.
package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
)

// labelContainerName is the upstream kubelet's container name label, used
// when a container added by a test has no metadata.
const labelContainerName = "io.kubernetes.container.name"

var methods = map[string]bool{
	"RunPodSandbox": true, "StopPodSandbox": true, "RemovePodSandbox": true,
	"PodSandboxStatus": true, "ListPodSandbox": true,
	"CreateContainer": true, "StartContainer": true, "StopContainer": true,
	"RemoveContainer": true, "ListContainers": true, "ContainerStatus": true,
	"ExecSync": true, "Exec": true, "Attach": true, "PortForward": true,
	"ImageStatus": true, "PullImage": true, "ListImages": true, "RemoveImage": true,
}

func mustMethod(method string) {
	if !methods[method] {
		panic(fmt.Sprintf("fakecri: no CRI method %q", method))
	}
}

// ExecSyncCall is one ExecSync call.
type ExecSyncCall struct {
	ContainerID string
	Name        string // the container's name
	Cmd         []string
	Timeout     time.Duration
	At          time.Time // on the runtime's clock
}

// StopCall is one StopContainer call.
type StopCall struct {
	ContainerID string
	Name        string // the container's name; empty when it did not exist
	Timeout     int64  // grace period in seconds, as asked
	Stopped     bool   // the call stopped a running container
}

// PortForwardCall is one PortForward call.
type PortForwardCall struct {
	SandboxID string
	Ports     []int32
}

type sandbox struct {
	st    *runtimeapi.PodSandboxStatus
	order int
}

type container struct {
	st        *runtimeapi.ContainerStatus
	cfg       *runtimeapi.ContainerConfig // as created
	sandboxID string
	order     int
}

type image struct {
	img   *runtimeapi.Image
	order int
}

// Runtime is the fake runtime. The zero value is not usable: call New.
type Runtime struct {
	clk clock.PassiveClock

	mu         sync.Mutex
	seq        int // object IDs
	order      int // insertion order of objects
	sandboxes  map[string]*sandbox
	containers map[string]*container
	images     map[string]*image // by ID

	calls       []string
	once        map[string][]error
	always      map[string]error
	pullErrs    map[string]error
	gates       map[string]chan struct{}
	inFlight    map[string]int
	maxInFlight map[string]int

	execCodes map[string][]int32 // container name or ID -> next exit codes
	execs     []ExecSyncCall
	stops     []StopCall

	streamURL *url.URL
	execReqs  []*runtimeapi.ExecRequest
	attaches  []*runtimeapi.AttachRequest
	forwards  []PortForwardCall

	// resize.go
	hideResources bool             // statuses carry no resources
	memUsage      map[string]int64 // container name or ID -> memory usage
	updates       []UpdateCall
}

// New returns an empty runtime whose timestamps come from clk (nil: real
// time).
func New(clk clock.PassiveClock) *Runtime {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Runtime{
		clk:         clk,
		sandboxes:   map[string]*sandbox{},
		containers:  map[string]*container{},
		images:      map[string]*image{},
		once:        map[string][]error{},
		always:      map[string]error{},
		pullErrs:    map[string]error{},
		gates:       map[string]chan struct{}{},
		inFlight:    map[string]int{},
		maxInFlight: map[string]int{},
		execCodes:   map[string][]int32{},
	}
}

// --- calls, errors, blocking ---

// enter records a call of method, waits while the method is blocked (or
// until ctx ends) and returns with r.mu held and the error the call must
// return, if any. Every call pairs it with leave.
func (r *Runtime) enter(ctx context.Context, method string) error {
	r.mu.Lock()
	r.calls = append(r.calls, method)
	r.inFlight[method]++
	if r.inFlight[method] > r.maxInFlight[method] {
		r.maxInFlight[method] = r.inFlight[method]
	}
	gate := r.gates[method]
	r.mu.Unlock()
	var err error
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			err = ctxError(method, ctx.Err())
		}
	}
	r.mu.Lock()
	if err != nil {
		return err
	}
	if q := r.once[method]; len(q) > 0 {
		r.once[method] = q[1:]
		return q[0]
	}
	return r.always[method]
}

func (r *Runtime) leave(method string) {
	r.inFlight[method]--
	r.mu.Unlock()
}

// ctxError classifies the end of a blocked call's context as the CRI
// adapter classifies a gRPC call's.
func ctxError(method string, err error) error {
	err = fmt.Errorf("%s: %w", method, err)
	if errors.Is(err, context.DeadlineExceeded) {
		return errdefs.Wrap(errdefs.ErrDeadlineExceeded, err)
	}
	return errdefs.Wrap(errdefs.ErrUnknown, err)
}

// Calls returns the methods called so far, in order (a call counts when it
// starts, blocked or not).
func (r *Runtime) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// Count returns how many times method was called.
func (r *Runtime) Count(method string) int {
	mustMethod(method)
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c == method {
			n++
		}
	}
	return n
}

// Inject makes the next calls of method return errs, one per call, in
// order, before any InjectAlways error; a nil entry lets that call proceed.
// The errors are returned as given: wrap them with errdefs to classify.
func (r *Runtime) Inject(method string, errs ...error) {
	mustMethod(method)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.once[method] = append(r.once[method], errs...)
}

// InjectAlways makes every call of method return err (once Inject's errors
// are used up); nil clears it.
func (r *Runtime) InjectAlways(method string, err error) {
	mustMethod(method)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.always, method)
		return
	}
	r.always[method] = err
}

// Block holds every call of method that starts from now on until release
// is called or the call's context ends (the call then fails with a
// deadline-exceeded or unknown class error, as a gRPC call would). Calls
// already held by an earlier Block wait for that Block's release. release
// may be called more than once.
func (r *Runtime) Block(method string) (release func()) {
	mustMethod(method)
	gate := make(chan struct{})
	r.mu.Lock()
	r.gates[method] = gate
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.gates[method] == gate {
				delete(r.gates, method)
			}
			r.mu.Unlock()
			close(gate)
		})
	}
}

// InFlight returns how many calls of method have started and not returned
// (including those held by Block).
func (r *Runtime) InFlight(method string) int {
	mustMethod(method)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight[method]
}

// MaxInFlight returns the most calls of method that were in flight at once.
func (r *Runtime) MaxInFlight(method string) int {
	mustMethod(method)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxInFlight[method]
}

// --- state the tests drive ---

func (r *Runtime) now() int64 { return r.clk.Now().UnixNano() }

func (r *Runtime) nextID(prefix string) string {
	r.seq++
	return fmt.Sprintf("%s%d", prefix, r.seq)
}

func (r *Runtime) nextOrder() int {
	r.order++
	return r.order
}

// AddSandbox puts a sandbox in the runtime as given (an existing one with
// the same ID is replaced), as if it had been started before the code under
// test ran: for adoption tests and scripted views. An empty ID gets one; the
// ID is returned.
func (r *Runtime) AddSandbox(sb *runtimeapi.PodSandbox) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addSandbox(sb)
}

func (r *Runtime) addSandbox(sb *runtimeapi.PodSandbox) string {
	sb = clone(sb)
	if sb.Id == "" {
		sb.Id = r.nextID("sb")
	}
	st := &runtimeapi.PodSandboxStatus{
		Id: sb.Id, Metadata: sb.Metadata, State: sb.State, CreatedAt: sb.CreatedAt,
		Labels: sb.Labels, Annotations: sb.Annotations, RuntimeHandler: sb.RuntimeHandler,
	}
	order := r.nextOrder()
	if old, ok := r.sandboxes[sb.Id]; ok {
		order = old.order
	}
	r.sandboxes[sb.Id] = &sandbox{st: st, order: order}
	return sb.Id
}

// AddContainer puts a container in the runtime as given (an existing one
// with the same ID is replaced), in sandbox c.PodSandboxId, which need not
// exist. An empty ID gets one; the ID is returned.
func (r *Runtime) AddContainer(c *runtimeapi.Container) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addContainer(c)
}

func (r *Runtime) addContainer(c *runtimeapi.Container) string {
	c = clone(c)
	if c.Id == "" {
		c.Id = r.nextID("c")
	}
	st := &runtimeapi.ContainerStatus{
		Id: c.Id, Metadata: c.Metadata, State: c.State, CreatedAt: c.CreatedAt,
		Labels: c.Labels, Annotations: c.Annotations, Image: c.Image, ImageRef: c.ImageRef, ImageId: c.ImageId,
	}
	order := r.nextOrder()
	if old, ok := r.containers[c.Id]; ok {
		order = old.order
	}
	r.containers[c.Id] = &container{st: st, sandboxID: c.PodSandboxId, order: order}
	return c.Id
}

// Replace drops every sandbox and container and puts these in their place,
// in this order: a scripted runtime view, as a PLEG test relists it.
func (r *Runtime) Replace(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes = map[string]*sandbox{}
	r.containers = map[string]*container{}
	for _, sb := range sandboxes {
		r.addSandbox(sb)
	}
	for _, c := range containers {
		r.addContainer(c)
	}
}

// UpdateContainer calls update with the stored status of container id (to
// set a Reason such as OOMKilled, a message, timestamps) and reports whether
// the container exists.
func (r *Runtime) UpdateContainer(id string, update func(*runtimeapi.ContainerStatus)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if ok {
		update(c.st)
	}
	return ok
}

// Exit makes the running container id exit with code, as if its process
// ended, and reports whether it was running.
func (r *Runtime) Exit(id string, code int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok || c.st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return false
	}
	r.exit(c.st, code)
	return true
}

// ExitNamed makes the running container named name (the oldest, if more
// than one runs) exit with code and reports whether there was one.
func (r *Runtime) ExitNamed(name string, code int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.sortedContainers() {
		if nameOf(c.st) == name && c.st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exit(c.st, code)
			return true
		}
	}
	return false
}

// exit ends a container as containerd reports it: reason Completed or
// Error by the exit code.
func (r *Runtime) exit(c *runtimeapi.ContainerStatus, code int32) {
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode = code
	c.FinishedAt = r.now()
	c.Reason = "Completed"
	if code != 0 {
		c.Reason = "Error"
	}
}

// Sandboxes returns a copy of every sandbox's status, oldest first.
func (r *Runtime) Sandboxes() []*runtimeapi.PodSandboxStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.PodSandboxStatus
	for _, s := range r.sortedSandboxes() {
		out = append(out, clone(s.st))
	}
	return out
}

// Containers returns a copy of every container's status, oldest first.
func (r *Runtime) Containers() []*runtimeapi.ContainerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.ContainerStatus
	for _, c := range r.sortedContainers() {
		out = append(out, clone(c.st))
	}
	return out
}

// ContainerConfig returns the config container id was created with (nil
// when unknown): its environment, devices and mounts as the agent asked.
func (r *Runtime) ContainerConfig(id string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok || c.cfg == nil {
		return nil
	}
	return clone(c.cfg)
}

// SandboxOf returns the ID of container id's sandbox ("" when unknown).
func (r *Runtime) SandboxOf(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[id]; ok {
		return c.sandboxID
	}
	return ""
}

func (r *Runtime) sortedSandboxes() []*sandbox {
	out := make([]*sandbox, 0, len(r.sandboxes))
	for _, s := range r.sandboxes {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

func (r *Runtime) sortedContainers() []*container {
	out := make([]*container, 0, len(r.containers))
	for _, c := range r.containers {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

func nameOf(c *runtimeapi.ContainerStatus) string {
	if n := c.GetMetadata().GetName(); n != "" {
		return n
	}
	return c.GetLabels()[labelContainerName]
}

func clone[T proto.Message](m T) T {
	return proto.Clone(m).(T)
}

func notFound(format string, a ...any) error {
	return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf(format, a...))
}

func match(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// --- sandboxes ---

// RunPodSandbox creates a ready sandbox. Like containerd it reserves the
// name (name, namespace, UID, attempt): a second sandbox of the same name
// is errdefs.ErrAlreadyExists while the first one exists.
func (r *Runtime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	err := r.enter(ctx, "RunPodSandbox")
	defer r.leave("RunPodSandbox")
	if err != nil {
		return "", err
	}
	md := cfg.GetMetadata()
	if md == nil {
		return "", errdefs.Wrap(errdefs.ErrInvalidArgument, errors.New("run pod sandbox: no metadata"))
	}
	for _, s := range r.sandboxes {
		o := s.st.GetMetadata()
		if o.GetName() == md.GetName() && o.GetNamespace() == md.GetNamespace() && o.GetUid() == md.GetUid() && o.GetAttempt() == md.GetAttempt() {
			return "", errdefs.Wrap(errdefs.ErrAlreadyExists,
				fmt.Errorf("run pod sandbox %s/%s: name is reserved for %q", md.GetNamespace(), md.GetName(), s.st.Id))
		}
	}
	id := r.nextID("sb")
	cfg = clone(cfg)
	r.sandboxes[id] = &sandbox{order: r.nextOrder(), st: &runtimeapi.PodSandboxStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: r.now(), Labels: cfg.Labels, Annotations: cfg.Annotations, RuntimeHandler: runtimeHandler,
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: fmt.Sprintf("10.88.%d.%d", r.seq/256%256, r.seq%256)},
	}}
	return id, nil
}

// StopPodSandbox makes the sandbox not ready and kills its running
// containers (exit code 137).
func (r *Runtime) StopPodSandbox(ctx context.Context, id string) error {
	err := r.enter(ctx, "StopPodSandbox")
	defer r.leave("StopPodSandbox")
	if err != nil {
		return err
	}
	s, ok := r.sandboxes[id]
	if !ok {
		return notFound("stop pod sandbox %s: not found", id)
	}
	s.st.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for _, c := range r.containers {
		if c.sandboxID == id && c.st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exit(c.st, 137)
		}
	}
	return nil
}

// RemovePodSandbox removes the sandbox and its containers; removing one
// that does not exist succeeds, as in CRI.
func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) error {
	err := r.enter(ctx, "RemovePodSandbox")
	defer r.leave("RemovePodSandbox")
	if err != nil {
		return err
	}
	delete(r.sandboxes, id)
	for cid, c := range r.containers {
		if c.sandboxID == id {
			delete(r.containers, cid)
		}
	}
	return nil
}

// PodSandboxStatus returns a copy of the sandbox's status.
func (r *Runtime) PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	err := r.enter(ctx, "PodSandboxStatus")
	defer r.leave("PodSandboxStatus")
	if err != nil {
		return nil, err
	}
	s, ok := r.sandboxes[id]
	if !ok {
		return nil, notFound("pod sandbox status %s: not found", id)
	}
	return clone(s.st), nil
}

// ListPodSandbox lists the sandboxes matching filter (ID, state, labels),
// oldest first.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	err := r.enter(ctx, "ListPodSandbox")
	defer r.leave("ListPodSandbox")
	if err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandbox
	for _, s := range r.sortedSandboxes() {
		st := s.st
		if (filter.GetId() != "" && filter.GetId() != st.Id) ||
			(filter.GetState() != nil && filter.GetState().GetState() != st.State) ||
			!match(st.Labels, filter.GetLabelSelector()) {
			continue
		}
		out = append(out, clone(&runtimeapi.PodSandbox{
			Id: st.Id, Metadata: st.Metadata, State: st.State, CreatedAt: st.CreatedAt,
			Labels: st.Labels, Annotations: st.Annotations, RuntimeHandler: st.RuntimeHandler,
		}))
	}
	return out, nil
}

// --- containers ---

// CreateContainer creates a container in sandbox podID (which must exist).
// Like containerd it reserves the name (name and attempt in the sandbox).
// The log path is the sandbox config's log directory joined with the
// container's; the image reference is the image's ID when the runtime has
// the image, else what a pull of the image would return.
func (r *Runtime) CreateContainer(ctx context.Context, podID string, cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	err := r.enter(ctx, "CreateContainer")
	defer r.leave("CreateContainer")
	if err != nil {
		return "", err
	}
	if _, ok := r.sandboxes[podID]; !ok {
		return "", notFound("create container %s: pod sandbox %s not found", cfg.GetMetadata().GetName(), podID)
	}
	md := cfg.GetMetadata()
	if md == nil {
		return "", errdefs.Wrap(errdefs.ErrInvalidArgument, errors.New("create container: no metadata"))
	}
	for _, c := range r.sortedContainers() {
		if c.sandboxID == podID && c.st.GetMetadata().GetName() == md.GetName() && c.st.GetMetadata().GetAttempt() == md.GetAttempt() {
			return "", errdefs.Wrap(errdefs.ErrAlreadyExists,
				fmt.Errorf("create container %s: name is reserved for %q", md.GetName(), c.st.Id))
		}
	}
	cfg = clone(cfg)
	ref := imageID(cfg.GetImage().GetImage())
	if img := r.findImage(cfg.GetImage().GetImage()); img != nil {
		ref = img.img.Id
	}
	id := r.nextID("c")
	r.containers[id] = &container{sandboxID: podID, order: r.nextOrder(), cfg: cfg, st: &runtimeapi.ContainerStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: r.now(), Labels: cfg.Labels, Annotations: cfg.Annotations,
		Image: cfg.Image, ImageRef: ref, Mounts: cfg.Mounts,
		LogPath:   filepath.Join(sb.GetLogDirectory(), cfg.GetLogPath()),
		Resources: createdResources(cfg),
	}}
	return id, nil
}

// StartContainer starts a created container; any other state is
// errdefs.ErrFailedPrecondition.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	err := r.enter(ctx, "StartContainer")
	defer r.leave("StartContainer")
	if err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return notFound("start container %s: not found", id)
	}
	if c.st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("start container %s: container is %s", id, c.st.State))
	}
	c.st.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.st.StartedAt = r.now()
	return nil
}

// StopContainer kills a running container at once (exit code 137) and
// records the call (see Stops); stopping one that is not running succeeds.
func (r *Runtime) StopContainer(ctx context.Context, id string, timeout int64) error {
	err := r.enter(ctx, "StopContainer")
	defer r.leave("StopContainer")
	if err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		r.stops = append(r.stops, StopCall{ContainerID: id, Timeout: timeout})
		return notFound("stop container %s: not found", id)
	}
	running := c.st.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	r.stops = append(r.stops, StopCall{ContainerID: id, Name: nameOf(c.st), Timeout: timeout, Stopped: running})
	if running {
		r.exit(c.st, 137)
	}
	return nil
}

// RemoveContainer removes a container, running or not; removing one that
// does not exist succeeds, as in CRI.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	err := r.enter(ctx, "RemoveContainer")
	defer r.leave("RemoveContainer")
	if err != nil {
		return err
	}
	delete(r.containers, id)
	return nil
}

// ListContainers lists the containers matching filter (ID, state, sandbox,
// labels), oldest first.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	err := r.enter(ctx, "ListContainers")
	defer r.leave("ListContainers")
	if err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, c := range r.sortedContainers() {
		st := c.st
		if (filter.GetId() != "" && filter.GetId() != st.Id) ||
			(filter.GetState() != nil && filter.GetState().GetState() != st.State) ||
			(filter.GetPodSandboxId() != "" && filter.GetPodSandboxId() != c.sandboxID) ||
			!match(st.Labels, filter.GetLabelSelector()) {
			continue
		}
		out = append(out, clone(&runtimeapi.Container{
			Id: st.Id, PodSandboxId: c.sandboxID, Metadata: st.Metadata, Image: st.Image, ImageRef: st.ImageRef,
			ImageId: st.ImageId, State: st.State, CreatedAt: st.CreatedAt, Labels: st.Labels, Annotations: st.Annotations,
		}))
	}
	return out, nil
}

// ContainerStatus returns a copy of the container's status.
func (r *Runtime) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	err := r.enter(ctx, "ContainerStatus")
	defer r.leave("ContainerStatus")
	if err != nil {
		return nil, err
	}
	c, ok := r.containers[id]
	if !ok {
		return nil, notFound("container status %s: not found", id)
	}
	st := clone(c.st)
	if r.hideResources {
		st.Resources = nil
	}
	return st, nil
}

// --- exec ---

// SetExec scripts the exit codes of the next ExecSync calls in the
// container key (its ID or its name): one code per call, the last one
// repeats. Without a script a command exits 0.
func (r *Runtime) SetExec(key string, codes ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(codes) == 0 {
		delete(r.execCodes, key)
		return
	}
	r.execCodes[key] = append([]int32(nil), codes...)
}

// ExecSync runs cmd in a running container: it answers with the scripted
// exit code (stdout "ok" for 0, stderr naming the code otherwise) and
// records the call (see Execs). A missing container is ErrNotFound, one that
// is not running ErrFailedPrecondition.
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error) {
	err = r.enter(ctx, "ExecSync")
	defer r.leave("ExecSync")
	if err != nil {
		return nil, nil, 0, err
	}
	c, ok := r.containers[id]
	if !ok {
		return nil, nil, 0, notFound("exec in container %s: not found", id)
	}
	if c.st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, nil, 0, errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("exec in container %s: container is %s", id, c.st.State))
	}
	name := nameOf(c.st)
	r.execs = append(r.execs, ExecSyncCall{ContainerID: id, Name: name, Cmd: append([]string(nil), cmd...), Timeout: timeout, At: r.clk.Now()})
	key := id
	if _, ok := r.execCodes[key]; !ok {
		key = name
	}
	var code int32
	if codes := r.execCodes[key]; len(codes) > 0 {
		code = codes[0]
		if len(codes) > 1 {
			r.execCodes[key] = codes[1:]
		}
	}
	if code != 0 {
		return nil, []byte(fmt.Sprintf("command %q exited with %d", strings.Join(cmd, " "), code)), code, nil
	}
	return []byte("ok"), nil, 0, nil
}

// Execs returns the ExecSync calls that reached a running container, in
// order.
func (r *Runtime) Execs() []ExecSyncCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ExecSyncCall, len(r.execs))
	for i, e := range r.execs {
		e.Cmd = append([]string(nil), e.Cmd...)
		out[i] = e
	}
	return out
}

// Stops returns the StopContainer calls, in order.
func (r *Runtime) Stops() []StopCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]StopCall(nil), r.stops...)
}

// --- streaming ---

// SetStreamURL sets the URL Exec, Attach and PortForward answer with (nil:
// a URL on a host that does not resolve, naming the call).
func (r *Runtime) SetStreamURL(u *url.URL) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u != nil {
		c := *u
		u = &c
	}
	r.streamURL = u
}

func (r *Runtime) streamURLFor(kind, id string) *url.URL {
	if r.streamURL != nil {
		c := *r.streamURL
		return &c
	}
	return &url.URL{Scheme: "http", Host: "fakecri.invalid", Path: "/" + kind + "/" + id}
}

// Exec records a streaming exec request (see ExecRequests) for an existing
// container and answers with the stream URL.
func (r *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*url.URL, error) {
	err := r.enter(ctx, "Exec")
	defer r.leave("Exec")
	if err != nil {
		return nil, err
	}
	r.execReqs = append(r.execReqs, clone(req))
	if _, ok := r.containers[req.GetContainerId()]; !ok {
		return nil, notFound("exec in container %s: not found", req.GetContainerId())
	}
	return r.streamURLFor("exec", req.GetContainerId()), nil
}

// Attach records a streaming attach request (see AttachRequests) for an
// existing container and answers with the stream URL.
func (r *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*url.URL, error) {
	err := r.enter(ctx, "Attach")
	defer r.leave("Attach")
	if err != nil {
		return nil, err
	}
	r.attaches = append(r.attaches, clone(req))
	if _, ok := r.containers[req.GetContainerId()]; !ok {
		return nil, notFound("attach to container %s: not found", req.GetContainerId())
	}
	return r.streamURLFor("attach", req.GetContainerId()), nil
}

// PortForward records a port-forward request (see PortForwards) for an
// existing sandbox and answers with the stream URL.
func (r *Runtime) PortForward(ctx context.Context, podSandboxID string, ports []int32) (*url.URL, error) {
	err := r.enter(ctx, "PortForward")
	defer r.leave("PortForward")
	if err != nil {
		return nil, err
	}
	r.forwards = append(r.forwards, PortForwardCall{SandboxID: podSandboxID, Ports: append([]int32(nil), ports...)})
	if _, ok := r.sandboxes[podSandboxID]; !ok {
		return nil, notFound("port forward to pod sandbox %s: not found", podSandboxID)
	}
	return r.streamURLFor("portforward", podSandboxID), nil
}

// ExecRequests returns the streaming exec requests, in order.
func (r *Runtime) ExecRequests() []*runtimeapi.ExecRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*runtimeapi.ExecRequest, len(r.execReqs))
	for i, q := range r.execReqs {
		out[i] = clone(q)
	}
	return out
}

// AttachRequests returns the attach requests, in order.
func (r *Runtime) AttachRequests() []*runtimeapi.AttachRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*runtimeapi.AttachRequest, len(r.attaches))
	for i, q := range r.attaches {
		out[i] = clone(q)
	}
	return out
}

// PortForwards returns the port-forward requests, in order.
func (r *Runtime) PortForwards() []PortForwardCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PortForwardCall, len(r.forwards))
	for i, f := range r.forwards {
		f.Ports = append([]int32(nil), f.Ports...)
		out[i] = f
	}
	return out
}

// --- images ---

// findImage finds an image by ID or by one of its tags.
func (r *Runtime) findImage(ref string) *image {
	if ref == "" {
		return nil
	}
	if img, ok := r.images[ref]; ok {
		return img
	}
	for _, img := range r.images {
		for _, t := range img.img.RepoTags {
			if t == ref {
				return img
			}
		}
	}
	return nil
}

// tag makes ref name image id (created if needed), moving the tag from any
// other image, as a runtime does.
func (r *Runtime) tag(ref, id string) {
	for _, img := range r.images {
		tags := img.img.RepoTags[:0]
		for _, t := range img.img.RepoTags {
			if t != ref {
				tags = append(tags, t)
			}
		}
		img.img.RepoTags = tags
	}
	img, ok := r.images[id]
	if !ok {
		img = &image{img: &runtimeapi.Image{Id: id}, order: r.nextOrder()}
		r.images[id] = img
	}
	if ref != id {
		img.img.RepoTags = append(img.img.RepoTags, ref)
	}
}

// imageID is the ID a pull of ref gives.
func imageID(ref string) string {
	if strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	return "sha256:" + ref
}

// AddImage makes image ref present with ID id, as if pulled or side-loaded
// before the code under test ran.
func (r *Runtime) AddImage(ref, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tag(ref, id)
}

// FailPull makes every pull of ref fail with err (after any error injected
// for PullImage is used up); nil clears it.
func (r *Runtime) FailPull(ref string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.pullErrs, ref)
		return
	}
	r.pullErrs[ref] = err
}

// Images returns a copy of every image, oldest first.
func (r *Runtime) Images() []*runtimeapi.Image {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listImages()
}

func (r *Runtime) listImages() []*runtimeapi.Image {
	imgs := make([]*image, 0, len(r.images))
	for _, img := range r.images {
		imgs = append(imgs, img)
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].order < imgs[j].order })
	out := make([]*runtimeapi.Image, len(imgs))
	for i, img := range imgs {
		out[i] = clone(img.img)
	}
	return out
}

// ImageStatus returns the image ref names (by tag or ID), or nil, nil when
// the runtime does not have it, as the CRI adapter does.
func (r *Runtime) ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error) {
	err := r.enter(ctx, "ImageStatus")
	defer r.leave("ImageStatus")
	if err != nil {
		return nil, err
	}
	if img := r.findImage(ref); img != nil {
		return clone(img.img), nil
	}
	return nil, nil
}

// PullImage makes ref present with ID "sha256:" + ref (ref itself when it
// is an ID) and returns that ID, unless FailPull or an injected error says otherwise.
func (r *Runtime) PullImage(ctx context.Context, ref string, _ *runtimeapi.PodSandboxConfig) (string, error) {
	err := r.enter(ctx, "PullImage")
	defer r.leave("PullImage")
	if err != nil {
		return "", err
	}
	if err := r.pullErrs[ref]; err != nil {
		return "", err
	}
	id := imageID(ref)
	r.tag(ref, id)
	return id, nil
}

// ListImages lists every image, oldest first.
func (r *Runtime) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	err := r.enter(ctx, "ListImages")
	defer r.leave("ListImages")
	if err != nil {
		return nil, err
	}
	return r.listImages(), nil
}

// RemoveImage removes the image ref names (by tag or ID); removing an absent
// image succeeds, as in CRI.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	err := r.enter(ctx, "RemoveImage")
	defer r.leave("RemoveImage")
	if err != nil {
		return err
	}
	if img := r.findImage(ref); img != nil {
		delete(r.images, img.img.Id)
	}
	return nil
}
