package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

var (
	_ Runtime    = (*fakecri.Runtime)(nil)
	_ LogRemover = (*fakeLogs)(nil)
	_ LogRemover = OSLogs{}
)

const logsDir = "/var/log/pods"

// fakeLogs records the logs removed.
type fakeLogs struct {
	mu      sync.Mutex
	removed []string
}

func (f *fakeLogs) RemoveContainerLog(_ context.Context, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, path)
	return nil
}

func (f *fakeLogs) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.removed...)
	sort.Strings(out)
	return out
}

type harness struct {
	t    *testing.T
	sys  *actor.ActorSystem
	pid  *actor.PID
	rt   *fakecri.Runtime
	clk  *testclock.FakeClock
	logs *fakeLogs
	recP *actor.PID

	mu      sync.Mutex
	replies []messages.ContainersReclaimed
}

func newHarness(t *testing.T, rt *fakecri.Runtime, clk *testclock.FakeClock) *harness {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(func() { sys.Shutdown() })
	h := &harness{t: t, sys: sys, rt: rt, clk: clk, logs: &fakeLogs{}}
	h.recP = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.ContainersReclaimed); ok {
			h.mu.Lock()
			h.replies = append(h.replies, *m)
			h.mu.Unlock()
		}
	}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h.pid = sys.Root.Spawn(actor.PropsFromProducer(New(rt, clk, Config{PodLogsDir: logsDir, Logs: h.logs}, log),
		actor.WithReceiverMiddleware(actortest.Barrier())))
	t.Cleanup(func() { sys.Root.Stop(h.pid) })
	return h
}

// reclaim asks for a collection and returns its answer.
func (h *harness) reclaim() messages.ContainersReclaimed {
	h.t.Helper()
	h.mu.Lock()
	n := len(h.replies)
	h.mu.Unlock()
	h.sys.Root.Send(h.pid, &messages.ReclaimContainers{ReplyTo: h.recP})
	var got messages.ContainersReclaimed
	actortest.Eventually(h.t, "ContainersReclaimed", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.replies) > n {
			got = h.replies[n]
			return true
		}
		return false
	})
	return got
}

func (h *harness) known(uids ...types.UID) {
	m := map[types.UID]bool{}
	for _, u := range uids {
		m[u] = true
	}
	h.sys.Root.Send(h.pid, &messages.PodsKnown{UIDs: m})
}

// pod puts a sandbox of pod uid in the runtime.
func addSandbox(rt *fakecri.Runtime, uid types.UID, id string, attempt uint32, ready bool, created int64) {
	state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		state = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	rt.AddSandbox(&runtimeapi.PodSandbox{Id: id, State: state, CreatedAt: created,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + string(uid), Uid: string(uid), Namespace: "ns", Attempt: attempt},
		Labels:   podspec.PodSelector(uid)})
}

// addContainer puts a container of pod uid in the runtime, with a log
// under the pod logs directory.
func addContainer(rt *fakecri.Runtime, uid types.UID, sandbox, name string, attempt uint32, state runtimeapi.ContainerState, created int64) string {
	id := fmt.Sprintf("%s-%s-%d", uid, name, attempt)
	rt.AddContainer(&runtimeapi.Container{Id: id, PodSandboxId: sandbox, State: state, CreatedAt: created,
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Labels:   map[string]string{podspec.LabelPodUID: string(uid), podspec.LabelContainerName: name}})
	rt.UpdateContainer(id, func(st *runtimeapi.ContainerStatus) {
		st.LogPath = filepath.Join(logsDir, "ns_p-"+string(uid)+"_"+string(uid), name, fmt.Sprintf("%d.log", attempt))
	})
	return id
}

func containerIDs(rt *fakecri.Runtime) []string {
	var out []string
	for _, c := range rt.Containers() {
		out = append(out, c.Id)
	}
	sort.Strings(out)
	return out
}

func sandboxIDs(rt *fakecri.Runtime) []string {
	var out []string
	for _, s := range rt.Sandboxes() {
		out = append(out, s.Id)
	}
	sort.Strings(out)
	return out
}

const (
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	created = runtimeapi.ContainerState_CONTAINER_CREATED
)

func TestKeepsTheNewestDeadContainerOfEachContainer(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(10000, 0))
	rt := fakecri.New(clk)
	addSandbox(rt, "u1", "sb1", 0, true, 1)
	for a := uint32(0); a < 3; a++ {
		addContainer(rt, "u1", "sb1", "app", a, exited, int64(a+1))
	}
	addContainer(rt, "u1", "sb1", "app", 3, running, 4)
	addContainer(rt, "u1", "sb1", "side", 0, exited, 1)
	h := newHarness(t, rt, clk)
	h.known("u1")

	r := h.reclaim()
	if r.Err != "" {
		t.Fatalf("reply %+v", r)
	}
	// The first collection, at the start, may have done the work already.
	want := []string{"u1-app-2", "u1-app-3", "u1-side-0"}
	if got := containerIDs(rt); !slices.Equal(got, want) {
		t.Fatalf("containers %v, want %v (the running one and the newest dead one of each container)", got, want)
	}
	wantLogs := []string{logsDir + "/ns_p-u1_u1/app/0.log", logsDir + "/ns_p-u1_u1/app/1.log"}
	if got := h.logs.all(); !slices.Equal(got, wantLogs) {
		t.Fatalf("logs removed %v, want %v", got, wantLogs)
	}
	if got := sandboxIDs(rt); !slices.Equal(got, []string{"sb1"}) {
		t.Fatalf("sandboxes %v", got)
	}

	// The running one exits: now attempt 2 goes, at the next period.
	rt.Exit("u1-app-3", 1)
	clk.Step(time.Minute)
	actortest.Eventually(t, "the periodic collection removes the older dead container", func() bool {
		return slices.Equal(containerIDs(rt), []string{"u1-app-3", "u1-side-0"})
	})
}

func TestNothingOfUnknownPodsBeforeTheFirstPodsKnown(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(10000, 0))
	rt := fakecri.New(clk)
	addSandbox(rt, "u1", "sb1", 0, true, 1)
	addContainer(rt, "u1", "sb1", "app", 0, running, 1)
	addSandbox(rt, "gone", "old", 0, false, 1)
	addSandbox(rt, "gone", "sb2", 1, false, 2)
	addContainer(rt, "gone", "sb2", "app", 0, exited, 2)
	addContainer(rt, "gone", "sb2", "app", 1, exited, 3)
	addContainer(rt, "gone", "sb2", "init", 0, created, 2)
	h := newHarness(t, rt, clk)

	for i := 0; i < 3; i++ {
		if r := h.reclaim(); r.Err != "" {
			t.Fatalf("reply %+v", r)
		}
		clk.Step(time.Minute)
	}
	// Every pod counts as known: only what a known pod loses is gone (the
	// older dead container, the older sandbox).
	if got, want := containerIDs(rt), []string{"gone-app-1", "gone-init-0", "u1-app-0"}; !slices.Equal(got, want) {
		t.Fatalf("containers %v, want %v", got, want)
	}
	if got, want := sandboxIDs(rt), []string{"sb1", "sb2"}; !slices.Equal(got, want) {
		t.Fatalf("sandboxes %v, want %v", got, want)
	}

	h.known("u1")
	r := h.reclaim()
	if r != (messages.ContainersReclaimed{Containers: 2, Sandboxes: 1}) {
		t.Fatalf("reply %+v, want 2 containers and 1 sandbox", r)
	}
	if got, want := containerIDs(rt), []string{"u1-app-0"}; !slices.Equal(got, want) {
		t.Fatalf("containers %v, want %v", got, want)
	}
	if got, want := sandboxIDs(rt), []string{"sb1"}; !slices.Equal(got, want) {
		t.Fatalf("sandboxes %v, want %v", got, want)
	}
	wantLogs := []string{logsDir + "/ns_p-gone_gone/app/0.log", logsDir + "/ns_p-gone_gone/app/1.log", logsDir + "/ns_p-gone_gone/init/0.log"}
	if got := h.logs.all(); !slices.Equal(got, wantLogs) {
		t.Fatalf("logs removed %v, want %v", got, wantLogs)
	}
}

func TestGonePodKeepsWhatRunsAndWhatIsNew(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(10000, 0))
	rt := fakecri.New(clk)
	// A pod no one knows whose sandbox still runs: the NodeActor's orphan
	// killer stops it; the collector takes only what is dead.
	addSandbox(rt, "orphan", "sbo", 0, true, 1)
	addContainer(rt, "orphan", "sbo", "app", 0, running, 1)
	addContainer(rt, "orphan", "sbo", "sidecar", 0, exited, 1)
	h := newHarness(t, rt, clk)
	h.reclaim() // seen
	h.known()

	// A pod started after the NodeActor made its list is not gone yet.
	addSandbox(rt, "new", "sbn", 0, false, 5)
	addContainer(rt, "new", "sbn", "app", 0, exited, 5)
	if r := h.reclaim(); r != (messages.ContainersReclaimed{Containers: 1}) {
		t.Fatalf("reply %+v, want the orphan's dead container", r)
	}
	h.reclaim()
	if got, want := containerIDs(rt), []string{"new-app-0", "orphan-app-0"}; !slices.Equal(got, want) {
		t.Fatalf("containers %v, want %v", got, want)
	}
	h.known() // the next list does not name it either: gone now
	if r := h.reclaim(); r != (messages.ContainersReclaimed{Containers: 1, Sandboxes: 1}) {
		t.Fatalf("reply %+v, want the new pod's container and sandbox", r)
	}
	if got, want := sandboxIDs(rt), []string{"sbo"}; !slices.Equal(got, want) {
		t.Fatalf("sandboxes %v, want %v (ready)", got, want)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		inject  func(rt *fakecri.Runtime)
		want    messages.ContainersReclaimed
		wantErr string
		left    []string
	}{
		{name: "listing fails", inject: func(rt *fakecri.Runtime) {
			rt.InjectAlways("ListContainers", errors.New("runtime down"))
		}, wantErr: "list containers: runtime down", left: []string{"u1-app-0", "u1-app-1", "u1-app-2"}},
		{name: "a removal fails, the others go on", inject: func(rt *fakecri.Runtime) {
			rt.Inject("RemoveContainer", errors.New("device busy"))
		}, want: messages.ContainersReclaimed{Containers: 1}, wantErr: "remove container u1-app-0: device busy",
			left: []string{"u1-app-0", "u1-app-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(time.Unix(10000, 0))
			rt := fakecri.New(clk)
			h := newHarness(t, rt, clk)
			h.reclaim() // after the first collection
			addSandbox(rt, "u1", "sb1", 0, true, 1)
			for a := uint32(0); a < 3; a++ {
				addContainer(rt, "u1", "sb1", "app", a, exited, int64(a+1))
			}
			tt.inject(rt)
			r := h.reclaim()
			if r.Containers != tt.want.Containers || r.Sandboxes != tt.want.Sandboxes || !strings.Contains(r.Err, tt.wantErr) {
				t.Fatalf("reply %+v, want %+v with %q", r, tt.want, tt.wantErr)
			}
			if got := containerIDs(rt); !slices.Equal(got, tt.left) {
				t.Fatalf("containers %v, want %v", got, tt.left)
			}
		})
	}
}

// ctr is a listed container for the planner.
func ctr(uid types.UID, name string, attempt uint32, state runtimeapi.ContainerState, created int64) *runtimeapi.Container {
	return &runtimeapi.Container{Id: fmt.Sprintf("%s-%s-%d", uid, name, attempt), PodSandboxId: "sb-" + string(uid),
		State: state, CreatedAt: created, Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Labels: map[string]string{podspec.LabelPodUID: string(uid), podspec.LabelContainerName: name}}
}

func TestPlanContainers(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixNano() }
	three := []*runtimeapi.Container{
		ctr("u1", "a", 0, exited, at(3*time.Minute)),
		ctr("u1", "a", 1, exited, at(2*time.Minute)),
		ctr("u1", "a", 2, exited, at(time.Minute)),
	}
	tests := []struct {
		name   string
		ctrs   []*runtimeapi.Container
		gone   map[types.UID]bool
		policy Policy
		want   []string // oldest first
	}{
		{name: "default keeps one", ctrs: three, policy: DefaultPolicy(), want: []string{"u1-a-0", "u1-a-1"}},
		{name: "keep two", ctrs: three, policy: Policy{MaxPerPodContainer: 2, MaxContainers: -1}, want: []string{"u1-a-0"}},
		{name: "zero still keeps the newest of a known pod", ctrs: three, policy: Policy{MaxPerPodContainer: 0, MaxContainers: -1},
			want: []string{"u1-a-0", "u1-a-1"}},
		{name: "no limit", ctrs: three, policy: Policy{MaxPerPodContainer: -1, MaxContainers: -1}},
		{name: "gone: all", ctrs: three, gone: map[types.UID]bool{"u1": true}, policy: DefaultPolicy(),
			want: []string{"u1-a-0", "u1-a-1", "u1-a-2"}},
		{name: "minimum age", ctrs: three, policy: Policy{MinAge: 90 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1},
			want: []string{"u1-a-0"}},
		{name: "running and unlabelled are not evictable", policy: DefaultPolicy(), ctrs: []*runtimeapi.Container{
			ctr("u1", "a", 0, exited, at(2*time.Minute)),
			ctr("u1", "a", 1, running, at(time.Minute)),
			{Id: "foreign", State: exited, Metadata: &runtimeapi.ContainerMetadata{Name: "x"}},
			{Id: "foreign2", State: exited, Metadata: &runtimeapi.ContainerMetadata{Name: "x", Attempt: 1}},
		}},
		{name: "attempt before creation time", policy: DefaultPolicy(), ctrs: []*runtimeapi.Container{
			ctr("u1", "a", 1, exited, at(2*time.Minute)),
			ctr("u1", "a", 0, exited, at(time.Minute)),
		}, want: []string{"u1-a-0"}},
		{name: "max containers on the node: the oldest beyond a share", policy: Policy{MaxPerPodContainer: -1, MaxContainers: 2},
			ctrs: append(slices.Clone(three),
				ctr("u2", "b", 0, exited, at(5*time.Minute)),
				ctr("u2", "b", 1, exited, at(4*time.Minute))),
			want: []string{"u2-b-0", "u1-a-0", "u1-a-1"}},
		{name: "max containers never takes a unit's newest", policy: Policy{MaxPerPodContainer: -1, MaxContainers: 0},
			ctrs: append(slices.Clone(three), ctr("u2", "b", 0, exited, at(5*time.Minute))),
			want: []string{"u1-a-0", "u1-a-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range planContainers(tt.ctrs, tt.gone, tt.policy, now) {
				got = append(got, c.id)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("removes %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPlanSandboxes(t *testing.T) {
	sb := func(uid types.UID, id string, attempt uint32, ready bool) *runtimeapi.PodSandbox {
		st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		if ready {
			st = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		return &runtimeapi.PodSandbox{Id: id, State: st, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt},
			Labels: podspec.PodSelector(uid)}
	}
	inSandbox := func(id string) *runtimeapi.Container { return &runtimeapi.Container{Id: "c-" + id, PodSandboxId: id} }
	tests := []struct {
		name    string
		sbs     []*runtimeapi.PodSandbox
		ctrs    []*runtimeapi.Container
		removed map[string]bool
		gone    map[types.UID]bool
		want    []string
	}{
		{name: "known pod keeps its newest", sbs: []*runtimeapi.PodSandbox{sb("u1", "a", 0, false), sb("u1", "b", 1, false), sb("u1", "c", 2, false)},
			want: []string{"a", "b"}},
		{name: "known pod's newest ready, older with containers", sbs: []*runtimeapi.PodSandbox{sb("u1", "a", 0, false), sb("u1", "b", 1, true)},
			ctrs: []*runtimeapi.Container{inSandbox("a")}},
		{name: "containers removed no longer hold it", sbs: []*runtimeapi.PodSandbox{sb("u1", "a", 0, false), sb("u1", "b", 1, true)},
			ctrs: []*runtimeapi.Container{inSandbox("a")}, removed: map[string]bool{"c-a": true}, want: []string{"a"}},
		{name: "gone pod: all not ready and empty", gone: map[types.UID]bool{"u1": true},
			sbs:  []*runtimeapi.PodSandbox{sb("u1", "a", 0, false), sb("u1", "b", 1, false), sb("u1", "c", 2, true), sb("u1", "d", 3, false)},
			ctrs: []*runtimeapi.Container{inSandbox("d")}, want: []string{"a", "b"}},
		{name: "unlabelled never", gone: map[types.UID]bool{"": true},
			sbs: []*runtimeapi.PodSandbox{{Id: "x", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planSandboxes(tt.sbs, tt.ctrs, tt.removed, tt.gone); !slices.Equal(got, tt.want) {
				t.Fatalf("removes %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUnder(t *testing.T) {
	tests := []struct {
		name, path string
		want       bool
	}{
		{name: "inside", path: "/var/log/pods/ns_p_u/c/0.log", want: true},
		{name: "the directory itself", path: "/var/log/pods"},
		{name: "escapes", path: "/var/log/pods/../../../etc/passwd"},
		{name: "sibling prefix", path: "/var/log/podsx/a.log"},
		{name: "relative", path: "ns_p_u/c/0.log"},
		{name: "dotdot name inside", path: "/var/log/pods/..a/0.log", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := under(tt.path, "/var/log/pods"); got != tt.want {
				t.Fatalf("under(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

func TestOSLogsRemovesTheLogAndItsRotations(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"0.log", "0.log.20260101-000000", "0.log.20260101-000000.gz", "1.log", "10.log"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := (OSLogs{}).RemoveContainerLog(context.Background(), filepath.Join(dir, "0.log")); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"1.log", "10.log"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	// Gone already: nothing to do.
	if err := (OSLogs{}).RemoveContainerLog(context.Background(), filepath.Join(dir, "0.log")); err != nil {
		t.Fatal(err)
	}
}

func TestStopAnswersReclaims(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(10000, 0))
	rt := fakecri.New(clk)
	release := rt.Block("ListContainers")
	defer release()
	h := newHarness(t, rt, clk)
	actortest.Eventually(t, "the first collection to list", func() bool { return rt.InFlight("ListContainers") == 1 })
	h.sys.Root.Send(h.pid, &messages.ReclaimContainers{ReplyTo: h.recP})
	actortest.Sync(t, h.sys, h.pid) // a stop overtakes what is queued
	if err := h.sys.Root.StopFuture(h.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, "the reclaim answered", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.replies) == 1 && h.replies[0].Err == "container garbage collector stopped"
	})
}
