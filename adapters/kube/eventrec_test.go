package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var eventsT0 = time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)

func eventPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"}}
}

func newTestEvents(t *testing.T) (*Events, *fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(eventsT0)
	e := newEvents(cs, "node-a", clk, nil)
	t.Cleanup(e.Stop)
	return e, cs, clk
}

// pollEvents lists the Events of ns until done accepts them (or fails at
// the deadline), calling between lists step if any.
func pollEvents(t *testing.T, cs *fake.Clientset, ns, what string, step func(), done func([]v1.Event) bool) []v1.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if done(l.Items) {
			return l.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Events %s in %s: %v", what, ns, l.Items)
		}
		if step != nil {
			step()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listEvents lists the Events of ns once n of them are there.
func listEvents(t *testing.T, cs *fake.Clientset, ns string, n int) []v1.Event {
	t.Helper()
	return pollEvents(t, cs, ns, fmt.Sprintf("(%d of them)", n), nil, func(evs []v1.Event) bool { return len(evs) >= n })
}

// untilEvent waits for an Event of ns that ok accepts.
func untilEvent(t *testing.T, cs *fake.Clientset, ns string, what string, ok func(*v1.Event) bool) v1.Event {
	t.Helper()
	var found v1.Event
	pollEvents(t, cs, ns, what, nil, func(evs []v1.Event) bool {
		for i := range evs {
			if ok(&evs[i]) {
				found = evs[i]
				return true
			}
		}
		return false
	})
	return found
}

func TestEventsAsUpstreamWritesThem(t *testing.T) {
	e, cs, _ := newTestEvents(t)
	pod := eventPod("web-1")
	e.Eventf(pod, v1.EventTypeNormal, "Started", "%s", "Started container app")
	got := listEvents(t, cs, "ns", 1)[0]
	want := v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web-1", UID: pod.UID, ResourceVersion: "7"}
	if got.InvolvedObject != want {
		t.Errorf("involvedObject %+v, want %+v", got.InvolvedObject, want)
	}
	if wantName := fmt.Sprintf("web-1.%x", eventsT0.UnixNano()); got.Name != wantName {
		t.Errorf("name %q, want %q", got.Name, wantName)
	}
	if got.Source != (v1.EventSource{Component: "kubelet", Host: "node-a"}) || got.ReportingController != "kubelet" || got.ReportingInstance != "node-a" {
		t.Errorf("source %+v, reporting %q/%q", got.Source, got.ReportingController, got.ReportingInstance)
	}
	if got.Type != v1.EventTypeNormal || got.Reason != "Started" || got.Message != "Started container app" || got.Count != 1 {
		t.Errorf("type %q reason %q message %q count %d", got.Type, got.Reason, got.Message, got.Count)
	}
	if !got.FirstTimestamp.Time.Equal(eventsT0) || !got.LastTimestamp.Time.Equal(eventsT0) {
		t.Errorf("timestamps %v %v, want %v", got.FirstTimestamp, got.LastTimestamp, eventsT0)
	}

	// A node's event: a reference without a namespace goes to default.
	e.Eventf(&v1.ObjectReference{Kind: "Node", Name: "node-a", UID: "node-a"}, v1.EventTypeNormal, "NodeReady", "Node %s status is now: %s", "node-a", "NodeReady")
	node := listEvents(t, cs, "default", 1)[0]
	if node.InvolvedObject.Kind != "Node" || node.InvolvedObject.Name != "node-a" || node.Message != "Node node-a status is now: NodeReady" {
		t.Errorf("node event %+v %q", node.InvolvedObject, node.Message)
	}
}

func TestEventsRepeatPatchesTheCount(t *testing.T) {
	e, cs, clk := newTestEvents(t)
	pod := eventPod("web-1")
	e.Eventf(pod, v1.EventTypeWarning, "BackOff", "%s", "Back-off restarting failed container app")
	first := listEvents(t, cs, "ns", 1)[0]
	for i := 2; i <= 3; i++ {
		clk.Step(10 * time.Second)
		e.Eventf(pod, v1.EventTypeWarning, "BackOff", "%s", "Back-off restarting failed container app")
		untilEvent(t, cs, "ns", fmt.Sprintf("count %d", i), func(ev *v1.Event) bool { return ev.Count == int32(i) })
	}
	evs := listEvents(t, cs, "ns", 1)
	if len(evs) != 1 {
		t.Fatalf("%d Events, want the one patched: %v", len(evs), evs)
	}
	got := evs[0]
	if got.Name != first.Name || !got.FirstTimestamp.Time.Equal(eventsT0) || !got.LastTimestamp.Time.Equal(eventsT0.Add(20*time.Second)) {
		t.Errorf("patched Event %s first %v last %v; want %s, %v, %v", got.Name, got.FirstTimestamp, got.LastTimestamp, first.Name, eventsT0, eventsT0.Add(20*time.Second))
	}

	// Deleted meanwhile (its TTL): the repeat creates it again, counted on.
	if err := cs.CoreV1().Events("ns").Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventf(pod, v1.EventTypeWarning, "BackOff", "%s", "Back-off restarting failed container app")
	again := untilEvent(t, cs, "ns", "created again", func(ev *v1.Event) bool { return ev.Count == 4 })
	if again.Name != first.Name {
		t.Errorf("created again as %s, want %s", again.Name, first.Name)
	}
}

func TestEventsSimilarMessagesCombined(t *testing.T) {
	e, cs, clk := newTestEvents(t)
	pod := eventPod("web-1")
	for i := 1; i <= 9; i++ {
		e.Eventf(pod, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: attempt %d", i)
		clk.Step(time.Second)
	}
	listEvents(t, cs, "ns", 9)
	e.Eventf(pod, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: attempt %d", 10)
	combined := untilEvent(t, cs, "ns", "combined", func(ev *v1.Event) bool {
		return ev.Message == "(combined from similar events): Readiness probe failed: attempt 10"
	})
	clk.Step(time.Second)
	e.Eventf(pod, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: attempt %d", 11)
	got := untilEvent(t, cs, "ns", "combined count 2", func(ev *v1.Event) bool { return ev.Name == combined.Name && ev.Count == 2 })
	if got.Message != "(combined from similar events): Readiness probe failed: attempt 11" {
		t.Errorf("combined message %q", got.Message)
	}
	if n := len(listEvents(t, cs, "ns", 10)); n != 10 {
		t.Errorf("%d Events, want 9 and the combined one", n)
	}

	// Ten minutes later the messages are new again.
	clk.Step(eventSimilarWindow + time.Second)
	e.Eventf(pod, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: attempt %d", 12)
	untilEvent(t, cs, "ns", "a plain one after the window", func(ev *v1.Event) bool { return ev.Message == "Readiness probe failed: attempt 12" })
}

func TestEventsSpamFilter(t *testing.T) {
	e, cs, clk := newTestEvents(t)
	pod := eventPod("web-1")
	for i := range eventSpamBurst + 5 {
		e.Eventf(pod, v1.EventTypeNormal, fmt.Sprintf("Reason%d", i), "%s", "m")
	}
	// Another object's events go through: the filter is per object.
	other := eventPod("web-2")
	e.Eventf(other, v1.EventTypeNormal, "Started", "%s", "m")
	untilEvent(t, cs, "ns", "web-2's", func(ev *v1.Event) bool { return ev.InvolvedObject.Name == "web-2" })
	// One shard or two: web-1's are all handled once its Warning (after
	// them, in its own shard) is.
	e.Eventf(pod, v1.EventTypeWarning, "Failed", "%s", "w")
	untilEvent(t, cs, "ns", "web-1's warning (its own bucket)", func(ev *v1.Event) bool { return ev.Type == v1.EventTypeWarning })
	if n := countFor(t, cs, "web-1", v1.EventTypeNormal); n != eventSpamBurst {
		t.Fatalf("%d Normal Events of web-1, want the burst of %d", n, eventSpamBurst)
	}
	clk.Step(301 * time.Second) // one token more
	e.Eventf(pod, v1.EventTypeNormal, "Later", "%s", "m")
	untilEvent(t, cs, "ns", "one more after 5 min", func(ev *v1.Event) bool { return ev.Reason == "Later" })
}

func countFor(t *testing.T, cs *fake.Clientset, name, typ string) int {
	t.Helper()
	n := 0
	for _, ev := range listEvents(t, cs, "ns", 0) {
		if ev.InvolvedObject.Name == name && ev.Type == typ {
			n++
		}
	}
	return n
}

func TestEventsForgetStartsAnew(t *testing.T) {
	e, cs, clk := newTestEvents(t)
	pod := eventPod("web-1")
	e.Eventf(pod, v1.EventTypeNormal, "Killing", "%s", "Stopping container app")
	e.Forget(pod.UID)
	clk.Step(time.Second)
	// The same event after the Forget is not a repeat: a second Event, not
	// a count of 2.
	e.Eventf(pod, v1.EventTypeNormal, "Killing", "%s", "Stopping container app")
	for _, ev := range listEvents(t, cs, "ns", 2) {
		if ev.Count != 1 {
			t.Errorf("Event %s count %d, want 1", ev.Name, ev.Count)
		}
	}
}

func TestEventsWriteErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		fails     int32 // how many creates of the event fail
		wantTries int32
		written   bool
	}{
		{name: "refused (forbidden): dropped at once", err: apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", errors.New("no")),
			fails: 100, wantTries: 1},
		{name: "invalid: dropped at once", err: apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x", nil),
			fails: 100, wantTries: 1},
		{name: "namespace terminating: dropped at once", err: &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}}}},
			fails: 100, wantTries: 1},
		{name: "not answered: tried again until written", err: errors.New("dial tcp: connection refused"),
			fails: 2, wantTries: 3, written: true},
		{name: "unavailable: tried again until written", err: apierrors.NewServiceUnavailable("etcd"),
			fails: 1, wantTries: 2, written: true},
		{name: "never answered: 12 tries", err: errors.New("dial tcp: connection refused"),
			fails: 100, wantTries: eventTries},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, cs, clk := newTestEvents(t)
			var tries atomic.Int32
			cs.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
				ev := a.(k8stesting.CreateAction).GetObject().(*v1.Event)
				if ev.Reason == "Pulled" && tries.Add(1) <= tc.fails {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			pod := eventPod("web-1")
			e.Eventf(pod, v1.EventTypeNormal, "Pulled", "%s", "m")
			// The pod's next event is written after the first is done with
			// (one shard, in order); step the clock through the retries.
			e.Eventf(pod, v1.EventTypeNormal, "Next", "%s", "m")
			evs := pollEvents(t, cs, "ns", "Next", func() {
				if clk.HasWaiters() {
					clk.Step(eventRetryEvery)
				}
			}, func(evs []v1.Event) bool {
				return slices.ContainsFunc(evs, func(ev v1.Event) bool { return ev.Reason == "Next" })
			})
			if written := slices.ContainsFunc(evs, func(ev v1.Event) bool { return ev.Reason == "Pulled" }); written != tc.written {
				t.Errorf("written %v, want %v", written, tc.written)
			}
			if got := tries.Load(); got != tc.wantTries {
				t.Errorf("%d tries, want %d", got, tc.wantTries)
			}
		})
	}
}

func TestEventsFullQueueDropsWithoutBlocking(t *testing.T) {
	e, cs, _ := newTestEvents(t)
	release := make(chan struct{})
	defer close(release)
	cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	pod := eventPod("web-1")
	done := make(chan struct{})
	go func() {
		for i := range eventQueue + 50 {
			e.Eventf(pod, v1.EventTypeNormal, "R", "m %d", i)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Eventf blocked on a full queue")
	}
	if e.Dropped() == 0 {
		t.Error("no event counted as dropped")
	}
}

func TestEventsUnsupportedType(t *testing.T) {
	e, cs, _ := newTestEvents(t)
	pod := eventPod("web-1")
	e.Eventf(pod, "Info", "Odd", "%s", "m")
	e.Eventf(pod, v1.EventTypeNormal, "Next", "%s", "m")
	evs := listEvents(t, cs, "ns", 1)
	if len(evs) != 1 || evs[0].Reason != "Next" {
		t.Errorf("Events %v, want only Next", evs)
	}
}

// The correlator alone: what it remembers, and what it forgets.
func TestEventCorrelatorMemory(t *testing.T) {
	c := newEventCorrelator()
	src := v1.EventSource{Component: "kubelet", Host: "n"}
	item := func(uid, reason, msg string, at time.Time) *eventItem {
		return &eventItem{ref: v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p-" + uid, UID: types.UID("u" + uid)}, typ: v1.EventTypeNormal, reason: reason, message: msg, at: at}
	}
	for i := range 1000 {
		for _, r := range []string{"Pulled", "Created", "Started"} {
			c.correlate(item(fmt.Sprint(i), r, r+" app", eventsT0), src)
		}
	}
	if len(c.objs) != 1000 {
		t.Fatalf("%d objects, want 1000", len(c.objs))
	}
	// A pod with more distinct events than eventSeenMax keeps the most
	// recent ones.
	for i := range eventSeenMax + 10 {
		c.correlate(item("0", fmt.Sprintf("R%d", i), "m", eventsT0.Add(time.Duration(i)*time.Second)), src)
	}
	if n := len(c.objs["u0"].seen); n != eventSeenMax {
		t.Errorf("%d events remembered for one pod, want %d", n, eventSeenMax)
	}
	full := reflect.ValueOf(c.objs).UnsafePointer()
	for i := 1; i < 1000; i++ {
		c.forget("u" + fmt.Sprint(i))
	}
	if len(c.objs) != 1 || reflect.ValueOf(c.objs).UnsafePointer() == full {
		t.Errorf("after forgetting 999: %d objects; want 1, and the map made again", len(c.objs))
	}
	c.sweep(eventsT0.Add(eventIdleForget - time.Minute))
	if len(c.objs) != 1 {
		t.Error("swept an object within the hour")
	}
	c.sweep(eventsT0.Add(eventIdleForget + 2*time.Minute))
	if len(c.objs) != 0 {
		t.Error("an object idle for over an hour is kept")
	}
}
