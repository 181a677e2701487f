// Package sim is actorlet's simulated CRI v1 runtime: a complete
// RuntimeService and ImageService kept in memory and served over a real gRPC
// socket. Containers "run" a small shell subset interpreted from their
// command and args (sleep, exit, echo, httpd, nc, ...), listeners are real
// sockets on per-sandbox loopback addresses, and latencies and faults can be
// injected. See README.md for the conventions.
package sim

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultIPBase is the first sandbox address when Config.IPBase is empty.
const DefaultIPBase = "127.1.0.1"

// Version values reported by the Version RPC.
const (
	RuntimeName    = "actorlet-sim"
	RuntimeVersion = "0.1.0"
	apiVersion     = "v1"
	faultMessage   = "sim: injected fault"
	maxMsgSize     = 64 << 20
)

// Config tunes the simulated runtime. The zero value is a fast, fault-free
// runtime.
type Config struct {
	StartLatency time.Duration // added to StartContainer
	StopLatency  time.Duration // added to StopContainer / StopPodSandbox
	FaultRate    float64       // 0..1: probability that a selected RPC fails with codes.Unavailable
	FaultMethods []string      // CRI method names; empty = all methods except Version and Status
	Seed         int64         // seed of the fault RNG (0 = time-based)
	IPBase       string        // first sandbox address in 127.0.0.0/8, default 127.1.0.1

	// The simulated node (usage.go); 0 means the default.
	NodeMemory      int64 // bytes of memory (node-memory), default DefaultNodeMemory
	NodeDisk        int64 // bytes of the node filesystem, where writable layers live (node-disk), default DefaultNodeDisk
	NodePIDs        int64 // pid_max (node-pids), default DefaultNodePIDs
	ImageFsCapacity int64 // bytes of the image filesystem (imagefs-capacity), default DefaultImageFsCapacity
	// ImageSizes maps image references to sizes (image-size=busybox=5Mi):
	// a reference without tag or digest sets every tag of that repository.
	// Other images get a deterministic size of 1 to 51 MiB.
	ImageSizes map[string]string
	// CDISpecDirs are where CDI devices are resolved (cdi.go); empty:
	// containerd's defaults, /etc/cdi and /var/run/cdi.
	CDISpecDirs []string
	// CgroupVersion is the version the simulated cgroups behave as
	// (cgroups.go): 1 or 2; 0 means DefaultCgroupVersion.
	CgroupVersion int
}

// AddFlags registers the simulator's flags on fs, with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	if c.IPBase == "" {
		c.IPBase = DefaultIPBase
	}
	fs.DurationVar(&c.StartLatency, "start-latency", c.StartLatency, "sim runtime: latency added to every StartContainer")
	fs.DurationVar(&c.StopLatency, "stop-latency", c.StopLatency, "sim runtime: latency added to StopContainer and StopPodSandbox (capped by the request's timeout)")
	fs.Float64Var(&c.FaultRate, "fault-rate", c.FaultRate, "sim runtime: probability (0..1) that a selected CRI call fails with Unavailable")
	fs.StringSliceVar(&c.FaultMethods, "fault-methods", c.FaultMethods, "sim runtime: CRI methods subject to faults (e.g. CreateContainer,StartContainer); empty = all but Version and Status")
	fs.Int64Var(&c.Seed, "fault-seed", c.Seed, "sim runtime: seed of the fault generator (0 = time-based)")
	fs.StringVar(&c.IPBase, "ip-base", c.IPBase, "sim runtime: first sandbox address; sandboxes get consecutive addresses in 127.0.0.0/8")
	fs.StringSliceVar(&c.CDISpecDirs, "cdi-spec-dirs", c.CDISpecDirs, "sim runtime: directories of CDI specs that containers' CDI devices are resolved against (default /etc/cdi,/var/run/cdi)")
	c.addNodeFlags(fs)
	c.addCgroupFlags(fs)
}

// Validate reports a configuration error, if any.
func (c Config) Validate() error {
	if c.FaultRate < 0 || c.FaultRate > 1 || math.IsNaN(c.FaultRate) {
		return fmt.Errorf("sim: fault rate %v not in [0,1]", c.FaultRate)
	}
	if c.StartLatency < 0 || c.StopLatency < 0 {
		return errors.New("sim: latencies must not be negative")
	}
	if c.IPBase != "" {
		if _, err := parseIPBase(c.IPBase); err != nil {
			return err
		}
	}
	if err := c.cdiDirsValid(); err != nil {
		return err
	}
	if err := c.validateCgroups(); err != nil {
		return err
	}
	return c.validateNode()
}

func parseIPBase(s string) (uint32, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("sim: ip base %q is not an IPv4 address", s)
	}
	b := a.As4()
	if b[0] != 127 {
		return 0, fmt.Errorf("sim: ip base %q is not in 127.0.0.0/8", s)
	}
	return binary.BigEndian.Uint32(b[:]), nil
}

// Runtime is the simulated CRI runtime. It implements
// runtimeapi.RuntimeServiceServer and runtimeapi.ImageServiceServer.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg          Config
	faultMethods map[string]bool
	faultMu      sync.Mutex
	faultRNG     *mrand.Rand

	// mu guards everything below. Status and list calls, most of the
	// calls a node agent makes (several per pod started, and the relists
	// of every pod), only read and take it shared, so they run in
	// parallel on a many-core node; so do the stats calls (a list of every
	// pod's stats is long) and StartContainer's checks (the container's
	// starting flag is atomic). Calls that change state and
	// the containers' programs (shell.go) take it exclusively.
	mu         sync.RWMutex
	closed     bool
	done       chan struct{}
	servers    []*grpc.Server
	sandboxes  map[string]*sandbox
	sbNames    map[string]string // reserved sandbox name -> id
	containers map[string]*container
	ctrNames   map[string]string // reserved container name -> id
	sbLabels   labelIndex
	ctrLabels  labelIndex
	images     map[string]*image // id -> image
	imageRefs  map[string]string // normalized reference -> id
	ipNext     uint32
	ipUsed     map[uint32]bool
	subs       map[*subscriber]struct{}
	seq        uint64 // creation order, for stable listings

	// The unfiltered lists' encodings (listcache.go); checkLists (tests
	// only) compares every cached answer served with the state.
	sandboxList, containerList listCache
	checkLists                 bool

	node       nodeConfig // the simulated node's sizes (usage.go)
	started    int64      // when the runtime started (ns): the node's start time
	retiredCPU uint64     // CPU ns of removed containers, kept in the node's total
	cgRoot     *cgNode    // the cgroup tree's root (cgroups.go)
	nextPid    int        // the next simulated pid (cgroups.go)

	stream streamState // exec, attach, port-forward (stream.go)

	intern *interner // strings and messages shared by what is kept (intern.go)
}

var (
	_ runtimeapi.RuntimeServiceServer = (*Runtime)(nil)
	_ runtimeapi.ImageServiceServer   = (*Runtime)(nil)
)

// New returns a runtime configured by cfg. An invalid IPBase falls back to
// DefaultIPBase; a fault rate outside [0,1] is clamped (use Config.Validate
// to report such errors to users).
func New(cfg Config) *Runtime {
	base, err := parseIPBase(cfg.IPBase)
	if err != nil {
		base, _ = parseIPBase(DefaultIPBase)
	}
	if math.IsNaN(cfg.FaultRate) || cfg.FaultRate < 0 {
		cfg.FaultRate = 0
	}
	if cfg.FaultRate > 1 {
		cfg.FaultRate = 1
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	r := &Runtime{
		cfg:        cfg,
		faultRNG:   mrand.New(mrand.NewSource(seed)),
		done:       make(chan struct{}),
		sandboxes:  map[string]*sandbox{},
		sbNames:    map[string]string{},
		containers: map[string]*container{},
		ctrNames:   map[string]string{},
		sbLabels:   labelIndex{},
		ctrLabels:  labelIndex{},
		images:     map[string]*image{},
		imageRefs:  map[string]string{},
		ipNext:     base,
		ipUsed:     map[uint32]bool{},
		subs:       map[*subscriber]struct{}{},
		node:       newNodeConfig(cfg),
		cgRoot:     &cgNode{children: map[string]*cgNode{}},
		started:    now(),
		intern:     newInterner(),
	}
	if len(cfg.FaultMethods) > 0 {
		r.faultMethods = map[string]bool{}
		for _, m := range cfg.FaultMethods {
			m = strings.TrimSpace(m)
			if m != "" {
				r.faultMethods[path.Base(m)] = true
			}
		}
	}
	return r
}

// streamWorkers is how many gRPC stream workers serve calls; a call that
// finds them all busy (a sleeping exec, an event stream, or calls queued
// for a CPU on a loaded node) takes a fresh goroutine. With 2 per core,
// half of the 1,000 probe calls a second on a loaded 2-core node still
// found them busy; an idle worker costs only its stack. With these and
// ExecSync's early answer, BenchmarkExecSyncProbe: about 64 to 48 us of
// CPU per probe (client and server), 174 to 170 allocations.
func streamWorkers() uint32 {
	return uint32(max(32, 8*runtime.GOMAXPROCS(0)))
}

// Serve serves both CRI services on l until the runtime is closed or l fails.
func (r *Runtime) Serve(l net.Listener) error {
	s := grpc.NewServer(
		grpc.ChainUnaryInterceptor(r.unaryFault),
		grpc.ChainStreamInterceptor(r.streamFault),
		grpc.MaxRecvMsgSize(maxMsgSize),
		grpc.MaxSendMsgSize(maxMsgSize),
		// Calls run on long-lived workers (and on a fresh goroutine only
		// when all are busy): a goroutine per call grows its stack through
		// the handler every time (4 % of the agent's CPU at 1,000 exec
		// probes a second).
		grpc.NumStreamWorkers(streamWorkers()),
		// The unfiltered lists are sent from their cached encoding
		// (listcache.go); everything else is encoded as usual.
		grpc.ForceServerCodecV2(newServerCodec()),
	)
	s.RegisterService(runtimeService, r)
	runtimeapi.RegisterImageServiceServer(s, r)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = l.Close()
		return errors.New("sim: runtime closed")
	}
	r.servers = append(r.servers, s)
	r.mu.Unlock()
	return s.Serve(l)
}

// Listen opens the endpoint: "unix:///path/sim.sock" (a stale socket file is
// removed first; a bare absolute path is taken as a unix socket) or
// "tcp://host:port".
func Listen(endpoint string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		return listenUnix(strings.TrimPrefix(endpoint, "unix://"))
	case strings.HasPrefix(endpoint, "tcp://"):
		return net.Listen("tcp", strings.TrimPrefix(endpoint, "tcp://"))
	case strings.HasPrefix(endpoint, "/"):
		return listenUnix(endpoint)
	}
	return nil, fmt.Errorf("sim: unsupported endpoint %q (want unix:///path or tcp://host:port)", endpoint)
}

func listenUnix(p string) (net.Listener, error) {
	if p == "" {
		return nil, errors.New("sim: empty unix socket path")
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("sim: socket directory: %w", err)
	}
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("sim: %s exists and is not a socket", p)
		}
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("sim: remove stale socket: %w", err)
		}
	}
	return net.Listen("unix", p)
}

// ListenAndServe serves a new runtime on endpoint until ctx is done, then
// stops everything (gRPC server, container timers and listeners).
func ListenAndServe(ctx context.Context, endpoint string, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l, err := Listen(endpoint)
	if err != nil {
		return err
	}
	r := New(cfg)
	errc := make(chan error, 1)
	go func() { errc <- r.Serve(l) }()
	select {
	case <-ctx.Done():
		r.Close()
		<-errc
		return nil
	case err := <-errc:
		r.Close()
		return err
	}
}

// Close stops all gRPC servers started by Serve, all container timers and
// listeners, and ends event streams. It is idempotent.
func (r *Runtime) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.done)
	for _, c := range r.containers {
		c.killAll()
	}
	servers := r.servers
	r.servers = nil
	r.mu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
	r.closeStreaming()
}

// ---- faults

func (r *Runtime) injectFault(fullMethod string) error {
	if r.cfg.FaultRate <= 0 {
		return nil
	}
	m := path.Base(fullMethod)
	if r.faultMethods != nil {
		if !r.faultMethods[m] {
			return nil
		}
	} else if m == "Version" || m == "Status" {
		return nil
	}
	r.faultMu.Lock()
	x := r.faultRNG.Float64()
	r.faultMu.Unlock()
	if x < r.cfg.FaultRate {
		return status.Error(codes.Unavailable, faultMessage)
	}
	return nil
}

func (r *Runtime) unaryFault(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := r.injectFault(info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (r *Runtime) streamFault(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := r.injectFault(info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// ---- helpers

func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func now() int64 { return time.Now().UnixNano() }

// lockContainer takes r.mu and returns container id; where there is none it
// lets r.mu go and answers NotFound.
func (r *Runtime) lockContainer(id string) (*container, error) {
	return lockGet(r, r.containers, "container", id)
}

// lockSandbox takes r.mu and returns sandbox id; where there is none it lets
// r.mu go and answers NotFound.
func (r *Runtime) lockSandbox(id string) (*sandbox, error) {
	return lockGet(r, r.sandboxes, "sandbox", id)
}

// lockGet takes r.mu and returns m[id] (m: r.containers or r.sandboxes, maps
// that are never replaced); where there is none it lets r.mu go and answers
// NotFound for kind.
func lockGet[T any](r *Runtime, m map[string]T, kind, id string) (T, error) {
	r.mu.Lock()
	v, ok := m[id]
	if !ok {
		r.mu.Unlock()
		var none T
		return none, notFound(kind, id)
	}
	return v, nil
}

// rlockContainer takes r.mu shared and returns container id; where there is
// none it lets r.mu go and answers NotFound. The caller only reads.
func (r *Runtime) rlockContainer(id string) (*container, error) {
	return rlockGet(r, r.containers, "container", id)
}

// rlockSandbox takes r.mu shared and returns sandbox id; where there is none
// it lets r.mu go and answers NotFound. The caller only reads.
func (r *Runtime) rlockSandbox(id string) (*sandbox, error) {
	return rlockGet(r, r.sandboxes, "sandbox", id)
}

// rlockGet is lockGet with r.mu taken shared.
func rlockGet[T any](r *Runtime, m map[string]T, kind, id string) (T, error) {
	r.mu.RLock()
	v, ok := m[id]
	if !ok {
		r.mu.RUnlock()
		var none T
		return none, notFound(kind, id)
	}
	return v, nil
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", kind, id)
}

// wait sleeps d without holding any lock; it returns early with an error when
// ctx is done or the runtime is closed.
func (r *Runtime) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-r.done:
		return status.Error(codes.Unavailable, "sim: runtime closed")
	}
}

// allocIP returns the next free sandbox address; the caller holds r.mu.
func (r *Runtime) allocIP() (uint32, error) {
	const lo, hi = 127<<24 | 2, 127<<24 | 0xfffffe
	for range hi - lo + 1 {
		cand := r.ipNext
		r.ipNext++
		if r.ipNext > hi || r.ipNext < lo {
			r.ipNext = lo
		}
		if cand < lo || cand > hi || cand&0xff == 0 || cand&0xff == 0xff || r.ipUsed[cand] {
			continue
		}
		r.ipUsed[cand] = true
		return cand, nil
	}
	return 0, status.Error(codes.ResourceExhausted, "sim: no free sandbox address in 127.0.0.0/8")
}

func ipString(ip uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], ip)
	return netip.AddrFrom4(b).String()
}

func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ---- events

type subscriber struct {
	mu     sync.Mutex
	q      []*runtimeapi.ContainerEventResponse
	notify chan struct{}
}

// publish records a change to sandbox id or container id (of sandbox sb):
// it makes the cached list of its kind stale and queues an event for every
// subscriber. Every change to a sandbox or container that a list shows
// (created, started, stopped, exited, removed) is an event and passes
// here. The caller holds r.mu exclusively.
func (r *Runtime) publish(id string, typ runtimeapi.ContainerEventType, sb *sandbox) {
	// A sandbox's events carry its own ID (as containerd's) and change
	// only the sandbox list: what its containers show changes with their
	// own events.
	if sb != nil && id == sb.id {
		r.sandboxList.invalidate()
	} else {
		r.containerList.invalidate()
	}
	if len(r.subs) == 0 {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          now(),
	}
	if sb != nil {
		ev.PodSandboxStatus = r.sandboxStatus(sb)
		ev.ContainersStatuses = r.sandboxContainerStatuses(sb)
	}
	for s := range r.subs {
		s.mu.Lock()
		s.q = append(s.q, ev)
		s.mu.Unlock()
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

// GetContainerEvents streams container (and sandbox) lifecycle events until
// the client goes away or the runtime closes.
func (r *Runtime) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	s := &subscriber{notify: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return status.Error(codes.Unavailable, "sim: runtime closed")
	}
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.subs, s)
		r.mu.Unlock()
	}()
	// Tell the client the stream is established.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.done:
			return status.Error(codes.Unavailable, "sim: runtime closed")
		case <-s.notify:
		}
		s.mu.Lock()
		q := s.q
		s.q = nil
		s.mu.Unlock()
		for _, ev := range q {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// ---- small RPCs

// Version reports the runtime's name and CRI version.
func (r *Runtime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: apiVersion,
	}, nil
}

// Status reports the runtime and its network ready.
func (r *Runtime) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}},
		Features:        &runtimeapi.RuntimeFeatures{},
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"config": fmt.Sprintf(`{"runtime":%q,"startLatency":%q,"stopLatency":%q,"faultRate":%v}`,
			RuntimeName, r.cfg.StartLatency, r.cfg.StopLatency, r.cfg.FaultRate)}
	}
	return resp, nil
}

// UpdateRuntimeConfig accepts and ignores the pod CIDR.
func (r *Runtime) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RuntimeConfig reports the cgroupfs driver.
func (r *Runtime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

// ListMetricDescriptors returns no descriptors.
func (r *Runtime) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

// ListPodSandboxMetrics returns no metrics.
func (r *Runtime) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}

// indexedLabel is the label the index keys: the pod UID, which the node
// agent (and the upstream kubelet) selects a pod's sandboxes and containers
// by. A selector without it is answered by a scan.
const indexedLabel = "io.kubernetes.pod.uid"

// labelIndex maps a pod UID label's value to the IDs carrying it, so that a
// pod's lists cost O(the pod's objects), not O(all objects). Only that one
// label is indexed: a set per label and value cost 1.6 KB per pod at 10,000
// pods (maps of one entry each), and no caller selects by other labels on a
// hot path.
type labelIndex map[string][]string

func (ix labelIndex) add(id string, labels map[string]string) {
	v, ok := labels[indexedLabel]
	if !ok {
		return
	}
	ix[v] = append(ix[v], id)
}

func (ix labelIndex) remove(id string, labels map[string]string) {
	v, ok := labels[indexedLabel]
	if !ok {
		return
	}
	ids := ix[v]
	for i, x := range ids {
		if x != id {
			continue
		}
		if len(ids) == 1 {
			delete(ix, v)
			return
		}
		ids[i] = ids[len(ids)-1]
		ids[len(ids)-1] = ""
		ix[v] = ids[:len(ids)-1]
		return
	}
}

// candidates returns the IDs carrying the selector's pod UID (in no
// order); ok is false when the selector has none (the caller scans).
func (ix labelIndex) candidates(selector map[string]string) (ids []string, ok bool) {
	v, ok := selector[indexedLabel]
	if !ok {
		return nil, false
	}
	return ix[v], true
}
