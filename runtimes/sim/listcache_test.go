package sim

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// freshLists is the unfiltered lists built now by the Go methods (which
// never use the cache), encoded and decoded as gRPC would.
func freshLists(t *testing.T, r *Runtime) (*runtimeapi.ListPodSandboxResponse, *runtimeapi.ListContainersResponse) {
	t.Helper()
	sbs, err := r.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := r.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return roundTrip(t, sbs), roundTrip(t, cs)
}

func roundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// listed is the unfiltered lists over gRPC.
func (e *env) listed(t *testing.T) (*runtimeapi.ListPodSandboxResponse, *runtimeapi.ListContainersResponse) {
	t.Helper()
	sbs, err := e.rt.ListPodSandbox(ctx(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	cs, err := e.rt.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	return sbs, cs
}

// cachedEncodings is the current encodings of both lists (nil where a list
// has none, or only a stale one).
func (r *Runtime) cachedEncodings() (sbs, cs *encodedList) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	current := func(lc *listCache) *encodedList {
		if e := lc.enc.Load(); e != nil && e.gen == lc.gen {
			return e
		}
		return nil
	}
	return current(&r.sandboxList), current(&r.containerList)
}

// wantListsFresh lists over gRPC until both lists are kept encoded (a
// list is kept the second time it is asked for at one generation) and
// fails unless every answer equals the fresh lists.
func (e *env) wantListsFresh(t *testing.T) {
	t.Helper()
	for range 2 {
		gotSbs, gotCs := e.listed(t)
		wantSbs, wantCs := freshLists(t, e.r)
		if !proto.Equal(gotSbs, wantSbs) {
			t.Fatalf("listed sandboxes\n%v\nwant\n%v", gotSbs, wantSbs)
		}
		if !proto.Equal(gotCs, wantCs) {
			t.Fatalf("listed containers\n%v\nwant\n%v", gotCs, wantCs)
		}
		if sbs, cs := e.r.cachedEncodings(); sbs != nil && cs != nil {
			return
		}
	}
	sbs, cs := e.r.cachedEncodings()
	t.Fatalf("after listing twice, cached sandboxes %v containers %v, want both", sbs != nil, cs != nil)
}

// TestCachedListsFollowEveryChange makes each kind of change the runtime
// has to a state whose lists are cached, and checks that the unfiltered
// lists served over gRPC then equal fresh ones; calls that change nothing
// a list shows must keep the cached encodings.
func TestCachedListsFollowEveryChange(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	const mi = 1 << 20
	var (
		sb, ctr string
		sbCfg   *runtimeapi.PodSandboxConfig
	)
	pod := func(name string) { sb, sbCfg = e.runPod(t, name) }
	running := func(name string, cmd ...string) {
		pod(name)
		ctr = e.create(t, sb, sbCfg, ctrConfig("c", cmd...))
		e.start(t, ctr)
	}
	tests := []struct {
		name     string
		setup    func() // before the lists are cached
		change   func()
		unlisted bool // change changes nothing the lists show
	}{
		{name: "run sandbox", change: func() { pod("run") }},
		{name: "run host-network sandbox", change: func() {
			if _, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: sandboxConfig("host", true, nil)}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "create container", setup: func() { pod("create") },
			change: func() { ctr = e.create(t, sb, sbCfg, ctrConfig("c", "sleep", "infinity")) }},
		{name: "start container", setup: func() {
			pod("start")
			ctr = e.create(t, sb, sbCfg, ctrConfig("c", "sleep", "infinity"))
		}, change: func() { e.start(t, ctr) }},
		{name: "program exits as it starts", setup: func() {
			pod("exit-at-start")
			ctr = e.create(t, sb, sbCfg, ctrConfig("c", "sh", "-c", "exit 3"))
		}, change: func() { e.start(t, ctr) }},
		{name: "program exits later (timer)", setup: func() { running("exit-later", "sleep", "1") },
			change: func() { e.waitState(t, ctr, runtimeapi.ContainerState_CONTAINER_EXITED) }},
		{name: "OOM kill by an exec", setup: func() {
			pod("oom")
			cfg := ctrConfig("c", "sleep", "infinity")
			cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 10 * mi}}
			ctr = e.create(t, sb, sbCfg, cfg)
			e.start(t, ctr)
		}, change: func() {
			resp, err := e.rt.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: ctr, Cmd: []string{"alloc", "20Mi"}})
			if err != nil || resp.ExitCode != exitKilled {
				t.Fatalf("exec alloc: %v %v", resp, err)
			}
		}},
		{name: "stop container", setup: func() { running("stop", "sleep", "infinity") }, change: func() {
			if _, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: ctr}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "remove running container", setup: func() { running("remove-running", "sleep", "infinity") }, change: func() {
			if _, err := e.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: ctr}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "remove exited container", setup: func() { running("remove-exited", "true") }, change: func() {
			e.waitState(t, ctr, runtimeapi.ContainerState_CONTAINER_EXITED)
			if _, err := e.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: ctr}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "stop sandbox with a running container", setup: func() { running("stop-sandbox", "sleep", "infinity") }, change: func() {
			if _, err := e.rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "remove sandbox with a running container", setup: func() { running("remove-sandbox", "sleep", "infinity") }, change: func() {
			if _, err := e.rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "new attempt of a container", setup: func() { running("attempt", "true") }, change: func() {
			cfg := ctrConfig("c", "sleep", "infinity")
			cfg.Metadata.Attempt = 1
			e.start(t, e.create(t, sb, sbCfg, cfg))
		}},
		// A container list names a container's image by its first tag
		// while the image is present, else as the container asked.
		{name: "remove the image of a container", setup: func() {
			e.pull(t, "busybox:1.36")
			pod("image")
			cfg := ctrConfig("c", "sleep", "infinity")
			cfg.Image = &runtimeapi.ImageSpec{Image: "busybox:1.36"}
			ctr = e.create(t, sb, sbCfg, cfg)
		}, change: func() {
			if _, err := e.img.RemoveImage(c, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "pull the image of a container again", change: func() { e.pull(t, "busybox:1.36") }},
		{name: "preloaded image made present by a status call", setup: func() {
			if _, err := e.img.RemoveImage(c, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1"}}); err != nil {
				t.Fatal(err)
			}
		}, change: func() {
			if _, err := e.img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1"}}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "update resources", setup: func() { running("update", "sleep", "infinity") }, unlisted: true, change: func() {
			if _, err := e.rt.UpdateContainerResources(c, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: ctr,
				Linux: &runtimeapi.LinuxContainerResources{CpuShares: 4}}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "exec and statuses", unlisted: true, change: func() {
			if _, err := e.rt.ExecSync(c, &runtimeapi.ExecSyncRequest{ContainerId: ctr, Cmd: []string{"sh", "-c", "echo x > /f; alloc 1Mi; spawn 2"}}); err != nil {
				t.Fatal(err)
			}
			e.status(t, ctr)
			if _, err := e.rt.PodSandboxStatus(c, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.rt.ListContainerStats(c, &runtimeapi.ListContainerStatsRequest{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "failed calls", unlisted: true, change: func() {
			if _, err := e.rt.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: ctr}); err == nil {
				t.Fatal("starting a running container succeeded")
			}
			if _, err := e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: ctrConfig("c"), SandboxConfig: sbCfg}); err == nil {
				t.Fatal("creating a reserved name succeeded")
			}
			if _, err := e.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: "unknown"}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			e.wantListsFresh(t)
			sbs0, cs0 := e.r.cachedEncodings()
			tt.change()
			sbs1, cs1 := e.r.cachedEncodings()
			if kept := sbs1 != nil && cs1 != nil; kept != tt.unlisted {
				t.Fatalf("both encodings kept after the change: %v, want %v", kept, tt.unlisted)
			}
			e.wantListsFresh(t)
			if sbs2, cs2 := e.r.cachedEncodings(); tt.unlisted && (sbs2 != sbs0 || cs2 != cs0) {
				t.Fatal("a change to nothing listed made new encodings")
			}
			// Listed again with no change: the same encodings.
			sbs2, cs2 := e.r.cachedEncodings()
			e.wantListsFresh(t)
			if sbs3, cs3 := e.r.cachedEncodings(); sbs3 != sbs2 || cs3 != cs2 {
				t.Fatal("a second list with no change made new encodings")
			}
		})
	}
}

// TestListKeptTheSecondTime: the first unfiltered list after a change is
// answered as it is built, the second is kept encoded and served from then
// on.
func TestListKeptTheSecondTime(t *testing.T) {
	e := newEnv(t, Config{})
	e.runPod(t, "a")
	for i, want := range []bool{false, true, true} {
		e.listed(t)
		sbs, cs := e.r.cachedEncodings()
		if (sbs != nil) != want || (cs != nil) != want {
			t.Fatalf("after list %d: sandboxes kept %v, containers kept %v; want %v", i+1, sbs != nil, cs != nil, want)
		}
	}
	sbs0, cs0 := e.r.cachedEncodings()
	e.listed(t)
	if sbs, cs := e.r.cachedEncodings(); sbs != sbs0 || cs != cs0 {
		t.Fatal("a list at rest encoded again")
	}
	e.runPod(t, "b")
	for i, want := range []bool{false, true} {
		e.listed(t)
		if sbs, _ := e.r.cachedEncodings(); (sbs != nil) != want {
			t.Fatalf("after a change, list %d: sandboxes kept %v, want %v", i+1, sbs != nil, want)
		}
	}
}

// TestCachedListOfOneKindKeepsTheOther: a container's change keeps the
// sandbox list's encoding, and a sandbox's own change the container
// list's.
func TestCachedListOfOneKindKeepsTheOther(t *testing.T) {
	e := newEnv(t, Config{})
	sb, sbCfg := e.runPod(t, "a")
	id := e.create(t, sb, sbCfg, ctrConfig("c", "sleep", "infinity"))
	e.wantListsFresh(t)
	sbs0, _ := e.r.cachedEncodings()
	e.start(t, id)
	if sbs, cs := e.r.cachedEncodings(); sbs != sbs0 || cs != nil {
		t.Fatalf("after a container start: sandbox encoding kept %v, container encoding dropped %v; want both", sbs == sbs0, cs == nil)
	}
	e.wantListsFresh(t)
	_, cs0 := e.r.cachedEncodings()
	e.runPod(t, "b")
	if sbs, cs := e.r.cachedEncodings(); sbs != nil || cs != cs0 {
		t.Fatalf("after a sandbox run: sandbox encoding dropped %v, container encoding kept %v; want both", sbs == nil, cs == cs0)
	}
	e.wantListsFresh(t)
}

// TestFilteredListsBypassTheCache: with the unfiltered lists cached,
// filtered lists answer what matches; an empty filter is no filter.
func TestFilteredListsBypassTheCache(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	sb1, cfg1 := e.runPod(t, "one")
	sb2, cfg2 := e.runPod(t, "two")
	a := e.create(t, sb1, cfg1, ctrConfig("a", "sleep", "infinity"))
	b := e.create(t, sb2, cfg2, ctrConfig("b"))
	e.start(t, a)
	e.wantListsFresh(t)
	sbs0, cs0 := e.r.cachedEncodings()

	cs, err := e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb2}})
	if got := ids(t, cs.GetContainers(), err); fmt.Sprint(got) != fmt.Sprint([]string{b}) {
		t.Fatalf("containers of sandbox two: %v, want %v", got, []string{b})
	}
	cs, err = e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if got := ids(t, cs.GetContainers(), err); fmt.Sprint(got) != fmt.Sprint([]string{a}) {
		t.Fatalf("running containers: %v, want %v", got, []string{a})
	}
	sbs, err := e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "one"}}})
	if got := ids(t, sbs.GetItems(), err); fmt.Sprint(got) != fmt.Sprint([]string{sb1}) {
		t.Fatalf("sandboxes of app one: %v, want %v", got, []string{sb1})
	}
	sbs, err = e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: sb2[:10]}})
	if got := ids(t, sbs.GetItems(), err); fmt.Sprint(got) != fmt.Sprint([]string{sb2}) {
		t.Fatalf("sandboxes by ID prefix: %v, want %v", got, []string{sb2})
	}

	wantSbs, wantCs := freshLists(t, e.r)
	sbs, err = e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{}})
	if err != nil || !proto.Equal(sbs, wantSbs) {
		t.Fatalf("sandboxes with an empty filter: %v, %v; want %v", sbs, err, wantSbs)
	}
	cs, err = e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	if err != nil || !proto.Equal(cs, wantCs) {
		t.Fatalf("containers with an empty filter: %v, %v; want %v", cs, err, wantCs)
	}
	if sbs1, cs1 := e.r.cachedEncodings(); sbs1 != sbs0 || cs1 != cs0 {
		t.Fatal("filtered lists changed the cached encodings")
	}
}

// TestListsWhilePodsChange lists concurrently while pods start, exit,
// stop and go (run it with -race): every cached answer served is checked
// against the state under the same lock (checkLists), the bytes shared by
// the callers never change, and at the end the lists are fresh.
func TestListsWhilePodsChange(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	const pods, listers = 40, 4
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[*encodedList][]byte{} // every encoding served, and its bytes when first seen
	for range listers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := e.rt.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{}); err != nil {
					t.Errorf("ListPodSandbox: %v", err)
					return
				}
				if _, err := e.rt.ListContainers(c, &runtimeapi.ListContainersRequest{}); err != nil {
					t.Errorf("ListContainers: %v", err)
					return
				}
				sbs, cs := e.r.cachedEncodings()
				mu.Lock()
				for _, enc := range []*encodedList{sbs, cs} {
					if enc == nil {
						continue
					}
					if b, ok := seen[enc]; !ok {
						seen[enc] = bytes.Clone(enc.buf.ReadOnlyData())
					} else if !bytes.Equal(b, enc.buf.ReadOnlyData()) {
						t.Errorf("a cached encoding changed after it was served")
					}
				}
				mu.Unlock()
			}
		})
	}
	var churn sync.WaitGroup
	for w := range 2 {
		churn.Go(func() {
			for i := range pods / 2 {
				name := fmt.Sprintf("p%d-%d", w, i)
				cfg := sandboxConfig(name, false, map[string]string{"app": name})
				sb, err := e.rt.RunPodSandbox(c, &runtimeapi.RunPodSandboxRequest{Config: cfg})
				if err != nil {
					t.Errorf("RunPodSandbox: %v", err)
					return
				}
				for j, cmd := range [][]string{{"sleep", "infinity"}, {"true"}} {
					ctr, err := e.rt.CreateContainer(c, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
						Config: ctrConfig(fmt.Sprint("c", j), cmd...), SandboxConfig: cfg})
					if err != nil {
						t.Errorf("CreateContainer: %v", err)
						return
					}
					if _, err := e.rt.StartContainer(c, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
						t.Errorf("StartContainer: %v", err)
						return
					}
				}
				if i%2 == 0 {
					_, err = e.rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
				} else {
					_, err = e.rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
				}
				if err != nil {
					t.Errorf("stop or remove sandbox: %v", err)
					return
				}
			}
		})
	}
	churn.Wait()
	close(done)
	wg.Wait()
	e.wantListsFresh(t)
	sbs, _ := e.listed(t)
	if len(sbs.Items) != pods/2 {
		t.Fatalf("listed %d sandboxes at the end, want the %d stopped ones", len(sbs.Items), pods/2)
	}
}
