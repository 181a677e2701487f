package supervisors

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/actortest"
)

// TestRootGivingUpIsReported: a singleton failing too often escalates to
// the root, again and again, until the root's guardian stops the root; the
// strategy reports it through OnGiveUp and WatchRoot's channel closes, so
// the process can exit instead of living on without a tree.
func TestRootGivingUpIsReported(t *testing.T) {
	sys, reg, mws := observed(t, nil)
	log, buf := testLogger(t)
	var mu sync.Mutex
	var gaveUp []GiveUp
	strategy := NewStrategy(StrategyConfig{MaxRestarts: 1, Window: time.Hour, BackoffBase: time.Microsecond, BackoffCap: time.Microsecond,
		OnGiveUp: func(g GiveUp) { mu.Lock(); gaveUp = append(gaveUp, g); mu.Unlock() }}, nil, log, nil)
	root, err := SpawnRoot(sys, strategy, mws, []Child{{Name: "node", Props: counterProps(mws)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(sys, root) })
	gone, err := WatchRoot(sys, root)
	if err != nil {
		t.Fatal(err)
	}
	node := pidOf(sys, "root/node")
	crashTwice := func() {
		for i := 1; i <= 2; i++ {
			actortest.Eventually(t, "node alive", func() bool {
				_, err := sys.Root.RequestFuture(node, get{}, time.Second).Result()
				return err == nil
			})
			sys.Root.Send(node, chaosMsg)
			if i == 1 {
				actortest.Eventually(t, "node restarted", func() bool { return restartsOf(reg, node.Id) == 1 })
			}
		}
	}
	crashTwice() // escalated: the root is restarted
	actortest.Eventually(t, "root restarted", func() bool { return restartsOf(reg, root.Id) == 1 })
	select {
	case <-gone:
		t.Fatal("root reported gone after one restart")
	default:
	}
	crashTwice() // escalated again: the root has failed too often
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("root not reported gone")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gaveUp) != 1 || gaveUp[0].PID != root.Id || gaveUp[0].Kind != KindRoot || gaveUp[0].Failures != 2 {
		t.Fatalf("OnGiveUp calls = %+v", gaveUp)
	}
	if !strings.Contains(gaveUp[0].String(), "root (root) failed 2 times") {
		t.Fatalf("GiveUp.String() = %q", gaveUp[0].String())
	}
	if !strings.Contains(buf.String(), "the actor tree under it is gone") {
		t.Fatalf("no Error log of giving up:\n%s", buf.String())
	}
	if n := len(reg.Live()); n != 0 {
		t.Fatalf("%d actors still live", n)
	}
}

// TestWatchRootOfAGoneRoot: watching a root that is already gone reports
// it at once.
func TestWatchRootOfAGoneRoot(t *testing.T) {
	sys, _, mws := observed(t, nil)
	root, err := SpawnRoot(sys, fastStrategy(t, 1), mws, []Child{{Name: "status", Props: counterProps(mws)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Stop(sys, root); err != nil {
		t.Fatal(err)
	}
	gone, err := WatchRoot(sys, root)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped root not reported gone")
	}
}
