// Package podsapi serves the kubelet's Pods API (k8s.io/kubelet/pkg/apis/
// pods/v1alpha1: ListPods, GetPod, WatchPods; beta and on by default in
// v1.37) on <root-dir>/pods-api/pods-api.sock, as upstream: each pod is
// the node's own view of it (spec and the agent's newest status) as a
// protobuf-encoded v1.Pod. ListPods and the start of WatchPods are sorted
// by UID; WatchPods sends every pod as ADDED, then INITIAL_SYNC_COMPLETE,
// then ADDED, MODIFIED and DELETED (a pod with its name, namespace and UID
// only) as the pods change. While the agent rebuilds its view after a
// restart every call is FailedPrecondition "Kubelet is initializing".
// Unary calls are rate limited as upstream's (100 per second, bursts of
// 10; over it: ResourceExhausted "rejected by rate limit"); a watch is not.
//
// Upstream's status manager pushes each change to the watchers; here the
// pods come from a Source (the StatusActor, asked by message) that each
// watch reads again every PollEvery (1 s): changes within one period reach
// a watcher as one MODIFIED. The package is an inbound adapter: it imports
// messages, never actors.
package podsapi

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/actorlet/actorlet/internal/grpcsock"
)

const (
	// DirName is the Pods API dir under the kubelet's root dir.
	DirName = "pods-api"
	// SocketName is the socket's name in DirName (upstream: "pods-api"
	// plus the ".sock" suffix).
	SocketName = "pods-api.sock"
	// DefaultQPS and DefaultBurst are upstream's rate limit of the API.
	DefaultQPS   = 100
	DefaultBurst = 10
	// DefaultPollEvery is how often a watch reads the pods again.
	DefaultPollEvery = time.Second
)

// SocketPath is the Pods API socket for a kubelet root dir.
func SocketPath(rootDir string) string {
	return filepath.Join(rootDir, DirName, SocketName)
}

// ErrInitializing is what a Source returns while it has no whole view of
// the node's pods yet (the agent starting or its status actor restarting).
var ErrInitializing = errors.New("the pod view is being rebuilt")

// Source is where the server reads the pods: every pod of the node with its
// newest status, never modified by the server. It is called on the
// request's goroutine with the request's context.
type Source interface {
	Pods(ctx context.Context) ([]*v1.Pod, error)
}

// Option changes a Server made by New.
type Option func(*Server)

// WithRateLimit sets the rate limit of unary calls.
func WithRateLimit(qps float64, burst int) Option {
	return func(s *Server) { s.limiter = rate.NewLimiter(rate.Limit(qps), burst) }
}

// WithPollEvery sets how often a watch reads the pods again.
func WithPollEvery(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.poll = d
		}
	}
}

// Server is the Pods API gRPC server.
type Server struct {
	src     Source
	log     *slog.Logger
	limiter *rate.Limiter
	poll    time.Duration
	sock    *grpcsock.Server
}

// New returns a server for socketPath reading src; log may be nil.
func New(socketPath string, src Source, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{src: src, log: log.With("component", "podsapi"), limiter: rate.NewLimiter(DefaultQPS, DefaultBurst), poll: DefaultPollEvery}
	for _, o := range opts {
		o(s)
	}
	s.sock = grpcsock.New("pods API", socketPath,
		func(g *grpc.Server) { podsv1alpha1.RegisterPodsServer(g, &podsServer{s: s}) },
		grpcsock.WithGRPCOptions(grpc.UnaryInterceptor(s.rateLimit)),
		grpcsock.WithLogger(s.log, "serving the pods API", "pods API stopped"))
	return s
}

// SocketPath is where the server listens.
func (s *Server) SocketPath() string { return s.sock.SocketPath() }

// Start listens (making the socket's dir 0750, replacing a stale socket)
// and serves until ctx ends or Stop is called.
func (s *Server) Start(ctx context.Context) error {
	if s.src == nil {
		return errors.New("pods API: no source")
	}
	return s.sock.Start(ctx)
}

// Stop stops serving (open watches end) and removes the socket; idempotent.
func (s *Server) Stop() { s.sock.Stop() }

var errLimitExceeded = status.Error(codes.ResourceExhausted, "rejected by rate limit")

func (s *Server) rateLimit(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !s.limiter.Allow() {
		return nil, errLimitExceeded
	}
	return h(ctx, req)
}

// pods reads the source, sorted by UID; its errors become gRPC statuses.
func (s *Server) pods(ctx context.Context, method string) ([]*v1.Pod, error) {
	pods, err := s.src.Pods(ctx)
	switch {
	case err == nil:
	case errors.Is(err, ErrInitializing):
		return nil, status.Error(codes.FailedPrecondition, "Kubelet is initializing")
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	default:
		s.log.Warn("pods API: reading the pods failed", "method", method, "err", err)
		return nil, status.Errorf(codes.Unavailable, "pods API: %v", err)
	}
	pods = slices.DeleteFunc(slices.Clone(pods), func(p *v1.Pod) bool { return p == nil })
	slices.SortFunc(pods, func(a, b *v1.Pod) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return pods, nil
}

func marshal(p *v1.Pod) ([]byte, error) {
	b, err := p.Marshal()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "failed to marshal pod: %v", err)
	}
	return b, nil
}

type podsServer struct {
	podsv1alpha1.UnimplementedPodsServer
	s *Server
}

func (p *podsServer) ListPods(ctx context.Context, _ *podsv1alpha1.ListPodsRequest) (*podsv1alpha1.ListPodsResponse, error) {
	pods, err := p.s.pods(ctx, "ListPods")
	if err != nil {
		return nil, err
	}
	out := &podsv1alpha1.ListPodsResponse{Pods: make([][]byte, 0, len(pods))}
	for _, pod := range pods {
		b, err := marshal(pod)
		if err != nil {
			return nil, err
		}
		out.Pods = append(out.Pods, b)
	}
	return out, nil
}

func (p *podsServer) GetPod(ctx context.Context, req *podsv1alpha1.GetPodRequest) (*podsv1alpha1.GetPodResponse, error) {
	pods, err := p.s.pods(ctx, "GetPod")
	if err != nil {
		return nil, err
	}
	for _, pod := range pods {
		if string(pod.UID) == req.GetPodUID() {
			b, err := marshal(pod)
			if err != nil {
				return nil, err
			}
			return &podsv1alpha1.GetPodResponse{Pod: b}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod with UID %s not found", req.GetPodUID())
}

func (p *podsServer) WatchPods(_ *podsv1alpha1.WatchPodsRequest, stream podsv1alpha1.Pods_WatchPodsServer) error {
	ctx := stream.Context()
	pods, err := p.s.pods(ctx, "WatchPods")
	if err != nil {
		return err
	}
	send := func(t podsv1alpha1.EventType, pod *v1.Pod) error {
		ev := &podsv1alpha1.WatchPodsEvent{Type: t}
		if pod != nil {
			b, err := marshal(pod)
			if err != nil {
				return err
			}
			ev.Pod = b
		}
		return stream.Send(ev)
	}
	seen := make(map[types.UID]*v1.Pod, len(pods))
	for _, pod := range pods {
		if err := send(podsv1alpha1.EventType_ADDED, pod); err != nil {
			return err
		}
		seen[pod.UID] = pod
	}
	if err := send(podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE, nil); err != nil {
		return err
	}
	tick := time.NewTicker(p.s.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-tick.C:
		}
		pods, err := p.s.pods(ctx, "WatchPods")
		if status.Code(err) == codes.FailedPrecondition {
			continue // rebuilding: the changes come once it is whole
		}
		if err != nil {
			return err
		}
		now := make(map[types.UID]bool, len(pods))
		for _, pod := range pods {
			now[pod.UID] = true
			old, ok := seen[pod.UID]
			switch {
			case !ok:
				err = send(podsv1alpha1.EventType_ADDED, pod)
			case old != pod && !samePod(old, pod):
				err = send(podsv1alpha1.EventType_MODIFIED, pod)
			}
			if err != nil {
				return err
			}
			seen[pod.UID] = pod
		}
		gone := make([]types.UID, 0)
		for uid := range seen {
			if !now[uid] {
				gone = append(gone, uid)
			}
		}
		slices.Sort(gone)
		for _, uid := range gone {
			old := seen[uid]
			delete(seen, uid)
			if err := send(podsv1alpha1.EventType_DELETED, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace, UID: old.UID}}); err != nil {
				return err
			}
		}
	}
}

// samePod: nothing a client sees changed (the source may hand a new copy of
// an unchanged pod).
func samePod(a, b *v1.Pod) bool {
	return apiequality.Semantic.DeepEqual(a.ObjectMeta, b.ObjectMeta) && apiequality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		apiequality.Semantic.DeepEqual(a.Status, b.Status)
}
