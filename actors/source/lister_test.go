package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

type listResult struct {
	pods []*v1.Pod
	errs []error
}

// fakeLister returns scripted results, one per call; the last repeats.
type fakeLister struct {
	mu      sync.Mutex
	results []listResult
	calls   int
	seen    int // bumps the config.seen annotation on every call
}

var _ Lister = (*fakeLister)(nil)

func (f *fakeLister) List(ctx context.Context) ([]*v1.Pod, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.calls
	if i >= len(f.results) {
		i = len(f.results) - 1
	}
	f.calls++
	f.seen++
	r := f.results[i]
	pods := make([]*v1.Pod, len(r.pods))
	for j, p := range r.pods {
		pods[j] = p.DeepCopy()
		pods[j].Annotations[seenAnnotation] = fmt.Sprintf("t%d", f.seen)
	}
	return pods, r.errs
}

func (f *fakeLister) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestPoller(t *testing.T) {
	a, b, c := pod("a", "uid-a"), pod("b", "uid-b"), pod("c", "uid-c")
	a2 := a.DeepCopy()
	a2.Spec.Containers[0].Image = "busybox:2"
	badFile := errors.New("/m/a.yaml: spec.containers[0].image: Required value")
	down := errdefs.Wrap(errdefs.ErrUnavailable, errors.New("manifest url: status 503"))
	missing := errdefs.Wrap(errdefs.ErrNotFound, errors.New("manifest dir /m: no such file"))

	tests := []struct {
		name    string
		source  string
		results []listResult
		want    []string // names of each SET sent, in order, after len(results) listings
	}{
		{name: "first set even when empty", source: messages.SourceFile,
			results: []listResult{{}}, want: []string{""}},
		{name: "first set when the dir is missing", source: messages.SourceFile,
			results: []listResult{{errs: []error{missing}}}, want: []string{""}},
		{name: "set only on change", source: messages.SourceFile,
			results: []listResult{{pods: []*v1.Pod{a}}, {pods: []*v1.Pod{a}}, {pods: []*v1.Pod{b, a}}, {pods: []*v1.Pod{a, b}}},
			want:    []string{"a", "a,b"}},
		{name: "changed spec with the same uid is a change", source: messages.SourceFile,
			results: []listResult{{pods: []*v1.Pod{a}}, {pods: []*v1.Pod{a2}}},
			want:    []string{"a", "a"}},
		{name: "a bad file drops only its pod", source: messages.SourceFile,
			results: []listResult{{pods: []*v1.Pod{a, b, c}}, {pods: []*v1.Pod{b, c}, errs: []error{badFile}}},
			want:    []string{"a,b,c", "b,c"}},
		{name: "unavailable keeps the previous set", source: messages.SourceURL,
			results: []listResult{{pods: []*v1.Pod{a, b}}, {errs: []error{down}}, {pods: []*v1.Pod{a, b}}},
			want:    []string{"a,b"}},
		{name: "unavailable at first sends nothing until it works", source: messages.SourceURL,
			results: []listResult{{errs: []error{down}}, {errs: []error{down}}, {pods: []*v1.Pod{c}}},
			want:    []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys, rec, node := newSystem(t)
			clk := testclock.NewFakeClock(time.Unix(1000, 0))
			lister := &fakeLister{results: tt.results}
			const every = 20 * time.Second
			newFn := NewFile
			if tt.source == messages.SourceURL {
				newFn = NewURL
			}
			pid := sys.Root.Spawn(actor.PropsFromProducer(newFn(node, lister, every, clk, quietLog())))
			defer sys.Root.Stop(pid)

			for i := range tt.results {
				if i > 0 {
					clk.Step(every)
				}
				// The next timer is armed once the listing's result is handled.
				actortest.Eventually(t, fmt.Sprintf("listing %d handled", i+1), func() bool {
					return lister.callCount() == i+1 && clk.HasWaiters()
				})
			}
			var got []string
			for _, u := range rec.updates() {
				if u.Source != tt.source || u.Op != messages.OpSet {
					t.Errorf("update %s %s, want %s SET", u.Source, u.Op, tt.source)
				}
				got = append(got, names(u.Pods))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("sets = %q, want %q (%s)", got, tt.want, describe(rec.snapshot()))
			}
		})
	}
}

func TestPollerKeepsFirstSeen(t *testing.T) {
	sys, rec, node := newSystem(t)
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	a, b := pod("a", "uid-a"), pod("b", "uid-b")
	lister := &fakeLister{results: []listResult{{pods: []*v1.Pod{a}}, {pods: []*v1.Pod{a, b}}}}
	pid := sys.Root.Spawn(actor.PropsFromProducer(NewFile(node, lister, time.Second, clk, quietLog())))
	defer sys.Root.Stop(pid)
	actortest.Eventually(t, "first set", func() bool { return len(rec.updates()) == 1 && clk.HasWaiters() })
	clk.Step(time.Second)
	actortest.Eventually(t, "second set", func() bool { return len(rec.updates()) == 2 })
	u := rec.updates()
	first := u[0].Pods[0].Annotations[seenAnnotation]
	if first != "t1" {
		t.Fatalf("first seen = %q", first)
	}
	for _, p := range u[1].Pods {
		want := map[string]string{"a": "t1", "b": "t2"}[p.Name]
		if got := p.Annotations[seenAnnotation]; got != want {
			t.Errorf("pod %s seen = %q, want %q", p.Name, got, want)
		}
	}
}

// blockingLister blocks until released, to test stale results.
type blockingLister struct {
	release chan struct{}
	mu      sync.Mutex
	calls   int
	pods    []*v1.Pod
}

var _ Lister = (*blockingLister)(nil)

func (b *blockingLister) List(ctx context.Context) ([]*v1.Pod, []error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return b.pods, nil
}

func TestPollerStoppedIgnoresLateResult(t *testing.T) {
	sys, rec, node := newSystem(t)
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	bl := &blockingLister{release: make(chan struct{}), pods: []*v1.Pod{pod("a", "uid-a")}}
	pid := sys.Root.Spawn(actor.PropsFromProducer(NewFile(node, bl, time.Second, clk, quietLog())))
	actortest.Eventually(t, "listing started", func() bool { bl.mu.Lock(); defer bl.mu.Unlock(); return bl.calls == 1 })
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	close(bl.release)
	// The stopped actor must neither send nor arm a timer.
	if u := rec.updates(); len(u) != 0 || clk.HasWaiters() {
		t.Fatalf("updates after stop: %s waiters=%v", describe(rec.snapshot()), clk.HasWaiters())
	}
}
