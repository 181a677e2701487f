package fakecri

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	labelUID = "io.kubernetes.pod.uid"
	running  = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited   = runtimeapi.ContainerState_CONTAINER_EXITED
	created  = runtimeapi.ContainerState_CONTAINER_CREATED
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

func ctx() context.Context { return context.Background() }

func sandboxConfig(uid string, attempt uint32) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: uid, Attempt: attempt},
		Labels:       map[string]string{labelUID: uid},
		LogDirectory: "/var/log/pods/default_web_" + uid,
	}
}

func containerConfig(uid, name string, attempt uint32) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1"},
		Labels:   map[string]string{labelUID: uid, labelContainerName: name},
		LogPath:  name + "/0.log",
	}
}

// pod runs a sandbox for uid with running containers of the given names.
func pod(t *testing.T, r *Runtime, uid string, names ...string) (string, []string) {
	t.Helper()
	sbCfg := sandboxConfig(uid, 0)
	sb, err := r.RunPodSandbox(ctx(), sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range names {
		id, err := r.CreateContainer(ctx(), sb, containerConfig(uid, n, 0), sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.StartContainer(ctx(), id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return sb, ids
}

func TestLifecycle(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := New(clk)
	sbCfg := sandboxConfig("u1", 0)
	sb, err := r.RunPodSandbox(ctx(), sbCfg, "runc")
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.CreateContainer(ctx(), sb, containerConfig("u1", "app", 0), sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := r.ContainerStatus(ctx(), id)
	if st.State != created || st.CreatedAt != t0.UnixNano() || st.LogPath != "/var/log/pods/default_web_u1/app/0.log" || st.ImageRef != "sha256:busybox:1" {
		t.Fatalf("created: %v", st)
	}
	clk.Step(time.Second)
	if err := r.StartContainer(ctx(), id); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := r.StopContainer(ctx(), id, 30); err != nil {
		t.Fatal(err)
	}
	st, _ = r.ContainerStatus(ctx(), id)
	if st.State != exited || st.ExitCode != 137 || st.Reason != "Error" ||
		st.StartedAt != t0.Add(time.Second).UnixNano() || st.FinishedAt != t0.Add(2*time.Second).UnixNano() {
		t.Fatalf("stopped: %v", st)
	}
	if got, want := r.Stops(), []StopCall{{ContainerID: id, Name: "app", Timeout: 30, Stopped: true}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("stops %+v, want %+v", got, want)
	}
	sst, _ := r.PodSandboxStatus(ctx(), sb)
	if sst.State != ready || sst.RuntimeHandler != "runc" || sst.GetNetwork().GetIp() == "" || sst.Metadata.Uid != "u1" {
		t.Fatalf("sandbox: %v", sst)
	}
	if err := r.RemovePodSandbox(ctx(), sb); err != nil {
		t.Fatal(err)
	}
	if len(r.Sandboxes()) != 0 || len(r.Containers()) != 0 {
		t.Fatalf("left after RemovePodSandbox: %v %v", r.Sandboxes(), r.Containers())
	}
	want := []string{"RunPodSandbox", "CreateContainer", "ContainerStatus", "StartContainer", "StopContainer",
		"ContainerStatus", "PodSandboxStatus", "RemovePodSandbox"}
	if got := r.Calls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if r.Count("ContainerStatus") != 2 || r.Count("ListContainers") != 0 {
		t.Fatalf("counts %d %d", r.Count("ContainerStatus"), r.Count("ListContainers"))
	}
}

func TestErrorClasses(t *testing.T) {
	is := func(class error) func(error) bool { return func(err error) bool { return errors.Is(err, class) } }
	tests := []struct {
		name string
		call func(r *Runtime, sb, ctr string) error
		want func(error) bool
	}{
		{name: "status of a missing container", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			_, err := r.ContainerStatus(ctx(), "nope")
			return err
		}},
		{name: "status of a missing sandbox", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			_, err := r.PodSandboxStatus(ctx(), "nope")
			return err
		}},
		{name: "stop a missing container", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			return r.StopContainer(ctx(), "nope", 0)
		}},
		{name: "stop a missing sandbox", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			return r.StopPodSandbox(ctx(), "nope")
		}},
		{name: "start a missing container", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			return r.StartContainer(ctx(), "nope")
		}},
		{name: "create in a missing sandbox", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			_, err := r.CreateContainer(ctx(), "nope", containerConfig("u1", "x", 0), nil)
			return err
		}},
		{name: "start a running container", want: is(errdefs.ErrFailedPrecondition), call: func(r *Runtime, _, ctr string) error {
			return r.StartContainer(ctx(), ctr)
		}},
		{name: "sandbox name reserved", want: errdefs.IsAlreadyExists, call: func(r *Runtime, _, _ string) error {
			_, err := r.RunPodSandbox(ctx(), sandboxConfig("u1", 0), "")
			return err
		}},
		{name: "container name reserved", want: errdefs.IsAlreadyExists, call: func(r *Runtime, sb, _ string) error {
			_, err := r.CreateContainer(ctx(), sb, containerConfig("u1", "app", 0), nil)
			return err
		}},
		{name: "no metadata", want: is(errdefs.ErrInvalidArgument), call: func(r *Runtime, _, _ string) error {
			_, err := r.RunPodSandbox(ctx(), &runtimeapi.PodSandboxConfig{}, "")
			return err
		}},
		{name: "exec in a missing container", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			_, _, _, err := r.ExecSync(ctx(), "nope", []string{"true"}, 0)
			return err
		}},
		{name: "exec in an exited container", want: is(errdefs.ErrFailedPrecondition), call: func(r *Runtime, _, ctr string) error {
			r.Exit(ctr, 0)
			_, _, _, err := r.ExecSync(ctx(), ctr, []string{"true"}, 0)
			return err
		}},
		{name: "attach to a missing container", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			_, err := r.Attach(ctx(), &runtimeapi.AttachRequest{ContainerId: "nope"})
			return err
		}},
		{name: "port forward to a missing sandbox", want: errdefs.IsNotFound, call: func(r *Runtime, _, _ string) error {
			_, err := r.PortForward(ctx(), "nope", []int32{80})
			return err
		}},
		{name: "next attempt is not reserved", want: func(err error) bool { return err == nil }, call: func(r *Runtime, sb, _ string) error {
			_, err := r.CreateContainer(ctx(), sb, containerConfig("u1", "app", 1), nil)
			return err
		}},
		{name: "remove missing objects succeeds", want: func(err error) bool { return err == nil }, call: func(r *Runtime, _, _ string) error {
			return errors.Join(r.RemoveContainer(ctx(), "nope"), r.RemovePodSandbox(ctx(), "nope"), r.RemoveImage(ctx(), "nope"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(clocktesting.NewFakeClock(t0))
			sb, ids := pod(t, r, "u1", "app")
			if err := tt.call(r, sb, ids[0]); !tt.want(err) {
				t.Fatalf("error %v is not of the expected class", err)
			}
		})
	}
}

func TestStopPodSandboxKillsItsContainers(t *testing.T) {
	r := New(clocktesting.NewFakeClock(t0))
	sb, ids := pod(t, r, "u1", "a", "b")
	other, otherIDs := pod(t, r, "u2", "a")
	if err := r.StopPodSandbox(ctx(), sb); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Containers() {
		want := running
		if c.Id == ids[0] || c.Id == ids[1] {
			want = exited
		}
		if c.State != want || (want == exited && c.ExitCode != 137) {
			t.Errorf("container %s: %s %d, want %s", c.Id, c.State, c.ExitCode, want)
		}
	}
	for _, s := range r.Sandboxes() {
		if want := map[string]runtimeapi.PodSandboxState{sb: notReady, other: ready}[s.Id]; s.State != want {
			t.Errorf("sandbox %s: %s, want %s", s.Id, s.State, want)
		}
	}
	if r.SandboxOf(otherIDs[0]) != other || r.SandboxOf("nope") != "" {
		t.Fatalf("SandboxOf")
	}
}

func TestListFilters(t *testing.T) {
	r := New(clocktesting.NewFakeClock(t0))
	sb1, ids1 := pod(t, r, "u1", "a", "b")
	sb2, ids2 := pod(t, r, "u2", "a")
	r.Exit(ids1[1], 1)
	if err := r.StopPodSandbox(ctx(), sb2); err != nil {
		t.Fatal(err)
	}
	ctrTests := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{name: "nil filter lists all, oldest first", want: []string{ids1[0], ids1[1], ids2[0]}},
		{name: "by label", filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelUID: "u1"}}, want: ids1},
		{name: "by two labels", filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelUID: "u1", labelContainerName: "b"}}, want: ids1[1:]},
		{name: "by state", filter: &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: running}}, want: ids1[:1]},
		{name: "by sandbox", filter: &runtimeapi.ContainerFilter{PodSandboxId: sb2}, want: ids2},
		{name: "by id", filter: &runtimeapi.ContainerFilter{Id: ids1[1]}, want: ids1[1:]},
		{name: "no match", filter: &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelUID: "u9"}}},
	}
	for _, tt := range ctrTests {
		t.Run("containers "+tt.name, func(t *testing.T) {
			cs, err := r.ListContainers(ctx(), tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.PodSandboxId != r.SandboxOf(c.Id) || c.Metadata.GetName() == "" || c.ImageRef == "" {
					t.Errorf("item %v", c)
				}
			}
			if got := idsOf(cs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	sbTests := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{name: "nil filter lists all", want: []string{sb1, sb2}},
		{name: "by label", filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelUID: "u2"}}, want: []string{sb2}},
		{name: "by state", filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: ready}}, want: []string{sb1}},
		{name: "by id", filter: &runtimeapi.PodSandboxFilter{Id: sb2}, want: []string{sb2}},
	}
	for _, tt := range sbTests {
		t.Run("sandboxes "+tt.name, func(t *testing.T) {
			sbs, err := r.ListPodSandbox(ctx(), tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if got := idsOf(sbs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// idsOf is the IDs of items, in order (nil for none).
func idsOf[T interface{ GetId() string }](items []T) []string {
	var ids []string
	for _, x := range items {
		ids = append(ids, x.GetId())
	}
	return ids
}

func TestCopiesAreIndependent(t *testing.T) {
	r := New(clocktesting.NewFakeClock(t0))
	_, ids := pod(t, r, "u1", "app")
	cs, _ := r.ListContainers(ctx(), nil)
	cs[0].Labels[labelUID] = "changed"
	cs[0].Metadata.Name = "changed"
	st, _ := r.ContainerStatus(ctx(), ids[0])
	st.State = exited
	r.Containers()[0].Labels["x"] = "y"
	got := r.Containers()[0]
	if got.Labels[labelUID] != "u1" || got.Metadata.Name != "app" || got.State != running || got.Labels["x"] != "" {
		t.Fatalf("the runtime's container changed through a copy: %v", got)
	}
	in := &runtimeapi.Container{Id: "x", Labels: map[string]string{"a": "1"}}
	r.AddContainer(in)
	in.Labels["a"] = "2"
	if st, _ := r.ContainerStatus(ctx(), "x"); st.Labels["a"] != "1" {
		t.Fatalf("AddContainer kept the caller's object: %v", st.Labels)
	}
}

func TestScriptedState(t *testing.T) {
	r := New(clocktesting.NewFakeClock(t0))
	r.AddSandbox(&runtimeapi.PodSandbox{Id: "s1", State: ready, Labels: map[string]string{labelUID: "u1"}})
	gen := r.AddContainer(&runtimeapi.Container{PodSandboxId: "s1", State: running, Labels: map[string]string{labelContainerName: "app"}})
	r.AddContainer(&runtimeapi.Container{Id: "c-old", PodSandboxId: "s1", State: exited})
	if gen == "" || gen == "c-old" {
		t.Fatalf("generated id %q", gen)
	}
	if !r.ExitNamed("app", 2) || r.ExitNamed("app", 2) || r.Exit("c-old", 1) || r.Exit("nope", 1) {
		t.Fatal("Exit / ExitNamed of running containers only")
	}
	if !r.UpdateContainer(gen, func(c *runtimeapi.ContainerStatus) { c.Reason = "OOMKilled" }) || r.UpdateContainer("nope", func(*runtimeapi.ContainerStatus) {}) {
		t.Fatal("UpdateContainer")
	}
	st, _ := r.ContainerStatus(ctx(), gen)
	if st.State != exited || st.ExitCode != 2 || st.Reason != "OOMKilled" {
		t.Fatalf("status %v", st)
	}

	r.Replace([]*runtimeapi.PodSandbox{{Id: "s9", State: notReady}},
		[]*runtimeapi.Container{{Id: "z", State: running}, {Id: "a", State: created}})
	cs, _ := r.ListContainers(ctx(), nil)
	sbs, _ := r.ListPodSandbox(ctx(), nil)
	if len(cs) != 2 || cs[0].Id != "z" || cs[1].Id != "a" || len(sbs) != 1 || sbs[0].Id != "s9" {
		t.Fatalf("after Replace: %v %v", cs, sbs)
	}
	// Replacing an object keeps its place in the listing.
	r.AddContainer(&runtimeapi.Container{Id: "z", State: exited})
	if cs, _ := r.ListContainers(ctx(), nil); cs[0].Id != "z" || cs[0].State != exited {
		t.Fatalf("after AddContainer of an existing ID: %v", cs)
	}
}

func TestInject(t *testing.T) {
	errA, errB, errC := errors.New("a"), errors.New("b"), errors.New("c")
	tests := []struct {
		name   string
		setup  func(r *Runtime)
		want   []error // results of successive ListContainers calls
		others bool    // other methods fail too
	}{
		{name: "nothing injected", setup: func(*Runtime) {}, want: []error{nil, nil}},
		{name: "one shot", setup: func(r *Runtime) { r.Inject("ListContainers", errA) }, want: []error{errA, nil}},
		{name: "queue in order", setup: func(r *Runtime) { r.Inject("ListContainers", errA, errB) }, want: []error{errA, errB, nil}},
		{name: "a nil slot succeeds once", setup: func(r *Runtime) { r.Inject("ListContainers", nil, errA) }, want: []error{nil, errA, nil}},
		{name: "always", setup: func(r *Runtime) { r.InjectAlways("ListContainers", errC) }, want: []error{errC, errC, errC}},
		{name: "one shot before always", setup: func(r *Runtime) {
			r.InjectAlways("ListContainers", errC)
			r.Inject("ListContainers", errA)
		}, want: []error{errA, errC}},
		{name: "always cleared", setup: func(r *Runtime) {
			r.InjectAlways("ListContainers", errC)
			r.InjectAlways("ListContainers", nil)
		}, want: []error{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(nil)
			tt.setup(r)
			for i, want := range tt.want {
				if _, err := r.ListContainers(ctx(), nil); err != want {
					t.Fatalf("call %d: %v, want %v", i, err, want)
				}
			}
			if _, err := r.ListPodSandbox(ctx(), nil); err != nil {
				t.Fatalf("another method failed: %v", err)
			}
			if r.Count("ListContainers") != len(tt.want) {
				t.Fatalf("count %d", r.Count("ListContainers"))
			}
		})
	}
}

func TestUnknownMethodPanics(t *testing.T) {
	tests := []struct {
		name string
		call func(r *Runtime)
	}{
		{name: "Inject", call: func(r *Runtime) { r.Inject("ListContainer", errors.New("x")) }},
		{name: "InjectAlways", call: func(r *Runtime) { r.InjectAlways("listContainers", errors.New("x")) }},
		{name: "Block", call: func(r *Runtime) { r.Block("Pull") }},
		{name: "Count", call: func(r *Runtime) { r.Count("Status") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tt.call(New(nil))
		})
	}
}

func TestBlock(t *testing.T) {
	r := New(nil)
	release := r.Block("PullImage")
	done := make(chan error, 2)
	for _, ref := range []string{"a:1", "b:1"} {
		go func() {
			_, err := r.PullImage(ctx(), ref, nil)
			done <- err
		}()
	}
	actortest.Eventually(t, "two pulls held", func() bool { return r.InFlight("PullImage") == 2 })
	if img, _ := r.ImageStatus(ctx(), "a:1"); img != nil {
		t.Fatal("a held pull made the image present")
	}
	release()
	release() // idempotent
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if r.InFlight("PullImage") != 0 || r.MaxInFlight("PullImage") != 2 || r.Count("PullImage") != 2 {
		t.Fatalf("in flight %d, max %d, count %d", r.InFlight("PullImage"), r.MaxInFlight("PullImage"), r.Count("PullImage"))
	}
	if _, err := r.PullImage(ctx(), "c:1", nil); err != nil {
		t.Fatalf("a pull after release: %v", err)
	}
}

func TestBlockedCallEndsWithItsContext(t *testing.T) {
	tests := []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		class error
		cause error
	}{
		{name: "deadline", ctx: func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx(), time.Millisecond) },
			class: errdefs.ErrDeadlineExceeded, cause: context.DeadlineExceeded},
		{name: "cancel", ctx: func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx())
			cancel()
			return c, cancel
		}, class: errdefs.ErrUnknown, cause: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(nil)
			release := r.Block("ListPodSandbox")
			defer release()
			c, cancel := tt.ctx()
			defer cancel()
			_, err := r.ListPodSandbox(c, nil)
			if !errors.Is(err, tt.class) || !errors.Is(err, tt.cause) {
				t.Fatalf("error %v, want class %v and cause %v", err, tt.class, tt.cause)
			}
			if r.InFlight("ListPodSandbox") != 0 {
				t.Fatal("still in flight")
			}
		})
	}
}

func TestExecSync(t *testing.T) {
	tests := []struct {
		name  string
		key   func(id string) string
		codes []int32
		want  []int32
	}{
		{name: "default exits 0", key: func(string) string { return "other" }, codes: []int32{1}, want: []int32{0, 0}},
		{name: "by name, last code repeats", key: func(string) string { return "app" }, codes: []int32{1, 2}, want: []int32{1, 2, 2}},
		{name: "by id", key: func(id string) string { return id }, codes: []int32{3}, want: []int32{3, 3}},
		{name: "cleared", key: func(string) string { return "app" }, want: []int32{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			r := New(clk)
			_, ids := pod(t, r, "u1", "app")
			if len(tt.codes) == 0 {
				r.SetExec("app", 9) // then cleared
			}
			r.SetExec(tt.key(ids[0]), tt.codes...)
			for i, want := range tt.want {
				clk.Step(time.Second)
				out, errOut, code, err := r.ExecSync(ctx(), ids[0], []string{"sh", "-c", "true"}, 5*time.Second)
				if err != nil || code != want || (code == 0) != (len(out) > 0 && len(errOut) == 0) {
					t.Fatalf("exec %d: %q %q %d %v, want code %d", i, out, errOut, code, err, want)
				}
			}
			execs := r.Execs()
			if len(execs) != len(tt.want) {
				t.Fatalf("execs %+v", execs)
			}
			e := execs[0]
			if e.ContainerID != ids[0] || e.Name != "app" || strings.Join(e.Cmd, " ") != "sh -c true" || e.Timeout != 5*time.Second || !e.At.Equal(t0.Add(time.Second)) {
				t.Fatalf("exec %+v", e)
			}
		})
	}
}

func TestImages(t *testing.T) {
	pullErr := errors.New("registry down")
	tests := []struct {
		name       string
		setup      func(r *Runtime)
		ref        string
		wantStatus string // image ID ImageStatus finds, "" for none
		wantPull   string
		wantErr    error
	}{
		{name: "absent", ref: "a:1", wantPull: "sha256:a:1"},
		{name: "side-loaded", setup: func(r *Runtime) { r.AddImage("a:1", "sha256:local") }, ref: "a:1", wantStatus: "sha256:local", wantPull: "sha256:a:1"},
		{name: "found by id", setup: func(r *Runtime) { r.AddImage("a:1", "sha256:local") }, ref: "sha256:local", wantStatus: "sha256:local", wantPull: "sha256:local"},
		{name: "pull fails", setup: func(r *Runtime) { r.FailPull("a:1", pullErr) }, ref: "a:1", wantErr: pullErr},
		{name: "pull failure cleared", setup: func(r *Runtime) { r.FailPull("a:1", pullErr); r.FailPull("a:1", nil) }, ref: "a:1", wantPull: "sha256:a:1"},
		{name: "other image fails", setup: func(r *Runtime) { r.FailPull("b:1", pullErr) }, ref: "a:1", wantPull: "sha256:a:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(nil)
			if tt.setup != nil {
				tt.setup(r)
			}
			img, err := r.ImageStatus(ctx(), tt.ref)
			if err != nil || img.GetId() != tt.wantStatus {
				t.Fatalf("ImageStatus = %v, %v; want %q", img, err, tt.wantStatus)
			}
			ref, err := r.PullImage(ctx(), tt.ref, nil)
			if err != tt.wantErr || ref != tt.wantPull {
				t.Fatalf("PullImage = %q, %v; want %q, %v", ref, err, tt.wantPull, tt.wantErr)
			}
			img, _ = r.ImageStatus(ctx(), tt.ref)
			if tt.wantErr == nil && img.GetId() != tt.wantPull {
				t.Fatalf("after the pull ImageStatus = %v", img)
			}
		})
	}
}

func TestImageTagsAndRemove(t *testing.T) {
	r := New(nil)
	r.AddImage("a:1", "sha256:x")
	r.AddImage("a:latest", "sha256:x")
	if _, err := r.PullImage(ctx(), "b:1", nil); err != nil {
		t.Fatal(err)
	}
	r.AddImage("a:latest", "sha256:y") // the tag moves
	imgs, _ := r.ListImages(ctx())
	if len(imgs) != 3 || imgs[0].Id != "sha256:x" || !reflect.DeepEqual(imgs[0].RepoTags, []string{"a:1"}) ||
		imgs[1].Id != "sha256:b:1" || imgs[2].Id != "sha256:y" || !reflect.DeepEqual(imgs[2].RepoTags, []string{"a:latest"}) {
		t.Fatalf("images %v", imgs)
	}
	if err := r.RemoveImage(ctx(), "a:1"); err != nil {
		t.Fatal(err)
	}
	if len(r.Images()) != 2 {
		t.Fatalf("after remove %v", r.Images())
	}
	// A container of a present image refers to it by ID.
	sbCfg := sandboxConfig("u1", 0)
	sb, _ := r.RunPodSandbox(ctx(), sbCfg, "")
	cfg := containerConfig("u1", "app", 0)
	cfg.Image.Image = "a:latest"
	id, _ := r.CreateContainer(ctx(), sb, cfg, sbCfg)
	if st, _ := r.ContainerStatus(ctx(), id); st.ImageRef != "sha256:y" {
		t.Fatalf("image ref %q", st.ImageRef)
	}
}

func TestStreaming(t *testing.T) {
	r := New(nil)
	sb, ids := pod(t, r, "u1", "app")
	u, err := r.Exec(ctx(), &runtimeapi.ExecRequest{ContainerId: ids[0], Cmd: []string{"sh"}, Stdout: true})
	if err != nil || u.Host != "fakecri.invalid" || !strings.Contains(u.Path, ids[0]) {
		t.Fatalf("default URL %v, %v", u, err)
	}
	set := &url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/exec/tok"}
	r.SetStreamURL(set)
	set.Path = "/changed"
	if u, _ := r.Attach(ctx(), &runtimeapi.AttachRequest{ContainerId: ids[0], Stderr: true}); u.String() != "http://127.0.0.1:1/exec/tok" {
		t.Fatalf("set URL %v", u)
	}
	ports := []int32{80, 443}
	if _, err := r.PortForward(ctx(), sb, ports); err != nil {
		t.Fatal(err)
	}
	ports[0] = 1
	if ex := r.ExecRequests(); len(ex) != 1 || ex[0].Cmd[0] != "sh" || !ex[0].Stdout {
		t.Fatalf("exec requests %v", ex)
	}
	if at := r.AttachRequests(); len(at) != 1 || !at[0].Stderr {
		t.Fatalf("attach requests %v", at)
	}
	if pf := r.PortForwards(); !reflect.DeepEqual(pf, []PortForwardCall{{SandboxID: sb, Ports: []int32{80, 443}}}) {
		t.Fatalf("port forwards %v", pf)
	}
	r.InjectAlways("Exec", errdefs.Wrap(errdefs.ErrUnimplemented, errors.New("no streaming")))
	if _, err := r.Exec(ctx(), &runtimeapi.ExecRequest{ContainerId: ids[0]}); !errors.Is(err, errdefs.ErrUnimplemented) {
		t.Fatalf("injected: %v", err)
	}
}
