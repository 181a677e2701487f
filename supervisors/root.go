package supervisors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// RootName is the name of the root actor.
const RootName = "root"

// SpawnTimeout bounds how long SpawnRoot waits for the tree and Stop for
// its teardown.
const SpawnTimeout = 10 * time.Second

// Child is one child of the root actor.
type Child struct {
	Name  string
	Props *actor.Props
}

// rootReady asks the root whether it spawned its children; reply: error
// (nil on success) wrapped in rootReadyReply.
type rootReady struct{}

type rootReadyReply struct{ err error }

type rootActor struct {
	children []Child
	err      error
}

func (a *rootActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		a.handleStarted(c)
	case rootReady:
		c.Respond(rootReadyReply{err: a.err})
	}
}

// handleStarted spawns the children in order. It also runs after a restart
// of the root, whose old children protoactor has stopped by then.
func (a *rootActor) handleStarted(c actor.Context) {
	a.err = nil
	for _, ch := range a.children {
		if _, err := c.SpawnNamed(ch.Props, ch.Name); err != nil {
			a.err = errors.Join(a.err, fmt.Errorf("spawn %s: %w", ch.Name, err))
		}
	}
}

// SpawnRoot spawns the actor "root" with strategy as its guardian (so the
// root itself is supervised: restarted, or stopped when it fails too often)
// and as the supervisor of its children, and mws as its receiver
// middlewares. The root spawns each child under itself, in order, with
// SpawnNamed(child.Props, child.Name); after a restart of the root they are
// spawned again. SpawnRoot returns once every child exists.
func SpawnRoot(sys *actor.ActorSystem, strategy actor.SupervisorStrategy, mws []actor.ReceiverMiddleware, children []Child) (*actor.PID, error) {
	if sys == nil {
		return nil, errors.New("spawn root: no actor system")
	}
	if strategy == nil {
		return nil, errors.New("spawn root: no supervisor strategy")
	}
	seen := make(map[string]bool, len(children))
	for _, ch := range children {
		if ch.Name == "" || ch.Props == nil {
			return nil, fmt.Errorf("spawn root: child %q needs a name and props", ch.Name)
		}
		if seen[ch.Name] {
			return nil, fmt.Errorf("spawn root: duplicate child name %q", ch.Name)
		}
		seen[ch.Name] = true
	}
	kids := append([]Child(nil), children...)
	opts := []actor.PropsOption{
		actor.WithGuardian(strategy),
		actor.WithSupervisor(strategy),
	}
	if len(mws) > 0 {
		opts = append(opts, actor.WithReceiverMiddleware(mws...))
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &rootActor{children: kids} }, opts...)
	pid, err := sys.Root.SpawnNamed(props, RootName)
	if err != nil {
		return nil, fmt.Errorf("spawn root: %w", err)
	}
	res, err := sys.Root.RequestFuture(pid, rootReady{}, SpawnTimeout).Result()
	if err != nil {
		_ = Stop(sys, pid)
		return nil, fmt.Errorf("spawn root: waiting for children: %w", err)
	}
	if r, ok := res.(rootReadyReply); ok && r.err != nil {
		_ = Stop(sys, pid)
		return nil, fmt.Errorf("spawn root: %w", r.err)
	}
	return pid, nil
}

// Stop stops the tree under rootPID gracefully and waits for it: protoactor
// stops the children (depth first) before the root reports itself stopped.
// (ActorSystem.Shutdown stops no actor.)
func Stop(sys *actor.ActorSystem, rootPID *actor.PID) error {
	if sys == nil || rootPID == nil {
		return nil
	}
	if err := sys.Root.StopFuture(rootPID).Wait(); err != nil {
		return fmt.Errorf("stop %s: %w", rootPID.Id, err)
	}
	return nil
}
