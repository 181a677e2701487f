package supervisors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"
)

// WatchRoot returns a channel closed once the actor behind root has
// terminated, whatever stopped it (its guardian giving up, a stop from
// outside, Stop at shutdown). A root already gone closes it at once
// (protoactor answers a watch of a dead PID with Terminated). The watcher
// is a small top-level actor outside the tree; it stops itself after
// reporting.
func WatchRoot(sys *actor.ActorSystem, root *actor.PID) (<-chan struct{}, error) {
	if sys == nil || root == nil {
		return nil, errors.New("watch root: no actor system or root")
	}
	gone := make(chan struct{})
	closed := false
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Watch(root)
		case *actor.Terminated:
			if m.Who != nil && m.Who.Id == root.Id && !closed {
				closed = true
				close(gone)
				c.Stop(c.Self())
			}
		}
	})
	if _, err := sys.Root.SpawnNamed(props, "watch-"+root.Id); err != nil {
		return nil, err
	}
	return gone, nil
}
