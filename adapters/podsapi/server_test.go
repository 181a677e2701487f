package podsapi_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	api "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/actorlet/actorlet/adapters/podsapi"
)

var quiet = slog.New(slog.DiscardHandler)

// source is a Source whose pods a test changes.
type source struct {
	mu   sync.Mutex
	pods []*v1.Pod
	err  error
}

func (s *source) Pods(context.Context) ([]*v1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods, s.err
}

func (s *source) set(pods []*v1.Pod, err error) {
	s.mu.Lock()
	s.pods, s.err = pods, err
	s.mu.Unlock()
}

func pod(uid, name string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}}, Status: v1.PodStatus{Phase: phase}}
}

// serve starts a server in a short temp dir (a socket path is at most
// 108 bytes) and returns a client.
func serve(t *testing.T, src podsapi.Source, opts ...podsapi.Option) (api.PodsClient, string) {
	t.Helper()
	root, err := os.MkdirTemp("", "pa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	opts = append([]podsapi.Option{podsapi.WithPollEvery(10 * time.Millisecond)}, opts...)
	s := podsapi.New(podsapi.SocketPath(root), src, quiet, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+s.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return api.NewPodsClient(conn), root
}

func decode(t *testing.T, b []byte) *v1.Pod {
	t.Helper()
	p := &v1.Pod{}
	if err := p.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestListAndGet(t *testing.T) {
	src := &source{pods: []*v1.Pod{pod("uid-b", "b", v1.PodRunning), pod("uid-a", "a", v1.PodSucceeded)}}
	c, root := serve(t, src)
	if fi, err := os.Stat(filepath.Join(root, "pods-api")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("socket dir: %v %v, want 0750", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(root, "pods-api", "pods-api.sock")); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	ctx := context.Background()
	l, err := c.ListPods(ctx, &api.ListPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Pods) != 2 {
		t.Fatalf("%d pods, want 2 (terminal ones too)", len(l.Pods))
	}
	a, b := decode(t, l.Pods[0]), decode(t, l.Pods[1])
	if a.UID != "uid-a" || b.UID != "uid-b" || a.Status.Phase != v1.PodSucceeded || b.Spec.Containers[0].Image != "i" {
		t.Fatalf("listed %s %s %s", a.UID, b.UID, a.Status.Phase)
	}
	g, err := c.GetPod(ctx, &api.GetPodRequest{PodUID: "uid-b"})
	if err != nil || decode(t, g.Pod).Name != "b" {
		t.Fatalf("get: %v", err)
	}
	if _, err := c.GetPod(ctx, &api.GetPodRequest{PodUID: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get of an unknown UID: %v", err)
	}
	src.set(nil, podsapi.ErrInitializing)
	if _, err := c.ListPods(ctx, &api.ListPodsRequest{}); status.Code(err) != codes.FailedPrecondition || status.Convert(err).Message() != "Kubelet is initializing" {
		t.Fatalf("initializing: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	c, _ := serve(t, &source{}, podsapi.WithRateLimit(0.001, 3))
	ctx := context.Background()
	for i := range 3 {
		if _, err := c.ListPods(ctx, &api.ListPodsRequest{}); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err := c.ListPods(ctx, &api.ListPodsRequest{})
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != "rejected by rate limit" {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestWatch(t *testing.T) {
	src := &source{pods: []*v1.Pod{pod("uid-b", "b", v1.PodPending), pod("uid-a", "a", v1.PodRunning)}}
	c, _ := serve(t, src)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.WatchPods(ctx, &api.WatchPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func() (api.EventType, *v1.Pod) {
		t.Helper()
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Pod == nil {
			return ev.Type, nil
		}
		return ev.Type, decode(t, ev.Pod)
	}
	for _, want := range []string{"uid-a", "uid-b"} {
		if typ, p := next(); typ != api.EventType_ADDED || p.UID != types.UID(want) {
			t.Fatalf("initial: %v %v, want ADDED %s", typ, p, want)
		}
	}
	if typ, p := next(); typ != api.EventType_INITIAL_SYNC_COMPLETE || p != nil {
		t.Fatalf("%v, want INITIAL_SYNC_COMPLETE", typ)
	}
	// b runs (a new copy), a copy of a unchanged: one MODIFIED.
	src.set([]*v1.Pod{pod("uid-b", "b", v1.PodRunning), pod("uid-a", "a", v1.PodRunning)}, nil)
	if typ, p := next(); typ != api.EventType_MODIFIED || p.UID != "uid-b" || p.Status.Phase != v1.PodRunning {
		t.Fatalf("%v %v, want MODIFIED uid-b Running", typ, p)
	}
	// c added, a gone.
	src.set([]*v1.Pod{pod("uid-b", "b", v1.PodRunning), pod("uid-c", "c", v1.PodPending)}, nil)
	if typ, p := next(); typ != api.EventType_ADDED || p.UID != "uid-c" {
		t.Fatalf("%v %v, want ADDED uid-c", typ, p)
	}
	typ, p := next()
	if typ != api.EventType_DELETED || p.UID != "uid-a" || p.Name != "a" || p.Namespace != "ns" || len(p.Spec.Containers) != 0 {
		t.Fatalf("%v %+v, want DELETED of a minimal uid-a", typ, p)
	}
}
