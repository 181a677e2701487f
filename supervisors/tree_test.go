package supervisors

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

var chaosMsg = messages.ChaosPanic{Reason: "test"}

func fastStrategy(t *testing.T, max int) actor.SupervisorStrategy {
	log, _ := testLogger(t)
	return NewStrategy(StrategyConfig{MaxRestarts: max, Window: time.Hour, BackoffBase: time.Microsecond, BackoffCap: time.Microsecond}, nil, log, nil)
}

func TestChildRestartKeepsSiblingState(t *testing.T) {
	sys, reg, mws := observed(t, nil)
	root, err := SpawnRoot(sys, fastStrategy(t, 10), mws, []Child{{Name: "status", Props: counterProps(mws)}, {Name: "pleg", Props: counterProps(mws)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(sys, root) })
	status, pleg := pidOf(sys, "root/status"), pidOf(sys, "root/pleg")
	for range 3 {
		sys.Root.Send(status, inc{})
		sys.Root.Send(pleg, inc{})
	}
	if got := ask(t, sys, pleg, get{}); got != 3 {
		t.Fatalf("pleg count = %v", got)
	}
	sys.Root.Send(pleg, chaosMsg)
	actortest.Eventually(t, "pleg restarted", func() bool { return restartsOf(reg, pleg.Id) == 1 })
	if got := ask(t, sys, pleg, get{}); got != 0 {
		t.Fatalf("restarted pleg count = %v, want 0", got)
	}
	if got := ask(t, sys, status, get{}); got != 3 {
		t.Fatalf("sibling status count = %v, want 3 (kept)", got)
	}
	if got := restartsOf(reg, status.Id); got != 0 {
		t.Fatalf("sibling restarts = %d", got)
	}
	if got := restartsOf(reg, root.Id); got != 0 {
		t.Fatalf("root restarts = %d", got)
	}
	var info actorkit.ActorInfo
	for _, a := range reg.Snapshot() {
		if a.PID == pleg.Id {
			info = a
		}
	}
	if !strings.Contains(info.LastFailure, "chaos: test") || info.LastFailureAt.IsZero() || info.Kind != KindPLEG || info.Parent != "root" {
		t.Fatalf("snapshot of pleg = %+v", info)
	}
}

// parent spawns one child "pod-1" with the given strategy, counts the
// Terminated of its children (when terminated is set) and keeps a count
// like counter.
type parent struct {
	child      *actor.Props
	terminated *atomic.Int32
	n          int
}

func (p *parent) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		if _, err := c.SpawnNamed(p.child, "pod-1"); err != nil {
			panic(err)
		}
	case *actor.Terminated:
		if p.terminated != nil {
			p.terminated.Add(1)
		}
	case inc:
		p.n++
	case get:
		c.Respond(p.n)
	}
}

// TestPoisonPodIsStoppedNotEscalated: a pod actor that fails more often
// than its budget is stopped; its parent (the node) sees it terminate and
// is not restarted, and nothing above it is either.
func TestPoisonPodIsStoppedNotEscalated(t *testing.T) {
	sys, reg, mws := observed(t, nil)
	strategy := fastStrategy(t, 2)
	var terminated atomic.Int32
	pod := counterProps(mws)
	node := actor.PropsFromProducer(func() actor.Actor { return &parent{child: pod, terminated: &terminated} },
		actor.WithReceiverMiddleware(mws...), actor.WithSupervisor(strategy))
	root, err := SpawnRoot(sys, strategy, mws, []Child{{Name: "node", Props: node}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(sys, root) })
	nodePID, podPID := pidOf(sys, "root/node"), pidOf(sys, "root/node/pod-1")
	actortest.Eventually(t, "pod spawned", func() bool { return reg.Count(KindPod) == 1 })
	sys.Root.Send(nodePID, inc{})

	for i := 1; i <= 2; i++ {
		sys.Root.Send(podPID, chaosMsg)
		actortest.Eventually(t, "pod restarted", func() bool { return restartsOf(reg, podPID.Id) == i })
		ask(t, sys, podPID, get{})
	}
	// Third failure in the window: the pod is stopped, the node sees it
	// terminate and keeps running, with its state.
	sys.Root.Send(podPID, chaosMsg)
	actortest.Eventually(t, "node saw the pod terminate", func() bool { return terminated.Load() == 1 })
	actortest.Eventually(t, "pod gone", func() bool { return reg.Count(KindPod) == 0 })
	if got := ask(t, sys, nodePID, get{}); got != 1 {
		t.Fatalf("node state = %v, want 1: the node was restarted", got)
	}
	if r := restartsOf(reg, nodePID.Id); r != 0 {
		t.Fatalf("node restarts = %d, want 0", r)
	}
	if r := restartsOf(reg, root.Id); r != 0 {
		t.Fatalf("root restarts = %d, want 0", r)
	}
}

// TestSingletonEscalates: a singleton (here pleg) that fails more often
// than its budget escalates to the root, whose guardian restarts it with
// a fresh tree.
func TestSingletonEscalates(t *testing.T) {
	sys, reg, mws := observed(t, nil)
	root, err := SpawnRoot(sys, fastStrategy(t, 2), mws, []Child{{Name: "pleg", Props: counterProps(mws)}, {Name: "status", Props: counterProps(mws)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(sys, root) })
	pleg, status := pidOf(sys, "root/pleg"), pidOf(sys, "root/status")
	sys.Root.Send(status, inc{})
	for i := 1; i <= 2; i++ {
		sys.Root.Send(pleg, chaosMsg)
		actortest.Eventually(t, "pleg restarted", func() bool { return restartsOf(reg, pleg.Id) == i })
		ask(t, sys, pleg, get{})
	}
	sys.Root.Send(pleg, chaosMsg)
	actortest.Eventually(t, "root restarted by escalation", func() bool { return restartsOf(reg, root.Id) == 1 })
	actortest.Eventually(t, "status respawned fresh", func() bool {
		res, err := sys.Root.RequestFuture(status, get{}, time.Second).Result()
		return err == nil && res == 0
	})
}

func TestRootFailingTooOftenIsStopped(t *testing.T) {
	sys, reg, mws := observed(t, nil)
	root, err := SpawnRoot(sys, fastStrategy(t, 1), mws, []Child{{Name: "status", Props: counterProps(mws)}})
	if err != nil {
		t.Fatal(err)
	}
	sys.Root.Send(root, chaosMsg)
	actortest.Eventually(t, "root restarted by its guardian", func() bool { return restartsOf(reg, root.Id) == 1 })
	actortest.Eventually(t, "children respawned", func() bool { return reg.Count(KindStatus) == 1 })
	sys.Root.Send(root, chaosMsg)
	actortest.Eventually(t, "tree stopped", func() bool { return len(reg.Live()) == 0 })
}

func TestRecoverLogsStack(t *testing.T) {
	sys := newSystem(t)
	log, buf := testLogger(t)
	var mu sync.Mutex
	var gotKind string
	var gotReason any
	var gotStack []byte
	rec := Recover(log, func(kind string, reason any, stack []byte) {
		mu.Lock()
		defer mu.Unlock()
		gotKind, gotReason, gotStack = kind, reason, stack
	})
	var starts atomic.Int32
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			starts.Add(1)
		case string:
			explodingHandler()
		}
	}, actor.WithReceiverMiddleware(rec))
	root, err := SpawnRoot(sys, fastStrategy(t, 10), nil, []Child{{Name: "probe-web-liveness", Props: props}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(sys, root) })
	sys.Root.Send(pidOf(sys, "root/probe-web-liveness"), "boom")
	actortest.Eventually(t, "restart after panic", func() bool { return starts.Load() == 2 })
	mu.Lock()
	defer mu.Unlock()
	if gotKind != KindProbe || gotReason != "kaboom" {
		t.Fatalf("onPanic(%q, %v)", gotKind, gotReason)
	}
	if !strings.Contains(string(gotStack), "explodingHandler") {
		t.Fatalf("stack lacks the panicking function:\n%s", gotStack)
	}
	out := buf.String()
	for _, want := range []string{"actor panicked", "kind=probe", "root/probe-web-liveness", "kaboom", "explodingHandler"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

//go:noinline
func explodingHandler() { panic("kaboom") }

func TestChaosMiddleware(t *testing.T) {
	tests := []struct {
		name  string
		msg   any
		crash bool
	}{
		{name: "value", msg: messages.ChaosPanic{}, crash: true},
		{name: "pointer", msg: &messages.ChaosPanic{Reason: "x"}, crash: true},
		{name: "other message", msg: inc{}, crash: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := newSystem(t)
			var seen, starts atomic.Int32
			props := actor.PropsFromFunc(func(c actor.Context) {
				switch c.Message().(type) {
				case *actor.Started:
					starts.Add(1)
				case messages.ChaosPanic, *messages.ChaosPanic, inc:
					seen.Add(1)
				case get:
					c.Respond(int(seen.Load()))
				}
			}, actor.WithReceiverMiddleware(Chaos()))
			root, err := SpawnRoot(sys, fastStrategy(t, 10), nil, []Child{{Name: "pod-a", Props: props}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = Stop(sys, root) })
			pid := pidOf(sys, "root/pod-a")
			sys.Root.Send(pid, tt.msg)
			ask(t, sys, pid, get{})
			if tt.crash {
				actortest.Eventually(t, "restart", func() bool { return starts.Load() == 2 })
				if seen.Load() != 0 {
					t.Fatal("actor saw the chaos message")
				}
			} else if starts.Load() != 1 || seen.Load() != 1 {
				t.Fatalf("starts=%d seen=%d", starts.Load(), seen.Load())
			}
		})
	}
}

func TestRegistryTracksActors(t *testing.T) {
	sys := newSystem(t)
	log, _ := testLogger(t)
	var reg Registry // the zero value works
	mws := Middlewares(&reg, log, nil)
	root, err := SpawnRoot(sys, fastStrategy(t, 10), mws, []Child{
		{Name: "pleg", Props: counterProps(mws)}, {Name: "source-file", Props: counterProps(mws)}, {Name: "source-url", Props: counterProps(mws)},
	})
	if err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, "four actors", func() bool { return len(reg.Live()) == 4 })
	if reg.Count(KindSource) != 2 || reg.Count(KindPLEG) != 1 || reg.Count(KindRoot) != 1 {
		t.Fatalf("counts = %v", reg.Counts())
	}
	if got := reg.Live(KindSource); len(got) != 2 || got[0].Id != "root/source-file" || got[1].Id != "root/source-url" {
		t.Fatalf("Live(source) = %v", got)
	}
	pleg := pidOf(sys, "root/pleg")
	for range 10 {
		sys.Root.Send(pleg, inc{})
	}
	ask(t, sys, pleg, get{})
	// The count of a message is taken once its handler returned, which may
	// be just after the reply to get reached us.
	actortest.Eventually(t, "pleg messages = 12 (Started + 10 inc + get)", func() bool {
		for _, a := range reg.Snapshot() {
			if a.PID == pleg.Id {
				return a.Messages == 12
			}
		}
		return false
	})
	for _, a := range reg.Snapshot() {
		if a.PID == pleg.Id && a.Messages != 12 {
			t.Fatalf("pleg messages = %d, want 12", a.Messages)
		}
	}
	sys.Root.Stop(pleg)
	actortest.Eventually(t, "pleg gone", func() bool { return reg.Count(KindPLEG) == 0 })
	if err := Stop(sys, root); err != nil {
		t.Fatal(err)
	}
	if live := reg.Live(); len(live) != 0 {
		t.Fatalf("live after Stop = %v", live)
	}
}

// stopOrder records the order of Stopped messages.
type stopOrder struct {
	mu  sync.Mutex
	ids []string
}

func (s *stopOrder) mw() actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			next(c, env)
			if _, ok := env.Message.(*actor.Stopped); ok {
				s.mu.Lock()
				s.ids = append(s.ids, c.Self().Id)
				s.mu.Unlock()
			}
		}
	}
}

func TestStopStopsChildrenFirst(t *testing.T) {
	sys := newSystem(t)
	order := &stopOrder{}
	child := actor.PropsFromProducer(func() actor.Actor { return &counter{} }, actor.WithReceiverMiddleware(order.mw()))
	root, err := SpawnRoot(sys, fastStrategy(t, 10), []actor.ReceiverMiddleware{order.mw()},
		[]Child{{Name: "node", Props: child}, {Name: "status", Props: child}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Stop(sys, root); err != nil {
		t.Fatal(err)
	}
	order.mu.Lock()
	defer order.mu.Unlock()
	if len(order.ids) != 3 || order.ids[2] != "root" {
		t.Fatalf("stop order = %v, want children then root", order.ids)
	}
}

func TestSpawnRootRejectsBadChildren(t *testing.T) {
	sys := newSystem(t)
	p := actor.PropsFromProducer(func() actor.Actor { return &counter{} })
	if _, err := SpawnRoot(sys, fastStrategy(t, 1), nil, []Child{{Name: "a", Props: p}, {Name: "a", Props: p}}); err == nil {
		t.Fatal("duplicate names accepted")
	}
	if _, err := SpawnRoot(sys, fastStrategy(t, 1), nil, []Child{{Name: "", Props: p}}); err == nil {
		t.Fatal("empty name accepted")
	}
}

func TestChaosInjectorHitsOnlyChosenKinds(t *testing.T) {
	sys, reg, mws := observed(t, nil)
	log, _ := testLogger(t)
	strategy := NewStrategy(StrategyConfig{MaxRestarts: 1_000_000, Window: time.Hour, BackoffBase: time.Microsecond, BackoffCap: time.Microsecond}, nil, log, nil)
	leaf := counterProps(mws)
	pod := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			for _, n := range []string{"probe-web-liveness", "probe-web-readiness"} {
				if _, err := c.SpawnNamed(leaf, n); err != nil {
					panic(err)
				}
			}
		}
	}, actor.WithReceiverMiddleware(mws...), actor.WithSupervisor(strategy))
	node := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			for _, n := range []string{"pod-a", "pod-b", "pod-c"} {
				if _, err := c.SpawnNamed(pod, n); err != nil {
					panic(err)
				}
			}
		}
	}, actor.WithReceiverMiddleware(mws...), actor.WithSupervisor(strategy))
	root, err := SpawnRoot(sys, strategy, mws, []Child{{Name: "node", Props: node}, {Name: "status", Props: leaf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(sys, root) })
	actortest.Eventually(t, "tree up", func() bool { return reg.Count(KindProbe) == 6 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	StartChaos(ctx, sys, reg, ChaosConfig{Rate: 2000, Seed: 42, Kinds: []string{KindProbe}}, log)
	probeRestarts := func() int {
		n := 0
		for _, a := range reg.Snapshot() {
			if a.Kind == KindProbe {
				n += a.Restarts
			}
		}
		return n
	}
	actortest.Eventually(t, "probes crashed", func() bool { return probeRestarts() >= 30 })
	cancel()
	for _, a := range reg.Snapshot() {
		if a.Kind != KindProbe && (a.Restarts != 0 || a.LastFailure != "") {
			t.Errorf("%s (kind %s) was hit: %+v", a.PID, a.Kind, a)
		}
	}
	if reg.Count(KindPod) != 3 || reg.Count(KindProbe) != 6 {
		t.Fatalf("tree changed shape: %v", reg.Counts())
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct{ id, want string }{
		{"root", KindRoot},
		{"root/node", KindNode},
		{"root/node/pod-1234-abcd", KindPod},
		{"root/node/pod-1234/probe-web-liveness", KindProbe},
		{"root/pleg", KindPLEG},
		{"root/images", KindImage},
		{"root/status", KindStatus},
		{"root/source-file", KindSource},
		{"root/source-push", KindSource},
		{"root/volumes", KindVolume},
		{"root/eviction", KindEviction},
		{"root/devices", KindDevice},
		{"root/widget-7", "widget"},
		{"future$12", "future$12"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if got := KindOf(actor.NewPID("nonhost", tt.id)); got != tt.want {
				t.Fatalf("KindOf(%q) = %q, want %q", tt.id, got, tt.want)
			}
		})
	}
	if KindOf(nil) != "" {
		t.Fatal("KindOf(nil)")
	}
}

func TestParseKinds(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{name: "empty", in: "  ", want: nil},
		{name: "list", in: "pod, probe,POD", want: []string{"pod", "probe"}},
		{name: "all", in: "pod,probe,pleg,image,status,node,source", want: []string{"pod", "probe", "pleg", "image", "status", "node", "source"}},
		{name: "unknown", in: "pod,kernel", wantErr: true},
		{name: "empty entry", in: "pod,,probe", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKinds(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
