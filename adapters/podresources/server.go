// Package podresources serves the kubelet's pod resources API
// (k8s.io/kubelet/pkg/apis/podresources/v1: List, Get,
// GetAllocatableResources) on <root-dir>/pod-resources/kubelet.sock, the
// socket node tools such as DCGM exporter and topology exporters read.
//
// The pods and their devices come from a Source (the lead wires the
// StatusActor's pod list and the DevicesActor's allocations); the server
// assumes nothing about actors. actorlet has no CPU manager, memory manager
// or dynamic resource allocation on this API, so CPU ids, memory and
// dynamic resources are always empty, as an upstream kubelet with the none
// policies answers: per container, and per pod (the pod-level cpu_ids and
// memory v1.37 added, which upstream fills from the CPU and memory
// managers' pod-level allocations); devices carry no NUMA topology. Only v1 is served (not
// the deprecated v1alpha1). Requests are rate limited as upstream's (100 per
// second, bursts of 10; over it: ResourceExhausted "rejected by rate
// limit").
//
// The package is an inbound adapter: it imports messages, never actors.
package podresources

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/actorlet/actorlet/internal/grpcsock"
	"github.com/actorlet/actorlet/messages"
)

const (
	// DirName is the pod resources dir under the kubelet's root dir.
	DirName = "pod-resources"
	// SocketName is the socket's name in DirName (upstream: "kubelet" plus
	// the ".sock" suffix).
	SocketName = "kubelet.sock"
	// DefaultQPS and DefaultBurst are upstream's rate limit of the API.
	DefaultQPS   = 100
	DefaultBurst = 10
)

// SocketPath is the pod resources socket for a kubelet root dir:
// <rootDir>/pod-resources/kubelet.sock.
func SocketPath(rootDir string) string {
	return filepath.Join(rootDir, DirName, SocketName)
}

// Source is where the server reads pods and devices. Each call is made on
// the request's goroutine with the request's context.
type Source interface {
	// Pods returns the pods of the node (the active ones; terminal pods are
	// left out of List whatever Source returns). The server does not modify
	// them.
	Pods(ctx context.Context) ([]*v1.Pod, error)
	// Devices returns the devices allocated to the pod with this UID, or to
	// every pod when uid is "".
	Devices(ctx context.Context, uid types.UID) ([]messages.PodDevices, error)
	// Allocatable returns every allocatable device ID by resource.
	Allocatable(ctx context.Context) (map[v1.ResourceName][]string, error)
}

// Option changes a Server made by New.
type Option func(*Server)

// WithRateLimit sets the rate limit of requests: qps per second, bursts of
// burst (upstream's: DefaultQPS, DefaultBurst).
func WithRateLimit(qps float64, burst int) Option {
	return func(s *Server) { s.limiter = rate.NewLimiter(rate.Limit(qps), burst) }
}

// Server is the pod resources gRPC server (PodResourcesListerServer).
type Server struct {
	socket  string
	src     Source
	log     *slog.Logger
	limiter *rate.Limiter
	sock    *grpcsock.Server
}

// New returns a server for socketPath (SocketPath(rootDir) as upstream)
// reading src. log may be nil (slog.Default()).
func New(socketPath string, src Source, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		socket:  socketPath,
		src:     src,
		log:     log.With("component", "podresources"),
		limiter: rate.NewLimiter(DefaultQPS, DefaultBurst),
	}
	for _, o := range opts {
		o(s)
	}
	s.sock = grpcsock.New("pod resources", socketPath,
		func(srv *grpc.Server) { podresourcesapi.RegisterPodResourcesListerServer(srv, &listerServer{s: s}) },
		grpcsock.WithGRPCOptions(grpc.UnaryInterceptor(s.rateLimit)),
		grpcsock.WithLogger(s.log, "serving the pod resources API", "pod resources API stopped"))
	return s
}

// SocketPath is where the server listens.
func (s *Server) SocketPath() string { return s.socket }

// Start makes the socket's dir (0750) if it is missing, removes a stale
// socket left by an earlier process, listens and serves in a goroutine until
// ctx ends or Stop is called.
func (s *Server) Start(ctx context.Context) error {
	if err := s.checkConfig(); err != nil {
		return err
	}
	return s.sock.Start(ctx)
}

// Serve is Start, then waits until ctx ends (nil) or the server fails (the
// error), and stops it.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.checkConfig(); err != nil {
		return err
	}
	return s.sock.Serve(ctx)
}

// Stop stops serving (open requests are cancelled) and removes the socket.
// It is idempotent; Start may be called again afterwards.
func (s *Server) Stop() {
	if s.sock != nil {
		s.sock.Stop()
	}
}

// checkConfig refuses a server that cannot serve.
func (s *Server) checkConfig() error {
	if s.src == nil {
		return errors.New("pod resources: no source")
	}
	if s.socket == "" {
		return errors.New("pod resources: no socket path")
	}
	return nil
}

// errLimitExceeded is upstream's answer to a request over the rate limit.
var errLimitExceeded = status.Error(codes.ResourceExhausted, "rejected by rate limit")

// rateLimit refuses requests over the limit, as upstream's interceptor.
func (s *Server) rateLimit(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !s.limiter.Allow() {
		return nil, errLimitExceeded
	}
	return h(ctx, req)
}

// listerServer is the gRPC face of a Server.
type listerServer struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	s *Server
}

// List returns every active pod with all its containers (restartable init
// containers, the sidecars, first) and each container's devices.
func (l *listerServer) List(ctx context.Context, _ *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	pods, err := l.s.src.Pods(ctx)
	if err != nil {
		return nil, l.s.sourceError(ctx, "List", "pods", err)
	}
	all, err := l.s.src.Devices(ctx, "")
	if err != nil {
		return nil, l.s.sourceError(ctx, "List", "devices", err)
	}
	byUID := make(map[types.UID]messages.PodDevices, len(all))
	for _, pd := range all {
		byUID[pd.UID] = pd
	}
	resp := &podresourcesapi.ListPodResourcesResponse{PodResources: make([]*podresourcesapi.PodResources, 0, len(pods))}
	for _, pod := range pods {
		if pod == nil || terminal(pod) {
			continue
		}
		resp.PodResources = append(resp.PodResources, podResources(pod, byUID[pod.UID]))
	}
	return resp, nil
}

// Get returns one pod by namespace and name, as List shows it.
func (l *listerServer) Get(ctx context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	if req.GetPodName() == "" {
		return nil, status.Error(codes.InvalidArgument, "pod name is required")
	}
	pods, err := l.s.src.Pods(ctx)
	if err != nil {
		return nil, l.s.sourceError(ctx, "Get", "pods", err)
	}
	pod := findPod(pods, req.GetPodNamespace(), req.GetPodName())
	if pod == nil {
		return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
	}
	devs, err := l.s.src.Devices(ctx, pod.UID)
	if err != nil {
		return nil, l.s.sourceError(ctx, "Get", "devices", err)
	}
	var mine messages.PodDevices
	for _, pd := range devs {
		if pd.UID == pod.UID {
			mine = pd
		}
	}
	return &podresourcesapi.GetPodResourcesResponse{PodResources: podResources(pod, mine)}, nil
}

// GetAllocatableResources returns every allocatable device by resource.
func (l *listerServer) GetAllocatableResources(ctx context.Context, _ *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	alloc, err := l.s.src.Allocatable(ctx)
	if err != nil {
		return nil, l.s.sourceError(ctx, "GetAllocatableResources", "allocatable devices", err)
	}
	return &podresourcesapi.AllocatableResourcesResponse{Devices: containerDevices(alloc)}, nil
}

// sourceError logs a Source failure and turns it into a gRPC status: the
// request's own end as Canceled or DeadlineExceeded, a status error as it
// is, anything else Unavailable.
func (s *Server) sourceError(ctx context.Context, method, what string, err error) error {
	s.log.Warn("pod resources: source failed", "method", method, "what", what, "err", err)
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.Errorf(codes.Unavailable, "pod resources: %s: %v", what, err)
}

// terminal says whether a pod is done (upstream's active pods filter).
func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// findPod finds a pod by namespace and name, preferring one that is not
// terminal (a pod deleted and created again under the same name).
func findPod(pods []*v1.Pod, namespace, name string) *v1.Pod {
	var found *v1.Pod
	for _, pod := range pods {
		if pod == nil || pod.Namespace != namespace || pod.Name != name {
			continue
		}
		if !terminal(pod) {
			return pod
		}
		if found == nil {
			found = pod
		}
	}
	return found
}

// podResources is one pod as the API shows it: restartable init containers
// (sidecars), then the containers, each with its devices.
func podResources(pod *v1.Pod, devs messages.PodDevices) *podresourcesapi.PodResources {
	pr := &podresourcesapi.PodResources{
		Name:       pod.Name,
		Namespace:  pod.Namespace,
		Containers: make([]*podresourcesapi.ContainerResources, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)),
	}
	add := func(c *v1.Container) {
		pr.Containers = append(pr.Containers, &podresourcesapi.ContainerResources{
			Name:    c.Name,
			Devices: containerDevices(devs.Containers[c.Name]),
		})
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; restartable(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return pr
}

// restartable says whether an init container is a sidecar (restartPolicy
// Always), as upstream's IsRestartableInitContainer.
func restartable(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// containerDevices turns device IDs by resource into the API's list, sorted
// by resource name (resources without devices are left out).
func containerDevices(byResource map[v1.ResourceName][]string) []*podresourcesapi.ContainerDevices {
	names := make([]v1.ResourceName, 0, len(byResource))
	for name, ids := range byResource {
		if len(ids) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]*podresourcesapi.ContainerDevices, 0, len(names))
	for _, name := range names {
		out = append(out, &podresourcesapi.ContainerDevices{
			ResourceName: string(name),
			DeviceIds:    slices.Clone(byResource[name]),
		})
	}
	return out
}
