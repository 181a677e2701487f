package main

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/adapters/podsapi"
	"github.com/actorlet/actorlet/messages"
)

// startPodsAPI serves the Pods API (beta, on by default in v1.37) on
// <root-dir>/pods-api/pods-api.sock from the StatusActor's pods. A socket
// that cannot be served (a root dir too long for a socket path, a
// read-only dir) is logged; the node runs without it. The returned stop is
// never nil.
func startPodsAPI(ctx context.Context, w *wiring, t *tree) (stop func()) {
	s := podsapi.New(podsapi.SocketPath(w.o.RootDir), podsSource{sys: t.sys, status: t.pid("status"), timeout: 10 * time.Second}, w.log)
	if err := s.Start(ctx); err != nil {
		w.log.Warn("pods API not served", "err", err)
		return func() {}
	}
	return s.Stop
}

// podsSource reads the pods from the StatusActor, by message.
type podsSource struct {
	sys     *actor.ActorSystem
	status  *actor.PID
	timeout time.Duration
}

func (p podsSource) Pods(ctx context.Context) ([]*v1.Pod, error) {
	timeout := p.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	res, err := p.sys.Root.RequestFuture(p.status, &messages.GetPods{}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("status actor: %w", err)
	}
	switch m := res.(type) {
	case *messages.PodList:
		return m.Items, nil
	case *messages.StatusUnavailable:
		return nil, fmt.Errorf("%w: %s", podsapi.ErrInitializing, m.Reason)
	}
	return nil, fmt.Errorf("status actor: unexpected answer %T", res)
}
