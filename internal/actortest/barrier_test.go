package actortest

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

func TestSyncWaitsForEarlierMessages(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	var mu sync.Mutex
	var got []int
	release := make(chan struct{})
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if n, ok := c.Message().(int); ok {
			if n == 0 {
				<-release // the first message blocks the mailbox
			}
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}
	}, actor.WithReceiverMiddleware(Barrier())))
	for i := range 100 {
		sys.Root.Send(pid, i)
	}
	close(release)
	Sync(t, sys, pid)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 100 {
		t.Fatalf("handled %d of 100 messages before the barrier", len(got))
	}
}
