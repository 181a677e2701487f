package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/adapters/cri"
)

// ScenarioResize is in-place pod resize through the pods/resize
// subresource (resize.go).
const ScenarioResize = "resize"

func init() { Scenarios = append(Scenarios, ScenarioResize) }

// The resize scenario's agents and runtimes (Options.ResizeAgent,
// Options.ResizeRuntime).
const (
	ResizeRuntimeSim        = "sim"
	ResizeRuntimeContainerd = "containerd"
)

const (
	resizeDefaultPods    = 100
	resizeDefaultRounds  = 2
	resizeDefaultTimeout = time.Minute
	// resizeCondPending and resizeCondInProgress are the pod conditions
	// of a resize not done (v1.33+; not in k8s.io/api's constants of
	// every version the bench builds with).
	resizeCondPending    = "PodResizePending"
	resizeCondInProgress = "PodResizeInProgress"
)

// Resize is what the resize scenario reports.
type Resize struct {
	// Agent is actorlet or upstream, Runtime sim or containerd.
	Agent   string `json:"agent"`
	Runtime string `json:"runtime"`
	// Rounds of resizes per pod; Resizes patched, Done reached the goal
	// (status shows the new resources and allocatedResources, no
	// PodResizePending/PodResizeInProgress), Failed did not in
	// TimeoutSeconds (each with the pod's last status, the first 5 in
	// FailureDetails); a pod whose resize failed gets no next round.
	Rounds         int      `json:"rounds"`
	Resizes        int      `json:"resizes"`
	Done           int      `json:"done"`
	Failed         int      `json:"failed"`
	TimeoutSeconds float64  `json:"timeout_seconds"`
	FailureDetails []string `json:"failure_details,omitempty"`
	// Seconds from the first patch to the last resize done, and
	// ResizesPerSecond = Done / Seconds.
	Seconds          float64 `json:"seconds"`
	ResizesPerSecond float64 `json:"resizes_per_second"`
	// LatencyMS: from sending the patch to the watch showing the resize
	// done, over the resizes done.
	LatencyMS Latency `json:"latency_ms"`
	// Restarts is the pods' restartCount added during the resizes plus
	// containers whose ID changed (must be 0: every resizePolicy is
	// NotRequired).
	Restarts int `json:"restarts"`
	// APIRequestsPerResize is the agent's API requests by verb and
	// resource, from the first patch until its pod-related requests
	// stopped, over the resizes done (the bench's own patches are not
	// counted: they are the admin's); APIWritesPerResize their writes.
	APIRequestsPerResize map[string]float64 `json:"api_requests_per_resize,omitempty"`
	APIWritesPerResize   float64            `json:"api_writes_per_resize"`
	// CPUMSPerResize is the agent process's CPU (user+system) from the
	// first patch to the last resize done, over the resizes done; with
	// the embedded sim it includes the runtime's, with containerd or the
	// sim served apart it does not.
	CPUMSPerResize float64 `json:"cpu_ms_per_resize"`
	// SetupSeconds: from the first create to every pod Ready.
	SetupSeconds float64 `json:"setup_seconds"`
	// Samples are every resize's latency in ms, sorted.
	Samples []float64 `json:"latency_samples_ms,omitempty"`
}

func (z *Resize) summary() string {
	return fmt.Sprintf("resize (%s on %s): %d/%d done, %d failed, %.1f resizes/s, p50 %.0f ms p99 %.0f ms, restarts %d, API %.2f writes/resize, CPU %.1f ms/resize",
		z.Agent, z.Runtime, z.Done, z.Resizes, z.Failed, z.ResizesPerSecond, z.LatencyMS.P50, z.LatencyMS.P99, z.Restarts, z.APIWritesPerResize, z.CPUMSPerResize)
}

// resizeStep is one round's resources of the pods' container "main".
type resizeStep struct {
	cpuReq, cpuLim, memReq, memLim string
}

// resizeSteps: the pods start at [0]; round i resizes them to [i] (up,
// then down again, above where they started, so the memory limit never
// falls below what a sleeping busybox uses). Requests are small so that
// 100 pods fit a 2-core node's allocatable (15m each: 1.5 cores).
var resizeSteps = []resizeStep{
	{"10m", "100m", "16Mi", "64Mi"},
	{"15m", "150m", "24Mi", "96Mi"},
	{"12m", "120m", "20Mi", "80Mi"},
}

func (s resizeStep) requirements() v1.ResourceRequirements {
	return v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(s.cpuReq), v1.ResourceMemory: resource.MustParse(s.memReq)},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(s.cpuLim), v1.ResourceMemory: resource.MustParse(s.memLim)},
	}
}

// patch is the pods/resize strategic merge patch to s.
func (s resizeStep) patch() []byte {
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name": "main",
		"resources": map[string]any{
			"requests": map[string]string{"cpu": s.cpuReq, "memory": s.memReq},
			"limits":   map[string]string{"cpu": s.cpuLim, "memory": s.memLim},
		},
	}}}})
	return b
}

// resizeDone says whether p shows the resize to s done, else what is
// missing.
func resizeDone(p *v1.Pod, s resizeStep) (bool, string) {
	for _, c := range p.Status.Conditions {
		if (c.Type == resizeCondPending || c.Type == resizeCondInProgress) && c.Status == v1.ConditionTrue {
			return false, fmt.Sprintf("condition %s (%s: %s)", c.Type, c.Reason, c.Message)
		}
	}
	want := s.requirements()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != "main" {
			continue
		}
		if cs.State.Running == nil {
			return false, "container main not running"
		}
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if got := cs.AllocatedResources[r]; !quantityNear(got, want.Requests[r], r) {
				return false, fmt.Sprintf("allocatedResources %s %s, want %s", r, qs(got), qs(want.Requests[r]))
			}
			if cs.Resources == nil {
				return false, "status resources missing"
			}
			if got := cs.Resources.Requests[r]; !quantityNear(got, want.Requests[r], r) {
				return false, fmt.Sprintf("status requests %s %s, want %s", r, qs(got), qs(want.Requests[r]))
			}
			if got := cs.Resources.Limits[r]; !quantityNear(got, want.Limits[r], r) {
				return false, fmt.Sprintf("status limits %s %s, want %s", r, qs(got), qs(want.Limits[r]))
			}
		}
		return true, ""
	}
	return false, "no status of container main"
}

func qs(q resource.Quantity) string {
	if q.IsZero() {
		return "none"
	}
	return q.String()
}

// quantityNear: memory exact; CPU within 2 millicores (a request read
// back from cgroup shares rounds: 150m is 153 shares, 149m again).
func quantityNear(got, want resource.Quantity, r v1.ResourceName) bool {
	if r == v1.ResourceCPU {
		d := got.MilliValue() - want.MilliValue()
		return !got.IsZero() && d >= -2 && d <= 2
	}
	return got.Cmp(want) == 0
}

// resizePod is the bench pod: Burstable, resources of resizeSteps[0],
// both resources NotRequired.
func resizePod(name, node, image string, noToken bool) *v1.Pod {
	grace := int64(1)
	var automount *bool
	if noToken {
		automount = new(false)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"app": "actorlet-bench"}},
		Spec: v1.PodSpec{
			NodeName: node, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken: automount,
			Containers: []v1.Container{{
				Name: "main", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				Command:   []string{"sleep", "3600"},
				Resources: resizeSteps[0].requirements(),
				ResizePolicy: []v1.ContainerResizePolicy{
					{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired},
					{ResourceName: v1.ResourceMemory, RestartPolicy: v1.NotRequired},
				},
			}},
		},
	}
}

// podWatch keeps the node's pods as a watch on the API server shows
// them and wakes waiters whose predicate a new version meets.
type podWatch struct {
	mu      sync.Mutex
	pods    map[string]*v1.Pod
	waiters map[string][]podWaiter
}

type podWaiter struct {
	pred func(*v1.Pod) bool
	ch   chan time.Time
}

func newPodWatch() *podWatch {
	return &podWatch{pods: map[string]*v1.Pod{}, waiters: map[string][]podWaiter{}}
}

// run lists and watches until ctx ends.
func (w *podWatch) run(ctx context.Context, cs kubernetes.Interface, node string, log func(string, ...any)) {
	sel := "spec.nodeName=" + node
	pods := cs.CoreV1().Pods(Namespace)
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			log("resize watch: list pods", "err", err)
			_ = sleepCtx(ctx, time.Second)
			continue
		}
		for i := range list.Items {
			w.apply(&list.Items[i], time.Now())
		}
		lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return pods.Watch(ctx, opts)
		}}
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
		if err != nil {
			log("resize watch: watch pods", "err", err)
			_ = sleepCtx(ctx, time.Second)
			continue
		}
	drain:
		for {
			select {
			case <-ctx.Done():
				break drain
			case <-rw.Done():
				break drain
			case ev, ok := <-rw.ResultChan():
				if !ok {
					break drain
				}
				if p, isPod := ev.Object.(*v1.Pod); isPod && ev.Type != watch.Deleted && ev.Type != watch.Error {
					w.apply(p, time.Now())
				}
			}
		}
		rw.Stop()
	}
}

func (w *podWatch) apply(p *v1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods[p.Name] = p
	ws := w.waiters[p.Name]
	kept := ws[:0]
	for _, x := range ws {
		if x.pred(p) {
			x.ch <- now
			continue
		}
		kept = append(kept, x)
	}
	w.waiters[p.Name] = kept
}

// wait is a channel that receives when pod name first meets pred (now,
// if its last version does).
func (w *podWatch) wait(name string, pred func(*v1.Pod) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.pods[name]; p != nil && pred(p) {
		ch <- time.Now()
		return ch
	}
	w.waiters[name] = append(w.waiters[name], podWaiter{pred: pred, ch: ch})
	return ch
}

func (w *podWatch) get(name string) *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pods[name]
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// restartsAndIDs is the pod's restart count and container IDs.
func restartsAndIDs(p *v1.Pod) (int, string) {
	n, ids := 0, []string{}
	for _, cs := range p.Status.ContainerStatuses {
		n += int(cs.RestartCount)
		ids = append(ids, cs.ContainerID)
	}
	return n, strings.Join(ids, ",")
}

// resizeTarget is the agent under the resize load: actorlet or the
// upstream kubelet, on the sim or containerd.
type resizeTarget struct {
	a       *agent
	simCmd  *exec.Cmd // the sim served apart (upstream on sim)
	simDone chan struct{}
	tmp     string // dir, when the bench made it
	dir     string
	sysctls map[string]string // the host's, before the upstream kubelet
	// removeCgroups removes the upstream kubelet's cgroup root.
	removeCgroups func()
}

func (t *resizeTarget) close(o *Options) {
	if t.a != nil {
		t.a.stop()
		t.stopLeftovers(o)
	}
	if t.simCmd != nil && t.simCmd.Process != nil {
		_ = t.simCmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.simDone:
		case <-time.After(10 * time.Second):
			_ = t.simCmd.Process.Kill()
			<-t.simDone
		}
	}
	if t.removeCgroups != nil {
		t.removeCgroups()
	}
	// The pods' secret and projected volumes (tmpfs) that either agent
	// left, kept dir or not.
	unmountUnder(t.dir, o)
	if t.tmp != "" && !o.KeepDir {
		_ = os.RemoveAll(t.tmp)
	}
}

// drain deletes the node's pods and waits (90 s at most) until the
// runtime has no ready sandbox left, so that the agent stops on an empty
// node: its pods' cgroups gone with them, nothing left running in a real
// runtime.
func (t *resizeTarget) drain(ctx context.Context, cs kubernetes.Interface, node string, o *Options) {
	if t.a == nil || t.a.exited() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second) // every call below, whatever hangs
	defer cancel()
	pods, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		o.Log.Warn("drain: list pods", "err", err)
		return
	}
	names := make([]string, 0, len(pods.Items))
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	zero := int64(0)
	_ = forEach(ctx, names, 20, func(name string) error {
		err := cs.CoreV1().Pods(Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			o.Log.Warn("drain: delete pod", "pod", name, "err", err)
		}
		return nil
	})
	rt, err := cri.Dial(ctx, t.a.cri, time.Minute)
	if err != nil {
		o.Log.Warn("drain: the runtime", "err", err)
		return
	}
	defer func() { _ = rt.Close() }()
	ready := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	for {
		sbs, err := rt.ListPodSandbox(ctx, ready)
		if err == nil && len(sbs) == 0 {
			return
		}
		if ctx.Err() != nil || t.a.exited() {
			o.Log.Warn("drain: the agent did not stop every pod", "ready_sandboxes", len(sbs), "err", err)
			return
		}
		if sleepCtx(ctx, 200*time.Millisecond) != nil {
			return
		}
	}
}

// stopLeftovers stops and removes, through the CRI, the bench's pods the
// stopped agent left in a real runtime (a drain that ran out of time), so
// that no container outlives the run and the cgroup root can go.
func (t *resizeTarget) stopLeftovers(o *Options) {
	if o.ResizeRuntime != ResizeRuntimeContainerd || t.a.cri == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := cri.Dial(ctx, t.a.cri, time.Minute)
	if err != nil {
		o.Log.Warn("stop the pods left in the runtime", "err", err)
		return
	}
	defer func() { _ = rt.Close() }()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": Namespace}})
	if err != nil {
		o.Log.Warn("stop the pods left in the runtime", "err", err)
		return
	}
	for _, sb := range sbs {
		if err := rt.StopPodSandbox(ctx, sb.Id); err != nil {
			o.Log.Warn("stop a pod left in the runtime", "sandbox", sb.Id, "err", err)
			continue
		}
		if err := rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			o.Log.Warn("remove a pod left in the runtime", "sandbox", sb.Id, "err", err)
		}
	}
}

// makeCgroupRoot makes the cgroup root in every cgroup hierarchy mounted
// (each v1 controller's and a cgroup2's) and returns what removes it and
// every cgroup under it, deepest first (rmdir: a cgroup that still holds
// a process stays, with a warning).
func makeCgroupRoot(root string, warn func(string, ...any)) (func(), error) {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return nil, err
	}
	var made []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || (f[2] != "cgroup" && f[2] != "cgroup2") {
			continue
		}
		d := filepath.Join(f[1], root)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("make the kubelet's cgroup root %s: %w", d, err)
		}
		made = append(made, d)
	}
	if len(made) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted (/proc/mounts): the upstream kubelet needs one")
	}
	return func() {
		for _, top := range made {
			var dirs []string
			_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- { // children after their parents in a walk
				if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
					warn("remove the kubelet's cgroup", "cgroup", dirs[i], "err", err)
				}
			}
		}
	}, nil
}

// runResize is the resize scenario: o.Pods Burstable pods through the
// API server, each once Ready resized o.ResizeRounds times through the
// pods/resize subresource (CPU and memory requests and limits,
// resizePolicy NotRequired), o.Concurrency pods at a time, each resize
// waited for on a watch before the pod's next.
func runResize(ctx context.Context, o Options, r *Result) error {
	r.Goal = "Resized"
	z := &Resize{Agent: o.ResizeAgent, Runtime: o.ResizeRuntime, Rounds: o.ResizeRounds, TimeoutSeconds: o.ResizeTimeout.Seconds()}
	r.Resize = z
	c, nodeCfg, err := openCluster(ctx, &o, "resize", o.ResizeAgent == AgentActorlet)
	if err != nil {
		return err
	}
	defer c.cleanup(context.WithoutCancel(ctx))
	cs, node := c.cs, c.node
	apf := &apfCounter{cs: cs, node: node}
	if err := apf.setup(ctx); err != nil {
		return err
	}
	defer apf.teardown(context.WithoutCancel(ctx))

	t, err := startResizeTarget(ctx, &o, nodeCfg, node)
	if t != nil {
		defer t.close(&o)
	}
	if err != nil {
		return err
	}
	defer t.drain(context.WithoutCancel(ctx), cs, node, &o)
	r.Runtime, r.AgentArgs = o.ResizeRuntime, t.a.args
	if err := c.waitNodeReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	if o.ResizeAgent == AgentUpstream {
		// The kubelet set its sysctls at start: the host's go back.
		(&agentRun{o: &o, kind: AgentUpstream, sysctls: t.sysctls}).restoreSysctls()
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w := newPodWatch()
	go w.run(wctx, cs, node, o.Log.Warn)

	// The pods, until all are Ready.
	names := make([]string, o.Pods)
	for i := range names {
		names[i] = fmt.Sprintf("resize-%05d", i)
	}
	setup := time.Now()
	o.Log.Info("creating pods", "pods", o.Pods, "agent", o.ResizeAgent, "runtime", o.ResizeRuntime)
	if err := forEach(ctx, names, o.Concurrency, func(name string) error {
		_, err := cs.CoreV1().Pods(Namespace).Create(ctx, resizePod(name, node, o.Image, o.NoToken), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s: %w", name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	deadline := time.After(o.Timeout)
	readyOrEnded := func(p *v1.Pod) bool {
		return podReady(p) || p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded
	}
	for _, n := range names {
		select {
		case <-w.wait(n, readyOrEnded):
			if p := w.get(n); !podReady(p) {
				return fmt.Errorf("resize: pod %s ended before it was Ready: %s %s (%s)", n, p.Status.Reason, p.Status.Message, podBrief(p))
			}
		case <-deadline:
			return fmt.Errorf("resize: pod %s not Ready in %s (%s)", n, o.Timeout, podBrief(w.get(n)))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.Running = o.Pods
	z.SetupSeconds = round3(time.Since(setup).Seconds())
	o.Log.Info("pods Ready", "seconds", z.SetupSeconds)
	before := map[string]struct {
		restarts int
		ids      string
	}{}
	for _, n := range names {
		rc, ids := restartsAndIDs(w.get(n))
		before[n] = struct {
			restarts int
			ids      string
		}{rc, ids}
	}

	// The resizes.
	_ = sleepCtx(ctx, 500*time.Millisecond) // the pods' last status writes
	atStart, err := apf.snapshot(ctx)
	if err != nil {
		return err
	}
	cpu0, _ := readProc(t.a.pid)
	start := time.Now()
	var mu sync.Mutex
	var lat []float64
	var last time.Time
	_ = forEach(ctx, names, o.Concurrency, func(name string) error {
		for round := 1; round <= o.ResizeRounds; round++ {
			step := resizeSteps[1+(round-1)%(len(resizeSteps)-1)]
			done := w.wait(name, func(p *v1.Pod) bool { ok, _ := resizeDone(p, step); return ok })
			mu.Lock()
			z.Resizes++
			mu.Unlock()
			t0 := time.Now()
			_, err := cs.CoreV1().Pods(Namespace).Patch(ctx, name, types.StrategicMergePatchType, step.patch(), metav1.PatchOptions{}, "resize")
			var why string
			var at time.Time
			if err != nil {
				why = "patch: " + err.Error()
			} else {
				select {
				case at = <-done:
				case <-time.After(o.ResizeTimeout):
					_, why = resizeDone(w.get(name), step)
					why = fmt.Sprintf("not done in %s: %s", o.ResizeTimeout, why)
				case <-ctx.Done():
					why = ctx.Err().Error()
				}
			}
			mu.Lock()
			if why != "" {
				z.Failed++
				if len(z.FailureDetails) < 5 {
					z.FailureDetails = append(z.FailureDetails, fmt.Sprintf("%s round %d: %s", name, round, why))
				}
				mu.Unlock()
				return nil
			}
			z.Done++
			lat = append(lat, float64(at.Sub(t0))/float64(time.Millisecond))
			if at.After(last) {
				last = at
			}
			mu.Unlock()
		}
		return nil
	})
	cpu1, _ := readProc(t.a.pid)
	if z.Done > 0 {
		z.Seconds = round3(last.Sub(start).Seconds())
		if z.Seconds > 0 {
			z.ResizesPerSecond = round3(float64(z.Done) / z.Seconds)
		}
		z.CPUMSPerResize = round3((cpu1.cpu - cpu0.cpu) * 1000 / float64(z.Done))
	}
	sort.Float64s(lat)
	z.LatencyMS, z.Samples = Summarize(lat), lat
	after := apf.settle(ctx, atStart, 2*time.Second, time.Minute)
	if z.Done > 0 {
		z.APIRequestsPerResize = diffCounts(after, atStart, float64(z.Done))
		z.APIWritesPerResize = writes(z.APIRequestsPerResize)
	}
	for _, n := range names {
		rc, ids := restartsAndIDs(w.get(n))
		b := before[n]
		z.Restarts += rc - b.restarts
		if rc == b.restarts && ids != b.ids {
			z.Restarts++
		}
	}
	r.Seconds, r.CPUSeconds = z.Seconds, round3(cpu1.cpu-cpu0.cpu)
	switch {
	case t.a.exited():
		return fmt.Errorf("resize: the agent (%s) exited during the resizes (%d of %d done); its log ends:\n%s",
			z.Agent, z.Done, z.Resizes, t.a.logTail(15))
	case z.Failed > 0:
		return fmt.Errorf("resize: %d of %d resizes not done (%s on %s), e.g. %s", z.Failed, z.Resizes, z.Agent, z.Runtime, z.FailureDetails[0])
	case z.Restarts > 0:
		return fmt.Errorf("resize: %d container restarts during the resizes (resizePolicy NotRequired: want 0)", z.Restarts)
	}
	return nil
}

// podBrief is a pod's phase and conditions, for errors.
func podBrief(p *v1.Pod) string {
	if p == nil {
		return "never seen"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, ", %s=%s", c.Type, c.Status)
		if c.Message != "" {
			fmt.Fprintf(&b, " (%s)", c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			fmt.Fprintf(&b, ", %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
	}
	return b.String()
}

// forEach calls f for each name from n goroutines; the first error stops
// handing out names and is returned.
func forEach(ctx context.Context, names []string, n int, f func(string) error) error {
	work := make(chan string)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	stop := make(chan struct{})
	for range n {
		wg.Go(func() {
			for name := range work {
				if err := f(name); err != nil {
					once.Do(func() { first = err; close(stop) })
				}
			}
		})
	}
feed:
	for _, name := range names {
		select {
		case work <- name:
		case <-stop:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// startResizeTarget starts the agent the scenario measures.
func startResizeTarget(ctx context.Context, o *Options, nodeCfg, node string) (*resizeTarget, error) {
	t := &resizeTarget{sysctls: readSysctls()}
	dir := o.RootDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "actorlet-bench-resize-"); err != nil {
			return nil, err
		}
		t.tmp = dir
	}
	t.dir = dir
	maxPods := o.Pods + 10
	qps, burst := strconv.Itoa(o.APIQPS), strconv.Itoa(o.APIBurst)
	var ep string
	switch o.ResizeRuntime {
	case ResizeRuntimeContainerd:
		var err error
		if ep, err = containerdEndpoint(ctx, o); err != nil {
			return t, err
		}
	case ResizeRuntimeSim:
		ep = "sim://" + simQuery(sizedSim(o.Sim, o.Pods))
		if o.ResizeAgent == AgentUpstream {
			// The same runtime, served apart: actorlet simruntime.
			sock := filepath.Join(dir, "sim.sock")
			if err := t.serveSim(ctx, o, sock, filepath.Join(dir, "sim.log")); err != nil {
				return t, err
			}
			ep = "unix://" + sock
		}
	}
	var err error
	if o.ResizeAgent == AgentUpstream {
		kubelet, kerr := kubeletBinary(ctx, *o)
		if kerr != nil {
			return t, kerr
		}
		nodeIP := o.NodeIP
		if nodeIP == "" {
			if nodeIP, err = hostIP(); err != nil {
				return t, err
			}
		}
		kdir := filepath.Join(dir, "kubelet")
		if err := os.MkdirAll(kdir, 0o755); err != nil {
			return t, err
		}
		// Its resize needs pod cgroups (v1.37.2 with cgroupsPerQOS false
		// dies of a nil pointer in doPodResizeAction): QoS and pod
		// cgroups under a cgroup root of its own, made here in every
		// hierarchy and removed after it.
		root := fmt.Sprintf("/actorlet-bench-resize-%d", os.Getpid())
		if t.removeCgroups, err = makeCgroupRoot(root, o.Log.Warn); err != nil {
			return t, err
		}
		// Disk thresholds off, as for actorlet: a shared bench machine's
		// disk is no part of a resize (all four signals set, so none
		// falls back to its default).
		cgroups := fmt.Sprintf("cgroupsPerQOS: true\ncgroupRoot: %s\nevictionHard: {memory.available: 100Mi, "+
			"nodefs.available: \"0%%\", imagefs.available: \"0%%\", nodefs.inodesFree: \"0%%\"}\nimageGCHighThresholdPercent: 100\n", root)
		t.a, err = startKubelet(ctx, kubelet, kdir, ep, nodeCfg, node, nodeIP, cgroups, maxPods, o.APIQPS, o.APIBurst)
		return t, err
	}
	extra := append([]string{"--kubeconfig", nodeCfg, "--kube-api-qps", qps, "--kube-api-burst", burst}, o.AgentArgs...)
	if o.ResizeRuntime == ResizeRuntimeContainerd {
		// A real runtime on a cgroup v1 host: what the agent needs there
		// when it has it (cgroup v1 allowed; its own cgroup root, never
		// the machine's /kubepods), unless the user said.
		if agentHasFlag(ctx, o.Binary, "--fail-cgroupv1") && !hasFlag(extra, "--fail-cgroupv1") {
			extra = append(extra, "--fail-cgroupv1=false")
		}
		if agentHasFlag(ctx, o.Binary, "--cgroup-root") && !hasFlag(extra, "--cgroup-root") {
			// It must exist: made here in every hierarchy, removed after.
			root := fmt.Sprintf("/actorlet-bench-resize-%d", os.Getpid())
			var err error
			if t.removeCgroups, err = makeCgroupRoot(root, o.Log.Warn); err != nil {
				return t, err
			}
			extra = append(extra, "--cgroup-root", root)
		}
	}
	t.a, err = startAgent(ctx, agentSpec{binary: o.Binary, runtime: ep, maxPods: maxPods, node: node,
		rootDir: filepath.Join(dir, "root"), extra: extra, gomaxprocs: o.GOMAXPROCS})
	return t, err
}

// serveSim starts `actorlet simruntime` (Options.Binary's) on sock with
// o.Sim's options as its flags.
func (t *resizeTarget) serveSim(ctx context.Context, o *Options, sock, logPath string) error {
	q, err := url.ParseQuery(strings.TrimPrefix(sizedSim(o.Sim, o.Pods), "?"))
	if err != nil {
		return fmt.Errorf("--sim: %w", err)
	}
	args := []string{"simruntime", "--listen", "unix://" + sock}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		for _, v := range q[k] {
			args = append(args, "--"+k+"="+v)
		}
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	t.simCmd = exec.Command(o.Binary, args...)
	t.simCmd.Stdout, t.simCmd.Stderr = logf, logf
	t.simCmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := t.simCmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start the sim runtime (%s simruntime): %w", o.Binary, err)
	}
	t.simDone = make(chan struct{})
	go func() { _ = t.simCmd.Wait(); _ = logf.Close(); close(t.simDone) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-t.simDone:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("the sim runtime exited: %s", b)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("the sim runtime did not listen in 30 s")
		}
	}
}

// resizeDefaults checks and fills the resize scenario's options.
func (o *Options) resizeDefaults() error {
	switch o.ResizeAgent {
	case "":
		o.ResizeAgent = AgentActorlet
	case "upstream":
		o.ResizeAgent = AgentUpstream
	}
	if o.ResizeAgent != AgentActorlet && o.ResizeAgent != AgentUpstream {
		return fmt.Errorf("--resize-agent %q: want %s or upstream", o.ResizeAgent, AgentActorlet)
	}
	if o.ResizeRuntime == "" {
		o.ResizeRuntime = ResizeRuntimeSim
	}
	if o.ResizeRuntime != ResizeRuntimeSim && o.ResizeRuntime != ResizeRuntimeContainerd {
		return fmt.Errorf("--resize-runtime %q: want %s or %s", o.ResizeRuntime, ResizeRuntimeSim, ResizeRuntimeContainerd)
	}
	if o.ResizeRounds < 0 {
		return fmt.Errorf("--resize-rounds must not be negative, got %d", o.ResizeRounds)
	}
	if o.ResizeRounds == 0 {
		o.ResizeRounds = resizeDefaultRounds
	}
	if o.ResizeTimeout < 0 {
		return fmt.Errorf("--resize-timeout must not be negative, got %s", o.ResizeTimeout)
	}
	if o.ResizeTimeout == 0 {
		o.ResizeTimeout = resizeDefaultTimeout
	}
	if o.APIQPS <= 0 {
		o.APIQPS = 50
	}
	if o.APIBurst <= 0 {
		o.APIBurst = max(100, 2*o.APIQPS)
	}
	if o.Endpoint != "" {
		return errors.New("resize: --endpoint is not supported (the bench starts the agent, on a node of the local control plane)")
	}
	return nil
}
