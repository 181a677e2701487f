package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestShrinkProcessRegistry: after the shrink the system still finds the
// processes it registered itself (a message to a stopped actor reaches
// the dead letters, which count it), and actors spawn, answer and leave
// the registry as before.
func TestShrinkProcessRegistry(t *testing.T) {
	sys := actor.NewActorSystem()
	before := 0
	for _, b := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		before += b.Count()
	}
	shrinkProcessRegistry(sys)
	if n := len(sys.ProcessRegistry.LocalPIDs.LocalPIDs); n != registryBuckets {
		t.Fatalf("%d buckets, want %d", n, registryBuckets)
	}
	count := func() int {
		n := 0
		for _, b := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
			n += b.Count()
		}
		return n
	}
	if got := count(); got != before || before == 0 {
		t.Fatalf("%d processes after the shrink, %d before", got, before)
	}
	for _, id := range []string{"deadletter", "eventstream"} {
		if _, ok := sys.ProcessRegistry.GetLocal(id); !ok {
			t.Errorf("%s lost in the shrink", id)
		}
	}
	const n = 1000
	pids := make([]*actor.PID, n)
	for i := range pids {
		pid, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
			if s, ok := c.Message().(string); ok {
				c.Respond(s + "!")
			}
		}), fmt.Sprintf("a-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pids[i] = pid
	}
	if got := count(); got != before+n {
		t.Fatalf("%d processes with %d actors, want %d", got, n, before+n)
	}
	for i, pid := range pids {
		r, err := sys.Root.RequestFuture(pid, fmt.Sprint(i), 5*time.Second).Result()
		if err != nil || r != fmt.Sprint(i)+"!" {
			t.Fatalf("actor %d answered %v, %v", i, r, err)
		}
	}
	for _, pid := range pids {
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(); got != before {
		t.Errorf("%d processes after every actor stopped, want %d", got, before)
	}
	if _, err := sys.Root.RequestFuture(pids[0], "x", 5*time.Second).Result(); err == nil {
		t.Error("a stopped actor answered")
	}
}
