package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/internal/mountinfo"
)

// ScenarioAgainstUpstream is `actorlet-bench --against upstream`: the same
// pod load on actorlet and on the upstream kubelet, one after the other, on
// the same local control plane and each on a fresh fake CRI runtime process.
const ScenarioAgainstUpstream = "against-upstream"

// AgainstUpstream is the only --against value.
const AgainstUpstream = "upstream"

// Agents of the comparison, in the order they run.
const (
	AgentActorlet = "actorlet"
	AgentUpstream = "upstream-kubelet"
)

func init() { Scenarios = append(Scenarios, ScenarioAgainstUpstream) }

// upstreamRecoveryPods is the default pod count of the kill -9 recovery.
const upstreamRecoveryPods = 200

// Upstream's client limits (kubeAPIQPS, kubeAPIBurst), the default of
// both agents in the comparison.
const (
	upstreamAPIQPS   = 50
	upstreamAPIBurst = 100
)

// Against is what --against upstream reports: each agent's figures and
// their ratios, actorlet over upstream (below 1 is less time, memory, CPU
// or writes for actorlet; above 1 more pods per second).
type Against struct {
	KubeletBinary  string `json:"kubelet_binary"`
	KubeletVersion string `json:"kubelet_version"`
	NodeIP         string `json:"node_ip"`
	RecoveryPods   int    `json:"recovery_pods"`
	// APIQPS and APIBurst are both agents' client limits; NoToken: the
	// pods had no projected service account token.
	APIQPS   int      `json:"api_qps"`
	APIBurst int      `json:"api_burst"`
	NoToken  bool     `json:"no_token,omitempty"`
	Order    []string `json:"order"`
	// Actorlet and Upstream are the figures of the one round, or with
	// --rounds above 1 each figure's median over the rounds (restarts,
	// duplicates and flaps: the most of any round); Rounds has each.
	Actorlet *AgentFigures      `json:"actorlet"`
	Upstream *AgentFigures      `json:"upstream_kubelet"`
	Ratios   map[string]float64 `json:"ratios"`
	Rounds   []AgainstRound     `json:"rounds,omitempty"`
}

// AgainstRound is one round: each agent once, in alternating order.
type AgainstRound struct {
	Actorlet *AgentFigures `json:"actorlet"`
	Upstream *AgentFigures `json:"upstream_kubelet"`
}

// medianFigures is fs's one element, or a copy of the round with the
// median create throughput whose compared figures are each the median
// over fs (the worst of any round for restarts, duplicates and flaps).
func medianFigures(fs []*AgentFigures) *AgentFigures {
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	med := func(get func(f *AgentFigures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	sorted := slices.Clone(fs)
	slices.SortFunc(sorted, func(a, b *AgentFigures) int {
		switch {
		case a.CreatePodsPerSecond < b.CreatePodsPerSecond:
			return -1
		case a.CreatePodsPerSecond > b.CreatePodsPerSecond:
			return 1
		}
		return 0
	})
	m := *sorted[len(sorted)/2]
	m.CreatePodsPerSecond = round(med(func(f *AgentFigures) float64 { return f.CreatePodsPerSecond }))
	m.CreateSeconds = round3(med(func(f *AgentFigures) float64 { return f.CreateSeconds }))
	m.DeletePodsPerSecond = round(med(func(f *AgentFigures) float64 { return f.DeletePodsPerSecond }))
	m.StartLatencyMS.P50 = round(med(func(f *AgentFigures) float64 { return f.StartLatencyMS.P50 }))
	m.StartLatencyMS.P90 = round(med(func(f *AgentFigures) float64 { return f.StartLatencyMS.P90 }))
	m.StartLatencyMS.P99 = round(med(func(f *AgentFigures) float64 { return f.StartLatencyMS.P99 }))
	m.RSSPeakBytes = uint64(med(func(f *AgentFigures) float64 { return float64(f.RSSPeakBytes) }))
	m.CPUPerPodMS = round(med(func(f *AgentFigures) float64 { return f.CPUPerPodMS }))
	m.CPUToReadyPerPodMS = round(med(func(f *AgentFigures) float64 { return f.CPUToReadyPerPodMS }))
	m.ControlPlaneCPUPerPodMS = round(med(func(f *AgentFigures) float64 { return f.ControlPlaneCPUPerPodMS }))
	m.APIWritesPerPod = round3(med(func(f *AgentFigures) float64 { return f.APIWritesPerPod }))
	m.APIWritesPerPodNoEvents = round3(med(func(f *AgentFigures) float64 { return f.APIWritesPerPodNoEvents }))
	m.Ready = int(med(func(f *AgentFigures) float64 { return float64(f.Ready) }))
	var recs []*Recovery
	for _, f := range fs {
		if f.Recovery != nil {
			recs = append(recs, f.Recovery)
		}
	}
	if len(recs) == len(fs) {
		rec := *m.Recovery
		rec.Seconds = round3(med(func(f *AgentFigures) float64 { return f.Recovery.Seconds }))
		rec.HealthySeconds = round3(med(func(f *AgentFigures) float64 { return f.Recovery.HealthySeconds }))
		for _, r := range recs {
			rec.Recovered = rec.Recovered && r.Recovered
			rec.ContainerRestarts = max(rec.ContainerRestarts, r.ContainerRestarts)
			rec.DuplicateSandboxes = max(rec.DuplicateSandboxes, r.DuplicateSandboxes)
			rec.RestartCount = max(rec.RestartCount, r.RestartCount)
			rec.ReadyFlaps = max(rec.ReadyFlaps, r.ReadyFlaps)
		}
		m.Recovery = &rec
	}
	return &m
}

// AgentFigures are one agent's figures under the load.
type AgentFigures struct {
	Agent string   `json:"agent"`
	Args  []string `json:"args"`
	Node  string   `json:"node"`
	Ready int      `json:"ready"`
	// CreatePodsPerSecond is pods over first create request to last pod
	// Ready (as the watch saw it); DeletePodsPerSecond pods over first
	// delete request (grace 1 s, so the agent must stop the pod and
	// confirm) to the last pod gone from the API.
	CreatePodsPerSecond float64 `json:"create_pods_per_second"`
	CreateSeconds       float64 `json:"create_seconds"`
	DeletePodsPerSecond float64 `json:"delete_pods_per_second"`
	DeleteSeconds       float64 `json:"delete_seconds"`
	Deleted             int     `json:"deleted"`
	StartLatencyMS      Latency `json:"start_latency_ms"`
	DeleteLatencyMS     Latency `json:"delete_latency_ms"`
	// RSS of the agent's process over the create and delete phases;
	// CPU (utime+stime) from the first create to the last Ready plus the
	// trailing writes, over pods.
	// ControlPlaneCPUPerPodMS is kube-apiserver's and etcd's CPU over the
	// same window, over pods, when the control plane is the local one
	// (their pid files beside the admin kubeconfig): the share of the
	// cores the agent's API traffic costs on a machine that runs both.
	ControlPlaneCPUPerPodMS float64 `json:"control_plane_cpu_per_pod_ms,omitempty"`
	RSSIdleBytes            uint64  `json:"rss_idle_bytes"`
	RSSPeakBytes            uint64  `json:"rss_peak_bytes"`
	// Memory splits RSS (anonymous, file) idle, at every pod Ready and
	// steady with every pod running, for both agents; actorlet's adds the
	// Go heap and the reading after the deletion (they read its
	// /metrics).
	Memory      *MemoryFigures `json:"memory,omitempty"`
	CPUSeconds  float64        `json:"cpu_seconds"`
	CPUPerPodMS float64        `json:"cpu_per_pod_ms"`
	// CPUToReadyPerPodMS is the agent's CPU from the first create to the
	// moment the last pod was seen Ready, over pods. CPUPerPodMS runs on
	// until the API request counts settle: it adds the trailing writes
	// (events past their limiter, 15-20 s at 1,000 pods) and what the agent
	// does at rest meanwhile.
	CPUToReadyPerPodMS float64 `json:"cpu_to_ready_per_pod_ms,omitempty"`
	// API requests of the node's user counted by the API server (as
	// cluster-sim), from the first create to the last Ready plus trailing
	// writes, over pods.
	APIWritesPerPod float64 `json:"api_writes_per_pod"`
	// APIWritesPerPodNoEvents leaves out events (both agents send them
	// through a limiter of their own, EventRecordQPS).
	APIWritesPerPodNoEvents float64            `json:"api_writes_per_pod_excluding_events"`
	APIRequestsPerPod       map[string]float64 `json:"api_requests_per_pod,omitempty"`
	// CRICallsPerPod counts the CRI calls the shared fake runtime served
	// from the first create to the last Ready, by method, over pods: the
	// calls of a pod start, and the relists and status polls of the
	// window (those grow with its length, not with the pods).
	CRICallsPerPod map[string]float64 `json:"cri_calls_per_pod,omitempty"`
	Recovery       *Recovery          `json:"recovery,omitempty"`
	LoadAvg1       float64            `json:"load_avg_1m"`
	// FileSystem is the file system of this agent's directories when its
	// run started (the other agent's run before it leaves its deleted
	// inodes there).
	FileSystem *FileSystem `json:"file_system,omitempty"`
	Error      string      `json:"error,omitempty"`
}

// Recovery is the agent killed with SIGKILL while RecoveryPods pods run,
// and started again with the same flags and state.
type Recovery struct {
	Pods int `json:"pods"`
	// Seconds from the kill to all of: the new process healthy, the node's
	// Lease renewed by it, its kubelet_running_pods at Pods, every pod
	// Ready in the API; HealthySeconds to the first only.
	Seconds        float64 `json:"seconds"`
	HealthySeconds float64 `json:"healthy_seconds"`
	Recovered      bool    `json:"recovered"`
	// Seen in the fake runtime after the recovery: containers and pod
	// sandboxes the agent created after the kill (each one a restart or a
	// duplicate: every pod already had both).
	ContainerRestarts  int `json:"container_restarts"`
	DuplicateSandboxes int `json:"duplicate_sandboxes"`
	// RestartCount is the sum of the pods' containers' restartCount in the
	// API after the recovery.
	RestartCount int `json:"restart_count"`
	// ReadyFlaps counts Ready True -> not True transitions the watch saw
	// from the kill to SettleSeconds after the recovery.
	ReadyFlaps    int     `json:"ready_flaps"`
	SettleSeconds float64 `json:"settle_seconds"`
}

// recoverySettle is how long flaps are watched for after the recovery.
const recoverySettle = 10 * time.Second

// runAgainstUpstream runs the load on actorlet, then on the upstream
// kubelet.
func runAgainstUpstream(ctx context.Context, o Options, r *Result) error {
	r.Goal = GoalReady
	if o.Endpoint != "" {
		return errors.New("--against upstream starts both agents itself: --endpoint is not for it")
	}
	if o.RecoveryPods <= 0 {
		o.RecoveryPods = upstreamRecoveryPods
	}
	if o.APIQPS <= 0 {
		o.APIQPS = upstreamAPIQPS
	}
	if o.APIBurst <= 0 {
		o.APIBurst = max(upstreamAPIBurst, 2*o.APIQPS)
	}
	switch o.Only {
	case "", AgentActorlet, AgentUpstream:
	case "upstream":
		o.Only = AgentUpstream
	default:
		return fmt.Errorf("--only %q: want %s or %s", o.Only, AgentActorlet, AgentUpstream)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: --against upstream runs the upstream kubelet, which needs root", ErrNotYet)
	}
	if !agentHasFlag(ctx, o.Binary, "--kubeconfig") {
		return fmt.Errorf("%w: --against upstream needs cluster mode (--kubeconfig), which this actorlet (%s) does not have", ErrNotYet, o.Binary)
	}
	kubelet := ""
	if o.Only != AgentActorlet {
		var err error
		if kubelet, err = kubeletBinary(ctx, o); err != nil {
			return err
		}
	}
	var err error
	nodeIP := o.NodeIP
	if nodeIP == "" {
		if nodeIP, err = hostIP(); err != nil {
			return err
		}
	}
	prefix := o.Node
	if prefix == "" {
		prefix = "bench"
	}
	a := &Against{KubeletBinary: homeRelative(kubelet), NodeIP: nodeIP, RecoveryPods: o.RecoveryPods, APIQPS: o.APIQPS, APIBurst: o.APIBurst, NoToken: o.NoToken}
	if o.NoRecovery {
		a.RecoveryPods = 0
	}
	if out, err := exec.CommandContext(ctx, kubelet, "--version").Output(); kubelet != "" && err == nil {
		a.KubeletVersion = strings.TrimSpace(strings.TrimPrefix(string(out), "Kubernetes "))
	}
	r.Against = a
	r.Runtime = "fake CRI (k8s.io/cri-client/pkg/fake), one process per agent"
	var errs []error
	var xs, us []*AgentFigures
	for round := range max(o.Rounds, 1) {
		order := []string{AgentActorlet, AgentUpstream}
		if round%2 == 1 {
			// Alternate: a machine that slows under sustained load favours
			// neither agent.
			order = []string{AgentUpstream, AgentActorlet}
		}
		rd := AgainstRound{}
		for _, kind := range order {
			if o.Only != "" && kind != o.Only {
				continue
			}
			a.Order = append(a.Order, kind)
			f, err := runAgentLoad(ctx, &o, kind, prefix+"-"+strings.TrimSuffix(kind, "-kubelet"), nodeIP, kubelet)
			if err != nil {
				f.Error = err.Error()
				errs = append(errs, fmt.Errorf("round %d: %s: %w", round+1, kind, err))
			}
			if kind == AgentActorlet {
				rd.Actorlet, xs = f, append(xs, f)
			} else {
				rd.Upstream, us = f, append(us, f)
			}
			if ctx.Err() != nil {
				break
			}
		}
		a.Rounds = append(a.Rounds, rd)
		if ctx.Err() != nil {
			break
		}
	}
	a.Actorlet, a.Upstream = medianFigures(xs), medianFigures(us)
	if len(a.Rounds) == 1 {
		a.Rounds = nil // the figures are the round's
	}
	if a.Actorlet != nil && a.Upstream != nil {
		a.Ratios = ratios(a.Actorlet, a.Upstream)
	}
	if a.Actorlet != nil {
		r.Running = a.Actorlet.Ready
		r.PodsPerSecond = a.Actorlet.CreatePodsPerSecond
		r.Seconds = a.Actorlet.CreateSeconds
		r.LatencyMS = a.Actorlet.StartLatencyMS
		r.RSSPeakBytes, r.CPUPerPodMS, r.APIWritesPerPod = a.Actorlet.RSSPeakBytes, a.Actorlet.CPUPerPodMS, a.Actorlet.APIWritesPerPod
		r.AgentArgs = a.Actorlet.Args
	}
	return errors.Join(errs...)
}

// ratios are actorlet's figures over upstream's (0 where upstream's is 0).
func ratios(a, u *AgentFigures) map[string]float64 {
	out := map[string]float64{}
	put := func(k string, x, y float64) {
		if y != 0 {
			out[k] = round3(x / y)
		}
	}
	put("create_pods_per_second", a.CreatePodsPerSecond, u.CreatePodsPerSecond)
	put("delete_pods_per_second", a.DeletePodsPerSecond, u.DeletePodsPerSecond)
	put("start_p50", a.StartLatencyMS.P50, u.StartLatencyMS.P50)
	put("start_p90", a.StartLatencyMS.P90, u.StartLatencyMS.P90)
	put("start_p99", a.StartLatencyMS.P99, u.StartLatencyMS.P99)
	put("rss_peak", float64(a.RSSPeakBytes), float64(u.RSSPeakBytes))
	if a.Memory != nil && u.Memory != nil {
		put("rss_steady", float64(a.Memory.Steady.RSSBytes), float64(u.Memory.Steady.RSSBytes))
	}
	put("cpu_per_pod", a.CPUPerPodMS, u.CPUPerPodMS)
	put("cpu_to_ready_per_pod", a.CPUToReadyPerPodMS, u.CPUToReadyPerPodMS)
	put("control_plane_cpu_per_pod", a.ControlPlaneCPUPerPodMS, u.ControlPlaneCPUPerPodMS)
	put("api_writes_per_pod", a.APIWritesPerPod, u.APIWritesPerPod)
	put("api_writes_per_pod_excluding_events", a.APIWritesPerPodNoEvents, u.APIWritesPerPodNoEvents)
	if a.Recovery != nil && u.Recovery != nil {
		put("recovery_seconds", a.Recovery.Seconds, u.Recovery.Seconds)
	}
	return out
}

// kubeletBinary is --kubelet, or deploy/local/kubelet.sh build's (exit 3
// there: this machine cannot build it).
func kubeletBinary(ctx context.Context, o Options) (string, error) {
	if o.Kubelet != "" {
		if _, err := os.Stat(o.Kubelet); err != nil {
			return "", fmt.Errorf("--kubelet: %w", err)
		}
		return o.Kubelet, nil
	}
	script, err := findScript("deploy/local/kubelet.sh")
	if err != nil {
		return "", fmt.Errorf("--against upstream: give --kubelet PATH, or run from the repository: %w", err)
	}
	o.Log.Info("building the upstream kubelet if needed", "script", script)
	vals, err := runScript(ctx, script, "build")
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return "", fmt.Errorf("%w: %s cannot build the upstream kubelet here: %v", ErrNotYet, script, err)
	}
	if err != nil {
		return "", err
	}
	if vals["KUBELET"] == "" {
		return "", fmt.Errorf("%s build printed no KUBELET", script)
	}
	return vals["KUBELET"], nil
}

// hostIP is the first global unicast IPv4 address of an up interface: the
// upstream kubelet refuses a loopback node IP.
func hostIP() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, itf := range ifs {
		if itf.Flags&net.FlagUp == 0 || itf.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := itf.Addrs()
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address for the node IP (the upstream kubelet refuses loopback): give --node-ip, e.g. after `ip link add actbench0 type dummy; ip link set actbench0 up; ip addr add 192.0.2.10/32 dev actbench0`")
}

// agentRun is one agent under the load: its fake runtime, its process
// (started again after the kill -9), the API side.
type agentRun struct {
	o       *Options
	kind    string
	node    string
	nodeIP  string
	kubelet string
	dir     string
	fakeEP  string
	nodeCfg string
	cs      kubernetes.Interface
	c       *clusterSim
	fake    *exec.Cmd
	fakeEnd chan struct{}
	a       *agent
	sysctls map[string]string // the upstream kubelet rewrites these at start: put back after
}

func runAgentLoad(ctx context.Context, o *Options, kind, node, nodeIP, kubelet string) (*AgentFigures, error) {
	f := &AgentFigures{Agent: kind, Node: node, LoadAvg1: machine().LoadAvg1, FileSystem: measureFileSystem(o.RootDir, o.Log)}
	admin, nodeCfg, err := clusterKubeconfigs(ctx, &Options{Kubeconfig: o.Kubeconfig, Log: o.Log}, node)
	if err != nil {
		return f, err
	}
	o.Kubeconfig = admin
	cs, err := loadClient(admin)
	if err != nil {
		return f, err
	}
	dir, err := againstDir(o.RootDir, kind)
	if err != nil {
		return f, err
	}
	ar := &agentRun{o: o, kind: kind, node: node, nodeIP: nodeIP, kubelet: kubelet, dir: dir,
		fakeEP: "unix://" + filepath.Join(dir, "fake-cri.sock"), nodeCfg: nodeCfg, cs: cs,
		c: &clusterSim{cs: cs, node: node, o: *o}, sysctls: readSysctls()}
	defer ar.close()
	if err := ar.c.prepare(ctx); err != nil {
		return f, err
	}
	if err := ar.startFake(ctx); err != nil {
		return f, err
	}
	if err := ar.start(ctx); err != nil {
		return f, err
	}
	f.Args = ar.a.args
	if err := ar.c.waitNodeReady(ctx, 2*time.Minute); err != nil {
		return f, err
	}
	ar.restoreSysctls()
	if err := ar.load(ctx, f); err != nil {
		return f, err
	}
	if o.NoRecovery {
		return f, nil
	}
	rec, err := ar.recovery(ctx)
	f.Recovery = rec
	return f, err
}

// startFake starts `actorlet-bench fake-cri` (Options.FakeCRI) on the
// run's socket.
func (ar *agentRun) startFake(ctx context.Context) error {
	path := strings.TrimPrefix(ar.fakeEP, "unix://")
	logf, err := os.Create(filepath.Join(ar.dir, "fake-cri.log"))
	if err != nil {
		return err
	}
	ar.fake = exec.Command(ar.o.FakeCRI, "fake-cri", "--listen", ar.fakeEP, "--calls-file", ar.callsFile())
	ar.fake.Stdout, ar.fake.Stderr = logf, logf
	ar.fake.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ar.fake.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start the fake CRI runtime: %w", err)
	}
	ar.fakeEnd = make(chan struct{})
	go func() { _ = ar.fake.Wait(); _ = logf.Close(); close(ar.fakeEnd) }()
	return ar.untilFake(ctx, 30*time.Second, "listen", func() bool {
		c, err := net.Dial("unix", path)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}

// untilFake polls done every 20 ms until it holds, the fake runtime
// exits (an error with its log), ctx ends or limit passes (an error
// saying the fake did not do what).
func (ar *agentRun) untilFake(ctx context.Context, limit time.Duration, what string, done func() bool) error {
	deadline := time.Now().Add(limit)
	for !done() {
		select {
		case <-ar.fakeEnd:
			b, _ := os.ReadFile(filepath.Join(ar.dir, "fake-cri.log"))
			return fmt.Errorf("the fake CRI runtime exited: %s", b)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the fake CRI runtime did not %s in %s", what, limit)
		}
	}
	return nil
}

// start starts the agent (again after a kill: same root dir and flags).
func (ar *agentRun) start(ctx context.Context) error {
	maxPods := max(ar.o.Pods, ar.o.RecoveryPods) + 10
	var a *agent
	var err error
	if ar.kind == AgentActorlet {
		a, err = startAgent(ctx, agentSpec{binary: ar.o.Binary, runtime: ar.fakeEP, maxPods: maxPods, node: ar.node,
			rootDir: filepath.Join(ar.dir, "root"), extra: append([]string{"--kubeconfig", ar.nodeCfg,
				"--kube-api-qps", strconv.Itoa(ar.o.APIQPS), "--kube-api-burst", strconv.Itoa(ar.o.APIBurst), "--node-ip", ar.nodeIP,
				// As the upstream kubelet's configuration (kubeletConfig): no
				// QoS cgroup tree against the fake runtime, which runs nothing.
				"--cgroups-per-qos=false", "--enforce-node-allocatable="}, ar.o.AgentArgs...)})
	} else {
		a, err = startKubelet(ctx, ar.kubelet, ar.dir, ar.fakeEP, ar.nodeCfg, ar.node, ar.nodeIP, maxPods, ar.o.APIQPS, ar.o.APIBurst)
	}
	if err != nil {
		return err
	}
	ar.a = a
	return nil
}

func (ar *agentRun) close() {
	ctx := context.Background()
	if ar.a != nil {
		ar.a.stop()
	}
	ar.c.cleanup(ctx)
	if ar.fake != nil && ar.fake.Process != nil {
		_ = ar.fake.Process.Signal(syscall.SIGTERM)
		select {
		case <-ar.fakeEnd:
		case <-time.After(10 * time.Second):
			_ = ar.fake.Process.Kill()
		}
	}
	ar.restoreSysctls()
	unmountUnder(ar.dir, ar.o)
	if !ar.o.KeepDir {
		_ = os.RemoveAll(ar.dir)
	} else {
		ar.o.Log.Info("kept", "agent", ar.kind, "dir", ar.dir)
	}
}

// heapProfile writes the agent's heap profile to HeapOut-<kind><moment>,
// after a GC if gc; without HeapOut it does nothing, and a failure is
// only logged.
func (ar *agentRun) heapProfile(ctx context.Context, moment string, gc bool) {
	o := ar.o
	if o.HeapOut == "" {
		return
	}
	url := ar.a.mainURL + "/debug/pprof/heap"
	if gc {
		url += "?gc=1"
	}
	if err := fetch(ctx, ar.a.client(0, 0), url, perAgent(o.HeapOut, ar.kind+moment)); err != nil {
		o.Log.Warn("heap profile failed", "agent", ar.kind, "moment", moment, "err", err)
	}
}

// apiServerProfileChunk is the length of each of the API server's CPU
// profiles apiServerProfile takes one after the other.
const apiServerProfileChunk = 2 * time.Second

// apiServerProfile takes kube-apiserver's CPU profile (its
// /debug/pprof/profile, read with the admin credentials) from now until
// filled is closed (every pod Ready), in profiles of
// apiServerProfileChunk one after the other (a profile cannot be cut
// short), written to ProfileOut-apiserver-<kind>-001, -002, ...: what the
// API server does for the agent's pods through the fill (their creation
// by the bench, the agent's token requests, status patches and events,
// the watches that carry them). `go tool pprof` reads them as one profile
// when given them all. A failure is only logged, and ends the profiling.
func (ar *agentRun) apiServerProfile(ctx context.Context, filled <-chan struct{}) {
	o := ar.o
	secs := strconv.Itoa(int(apiServerProfileChunk.Seconds()))
	for i := 1; ; i++ {
		select {
		case <-filled:
			o.Log.Info("API server cpu profiles written", "agent", ar.kind, "files", i-1,
				"pattern", perAgent(o.ProfileOut, "apiserver-"+ar.kind+"-*"))
			return
		case <-ctx.Done():
			return
		default:
		}
		raw, err := ar.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", secs).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(perAgent(o.ProfileOut, fmt.Sprintf("apiserver-%s-%03d", ar.kind, i)), raw, 0o644)
		}
		if err != nil {
			o.Log.Warn("API server cpu profile failed (is kube-apiserver's --profiling on? deploy/local/controlplane.sh up turns it on)", "agent", ar.kind, "err", err)
			return
		}
	}
}

// load creates o.Pods pods, waits until all are Ready, then deletes them
// and waits until all are gone.
func (ar *agentRun) load(ctx context.Context, f *AgentFigures) error {
	o := ar.o
	apf := &apfCounter{cs: ar.cs, node: ar.node}
	if err := apf.setup(ctx); err != nil {
		return err
	}
	defer apf.teardown(context.WithoutCancel(ctx))
	time.Sleep(500 * time.Millisecond) // the agent's informers synced
	atStart, err := apf.snapshot(ctx)
	if err != nil {
		return err
	}
	if ps, err := readProc(ar.a.pid); err == nil {
		f.RSSIdleBytes = ps.rss
	}
	mem := &MemoryFigures{Idle: readMemory(ctx, ar.a)}
	f.Memory = mem
	if ar.kind == AgentActorlet {
		// At rest, after a GC: the base of the after-deletion profile
		// (go tool pprof -diff_base FILE-actorlet-idle FILE-actorlet-after-delete).
		ar.heapProfile(ctx, "-idle", true)
	}
	s, stop := ar.observe(ctx, true)
	defer stop()
	s.samp.mu.Lock()
	cpu0 := s.samp.last.cpu
	s.samp.mu.Unlock()
	cp0 := controlPlaneCPU(o.Kubeconfig)
	cri0, crierr := ar.criCalls(ctx)
	specs := make([]podSpec, o.Pods)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("%s-%05d", ar.node, i), image: o.Image, noToken: o.NoToken}
	}
	o.Log.Info("creating pods through the API server", "agent", ar.kind, "pods", o.Pods, "node", ar.node)
	if o.ProfileCPU > 0 && o.ProfileOut != "" {
		go profileTo(ctx, ar.a, o.ProfileCPU, perAgent(o.ProfileOut, ar.kind), o)
	}
	var apiProfile sync.WaitGroup
	filled := make(chan struct{})
	if o.ProfileAPIServer {
		apiProfile.Go(func() { ar.apiServerProfile(ctx, filled) })
	}
	defer apiProfile.Wait()
	created, names, cerr := s.createAll(ctx, specs)
	lat, last := s.waitAll(ctx, created, o.Timeout)
	close(filled)
	if ps, err := readProc(ar.a.pid); err == nil {
		f.CPUToReadyPerPodMS = round((ps.cpu - cpu0) * 1000 / float64(o.Pods))
	}
	var afterReady sync.WaitGroup
	if o.ProfileAfterReady > 0 && o.ProfileOut != "" {
		afterReady.Go(func() {
			profileTo(ctx, ar.a, o.ProfileAfterReady, perAgent(o.ProfileOut, ar.kind+"-after-ready"), o)
		})
	}
	defer afterReady.Wait()
	mem.Ready = readMemory(ctx, ar.a)
	if crierr == nil {
		var cri map[string]float64
		if cri, crierr = ar.criCalls(ctx); crierr == nil {
			f.CRICallsPerPod = diffCounts(cri, cri0, float64(o.Pods))
		}
	}
	if crierr != nil {
		o.Log.Warn("CRI call counts failed", "agent", ar.kind, "err", crierr)
	}
	ar.heapProfile(ctx, "", false) // at its peak: every pod Ready
	f.Ready = len(lat)
	f.StartLatencyMS = Summarize(lat)
	if !last.IsZero() {
		f.CreateSeconds = round3(last.Sub(s.start).Seconds())
		f.CreatePodsPerSecond = round(float64(f.Ready) / f.CreateSeconds)
	}
	if atReady, err := apf.snapshot(ctx); err == nil {
		after := apf.settle(ctx, atReady, 2*time.Second, time.Minute)
		f.APIRequestsPerPod = diffCounts(after, atStart, float64(o.Pods))
		f.APIWritesPerPod = writes(f.APIRequestsPerPod)
		noEvents := map[string]float64{}
		for k, v := range f.APIRequestsPerPod {
			if !strings.HasSuffix(k, " events") {
				noEvents[k] = v
			}
		}
		f.APIWritesPerPodNoEvents = writes(noEvents)
	} else {
		o.Log.Warn("API request counts failed", "err", err)
	}
	if ps, err := readProc(ar.a.pid); err == nil {
		f.CPUSeconds = round3(ps.cpu - cpu0)
		f.CPUPerPodMS = round(f.CPUSeconds * 1000 / float64(o.Pods))
	}
	if cp0 >= 0 {
		if cp := controlPlaneCPU(o.Kubeconfig); cp >= 0 {
			f.ControlPlaneCPUPerPodMS = round((cp - cp0) * 1000 / float64(o.Pods))
		}
	}
	o.Log.Info("pods Ready", "agent", ar.kind, "ready", f.Ready, "seconds", f.CreateSeconds)
	if !last.IsZero() {
		mem.Steady, mem.SteadySettleSeconds = memorySteady(ctx, ar.a, last)
	}
	// Delete with the pods' grace period (1 s): the agent stops each pod
	// and confirms its deletion.
	t0 := time.Now()
	dl := ar.deleteAll(ctx, s, names, o.Timeout)
	f.Deleted = len(dl)
	f.DeleteLatencyMS = Summarize(dl)
	if d := time.Since(t0).Seconds(); f.Deleted > 0 {
		f.DeleteSeconds = round3(d)
		f.DeletePodsPerSecond = round(float64(f.Deleted) / d)
	}
	s.samp.finish(ctx)
	s.samp.mu.Lock()
	f.RSSPeakBytes = s.samp.peakRSS
	s.samp.mu.Unlock()
	if ar.kind == AgentActorlet && f.Deleted == len(names) {
		mem.AfterDelete, mem.AfterDeleteSettleSeconds = memoryAfterDelete(ctx, ar.a, time.Minute)
		ar.heapProfile(ctx, "-after-delete", true)
	}
	if cerr != nil {
		return fmt.Errorf("creating pods: %w", cerr)
	}
	if f.Ready < o.Pods {
		return fmt.Errorf("only %d of %d pods Ready", f.Ready, o.Pods)
	}
	if f.Deleted < len(names) {
		return fmt.Errorf("only %d of %d pods gone after their deletion", f.Deleted, len(names))
	}
	return nil
}

// observe starts a watch of the agent's pods and, withSampler, the sampler
// of its process; stop ends both.
func (ar *agentRun) observe(ctx context.Context, withSampler bool) (*session, func()) {
	s := &session{o: *ar.o, a: ar.a, target: apiTarget{cs: ar.cs, node: ar.node}, start: time.Now()}
	cctx, cancel := context.WithCancel(ctx)
	if withSampler {
		s.samp = startSampler(cctx, ar.a, s.start, 200*time.Millisecond)
	}
	s.obs = newObserver("", GoalReady, s.start, nil)
	s.wg.Add(1)
	go func() { defer s.wg.Done(); ar.c.watch(cctx, s.obs) }()
	return s, func() { cancel(); s.wg.Wait() }
}

// deleteAll deletes names with their grace period and returns each pod's
// time from its delete request to its disappearance from the API, in ms.
func (ar *agentRun) deleteAll(ctx context.Context, s *session, names []created, timeout time.Duration) []float64 {
	type gone struct {
		t0 time.Time
		ch <-chan time.Time
	}
	var mu sync.Mutex
	var gs []gone
	var wg sync.WaitGroup
	sem := make(chan struct{}, ar.o.Concurrency)
	for _, c := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ch := s.obs.markDeleted(c.name)
			t0 := time.Now()
			err := ar.cs.CoreV1().Pods(Namespace).Delete(ctx, c.name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				ar.o.Log.Warn("delete pod", "pod", c.name, "err", err)
				return
			}
			mu.Lock()
			gs = append(gs, gone{t0, ch})
			mu.Unlock()
		}()
	}
	wg.Wait()
	deadline := time.After(timeout)
	var out []float64
	for _, g := range gs {
		select {
		case t := <-g.ch:
			out = append(out, float64(t.Sub(g.t0))/float64(time.Millisecond))
		case <-deadline:
			return out
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// recovery: RecoveryPods pods Ready, the agent killed with SIGKILL and
// started again; see Recovery.
func (ar *agentRun) recovery(ctx context.Context) (*Recovery, error) {
	o := ar.o
	rec := &Recovery{Pods: o.RecoveryPods, SettleSeconds: recoverySettle.Seconds()}
	s, stop := ar.observe(ctx, false)
	defer stop()
	specs := make([]podSpec, o.RecoveryPods)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("%s-rec-%05d", ar.node, i), image: o.Image, noToken: o.NoToken}
	}
	o.Log.Info("recovery: creating pods", "agent", ar.kind, "pods", o.RecoveryPods)
	created, names, err := s.createAll(ctx, specs)
	if err != nil {
		return rec, fmt.Errorf("recovery: creating pods: %w", err)
	}
	if lat, _ := s.waitAll(ctx, created, o.Timeout); len(lat) < len(created) {
		return rec, fmt.Errorf("recovery: only %d of %d pods Ready before the kill", len(lat), len(created))
	}
	time.Sleep(2 * time.Second) // trailing status writes
	rt, err := cri.Dial(ctx, ar.fakeEP, time.Minute)
	if err != nil {
		return rec, fmt.Errorf("recovery: dial the fake runtime: %w", err)
	}
	defer func() { _ = rt.Close() }()
	sbBefore, ctrBefore, err := runtimeIDs(ctx, rt)
	if err != nil {
		return rec, err
	}
	flaps0 := s.obs.readyFlaps()
	o.Log.Info("recovery: kill -9", "agent", ar.kind, "pid", ar.a.pid)
	tKill := time.Now()
	ar.a.kill()
	if err := ar.start(ctx); err != nil {
		return rec, fmt.Errorf("recovery: start again: %w", err)
	}
	rec.HealthySeconds = round3(time.Since(tKill).Seconds())
	deadline := time.Now().Add(o.Timeout)
	for {
		if ar.recovered(ctx, s, names, tKill) {
			rec.Recovered = true
			rec.Seconds = round3(time.Since(tKill).Seconds())
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return rec, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	ar.restoreSysctls()
	select {
	case <-ctx.Done():
	case <-time.After(recoverySettle):
	}
	rec.ReadyFlaps = s.obs.readyFlaps() - flaps0
	sbAfter, ctrAfter, err := runtimeIDs(ctx, rt)
	if err != nil {
		return rec, err
	}
	for id := range sbAfter {
		if !sbBefore[id] {
			rec.DuplicateSandboxes++
		}
	}
	for id := range ctrAfter {
		if !ctrBefore[id] {
			rec.ContainerRestarts++
		}
	}
	for _, p := range s.obs.listed() {
		for _, c := range p.Status.ContainerStatuses {
			rec.RestartCount += int(c.RestartCount)
		}
	}
	o.Log.Info("recovery", "agent", ar.kind, "recovered", rec.Recovered, "seconds", rec.Seconds,
		"container_restarts", rec.ContainerRestarts, "duplicate_sandboxes", rec.DuplicateSandboxes, "ready_flaps", rec.ReadyFlaps)
	ar.deleteAll(ctx, s, names, o.Timeout)
	if !rec.Recovered {
		return rec, fmt.Errorf("recovery: not recovered %s after the kill", o.Timeout)
	}
	return rec, nil
}

// recovered: the restarted agent renewed its Lease, counts every pod
// running, and every pod is Ready in the API.
func (ar *agentRun) recovered(ctx context.Context, s *session, names []created, tKill time.Time) bool {
	l, err := ar.cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, ar.node, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(tKill) {
		return false
	}
	ms, err := ar.a.scrapeMetrics(ctx)
	if err != nil || ms.runningPods < float64(len(names)) {
		return false
	}
	listed := s.obs.listed()
	for _, c := range names {
		p, ok := listed[c.name]
		if !ok || !reached(&p, GoalReady) {
			return false
		}
	}
	return true
}

// runtimeIDs lists the ids of every sandbox and container in the runtime.
func runtimeIDs(ctx context.Context, rt *cri.Client) (sandboxes, containers map[string]bool, err error) {
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return nil, nil, fmt.Errorf("list sandboxes in the fake runtime: %w", err)
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers in the fake runtime: %w", err)
	}
	sandboxes, containers = map[string]bool{}, map[string]bool{}
	for _, sb := range sbs {
		sandboxes[sb.Id] = true
	}
	for _, c := range ctrs {
		containers[c.Id] = true
	}
	return sandboxes, containers, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (a *agent) kill() {
	if a.cmd == nil || a.exited() {
		return
	}
	_ = a.cmd.Process.Kill()
	<-a.done
}

// kubeletConfig is the upstream kubelet's configuration in the bench: its
// defaults but the API limits (upstream's own, written out, as actorlet's
// flags), what a cgroup v1 host without systemd needs (cgroupfs, no QoS
// cgroups, no node allocatable enforcement, swap and cgroup v1 allowed),
// ports on loopback and the node API open to the bench (anonymous,
// AlwaysAllow) for /metrics.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
kubeAPIQPS: %d
kubeAPIBurst: %d
maxPods: %d
podLogsDir: %s
containerRuntimeEndpoint: %s
`

// startKubelet starts the upstream kubelet in dir (its config, root dir,
// certificates and log) and waits for its /healthz.
func startKubelet(ctx context.Context, binary, dir, runtimeEP, kubeconfig, node, nodeIP string, maxPods, qps, burst int) (*agent, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	hz, err := freePort()
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "kubelet-config.yaml")
	cfg := fmt.Sprintf(kubeletConfig, port, hz, qps, burst, maxPods, filepath.Join(dir, "pods"), runtimeEP)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	a := &agent{
		mainURL: fmt.Sprintf("https://127.0.0.1:%d", port),
		hzURL:   fmt.Sprintf("http://127.0.0.1:%d", hz),
		rootDir: filepath.Join(dir, "root"),
		logPath: filepath.Join(dir, "kubelet.log"),
		cri:     runtimeEP,
		// The kubelet's self-signed serving certificate: measured, not trusted.
		tls: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // loopback, the bench's own kubelet
	}
	a.roURL = a.mainURL
	a.args = []string{"--config", cfgPath, "--kubeconfig", kubeconfig, "--root-dir", a.rootDir,
		"--cert-dir", filepath.Join(dir, "pki"), "--hostname-override", node, "--node-ip", nodeIP}
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// An empty working directory of its own: the fake runtime reports no
	// log path, and the kubelet's log manager removes what the glob
	// "<log path>*" matches when it removes a container, so "*": every
	// file in its working directory.
	cwd := filepath.Join(dir, "kubelet-cwd")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		_ = logf.Close()
		return nil, err
	}
	a.cmd = exec.Command(binary, a.args...)
	a.cmd.Dir = cwd
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	a.pid = a.cmd.Process.Pid
	a.done = make(chan struct{})
	go func() { _ = a.cmd.Wait(); _ = logf.Close(); close(a.done) }()
	if err := a.waitHealthy(ctx, 60*time.Second); err != nil {
		a.stop()
		return nil, fmt.Errorf("the upstream kubelet: %w", err)
	}
	return a, nil
}

// unmountUnder detaches every mount at or under dir, deepest first: the
// upstream kubelet bind-mounts its root dir onto itself (shared
// propagation) and mounts pods' secret and projected volumes (tmpfs)
// under it; they outlive a killed kubelet.
func unmountUnder(dir string, o *Options) {
	points, err := mountinfo.PointsUnder(mountinfo.Self, dir)
	if err != nil {
		return
	}
	for _, p := range points { // deepest first; a point mounted twice is detached twice
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			o.Log.Warn("unmount what the kubelet left", "path", p, "err", err)
		}
	}
}

// kubeletSysctls are what the upstream kubelet sets at start
// (protectKernelDefaults false, its default); the bench puts the host's
// values back.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func readSysctls() map[string]string {
	out := map[string]string{}
	for _, k := range kubeletSysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			out[k] = strings.TrimSpace(string(b))
		}
	}
	return out
}

func (ar *agentRun) restoreSysctls() {
	if ar.kind != AgentUpstream {
		return
	}
	for k, v := range ar.sysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(b)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				ar.o.Log.Warn("put back a sysctl the kubelet changed", "key", k, "value", v, "err", err)
			}
		}
	}
}

// summary is the one-line comparison.
func (a *Against) summary() string {
	if a.Actorlet == nil || a.Upstream == nil {
		return "incomplete"
	}
	x, u := a.Actorlet, a.Upstream
	rec := func(r *Recovery) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%.1fs (restarts %d, duplicates %d, flaps %d)", r.Seconds, r.ContainerRestarts, r.DuplicateSandboxes, r.ReadyFlaps)
	}
	return fmt.Sprintf("actorlet vs upstream: create %.1f vs %.1f pods/s, delete %.1f vs %.1f pods/s, p50 %.0f vs %.0f ms, p99 %.0f vs %.0f ms, RSS peak %.0f vs %.0f MiB, CPU %.1f vs %.1f ms/pod, API writes %.2f vs %.2f per pod (without events %.2f vs %.2f), recovery %s vs %s",
		x.CreatePodsPerSecond, u.CreatePodsPerSecond, x.DeletePodsPerSecond, u.DeletePodsPerSecond,
		x.StartLatencyMS.P50, u.StartLatencyMS.P50, x.StartLatencyMS.P99, u.StartLatencyMS.P99,
		float64(x.RSSPeakBytes)/(1<<20), float64(u.RSSPeakBytes)/(1<<20), x.CPUPerPodMS, u.CPUPerPodMS,
		x.APIWritesPerPod, u.APIWritesPerPod, x.APIWritesPerPodNoEvents, u.APIWritesPerPodNoEvents, rec(x.Recovery), rec(u.Recovery))
}

// Markdown is the comparison as a table for docs/BENCHMARKS.md; jsonLink,
// when set, is where the JSON result is, relative to the document.
func (a *Against) Markdown(r *Result, jsonLink string) string {
	if a.Actorlet == nil || a.Upstream == nil {
		return ""
	}
	x, u := a.Actorlet, a.Upstream
	var b strings.Builder
	row := func(name, uv, xv, ratio string) { fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, uv, xv, ratio) }
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	ratio := func(k string) string {
		if v, ok := a.Ratios[k]; ok {
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
		return "-"
	}
	sec := func(ms float64) string { return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s" }
	mib := func(v uint64) string { return strconv.FormatFloat(float64(v)/(1<<20), 'f', 0, 64) + " MiB" }
	fmt.Fprintf(&b, "%d pods, %s, %d CPUs, client QPS %d / burst %d; 1-minute load average at the start of each agent's run: upstream %.2f, actorlet %.2f.",
		r.Pods, r.StartedAt.Format("2006-01-02 15:04 UTC"), r.Machine.CPUs, a.APIQPS, a.APIBurst, u.LoadAvg1, x.LoadAvg1)
	if u.FileSystem != nil && x.FileSystem != nil {
		fmt.Fprintf(&b, " CPU per inode made on the agents' file system (%s) at the start of each run: upstream %.0f us, actorlet %.0f us.",
			x.FileSystem.Type, u.FileSystem.InodeCPUMicros, x.FileSystem.InodeCPUMicros)
	}
	if a.NoToken {
		b.WriteString(" Pods without a service account token.")
	}
	if len(a.Rounds) > 1 {
		fmt.Fprintf(&b, " Medians of %d rounds in alternating order (%s).", len(a.Rounds), strings.Join(a.Order, ", "))
	}
	if jsonLink != "" {
		fmt.Fprintf(&b, " JSON: [%s](%s).", filepath.Base(jsonLink), jsonLink)
	}
	b.WriteString("\n\n")
	row("", "upstream kubelet "+a.KubeletVersion, "actorlet", "actorlet / upstream")
	b.WriteString("|---|---|---|---|\n")
	row("pods Ready", fmt.Sprintf("%d/%d in %.1f s", u.Ready, r.Pods, u.CreateSeconds), fmt.Sprintf("%d/%d in %.1f s", x.Ready, r.Pods, x.CreateSeconds), "")
	row("create throughput (pods/s)", num(u.CreatePodsPerSecond), num(x.CreatePodsPerSecond), ratio("create_pods_per_second"))
	row("delete throughput (pods/s)", num(u.DeletePodsPerSecond), num(x.DeletePodsPerSecond), ratio("delete_pods_per_second"))
	row("start latency p50", sec(u.StartLatencyMS.P50), sec(x.StartLatencyMS.P50), ratio("start_p50"))
	row("start latency p90", sec(u.StartLatencyMS.P90), sec(x.StartLatencyMS.P90), ratio("start_p90"))
	row("start latency p99", sec(u.StartLatencyMS.P99), sec(x.StartLatencyMS.P99), ratio("start_p99"))
	row("RSS peak", mib(u.RSSPeakBytes), mib(x.RSSPeakBytes), ratio("rss_peak"))
	if u.Memory != nil && x.Memory != nil && u.Memory.Steady.RSSBytes > 0 && x.Memory.Steady.RSSBytes > 0 {
		row(fmt.Sprintf("RSS idle / all running (+%.0f s)", x.Memory.SteadySettleSeconds),
			mib(u.Memory.Idle.RSSBytes)+" / "+mib(u.Memory.Steady.RSSBytes), mib(x.Memory.Idle.RSSBytes)+" / "+mib(x.Memory.Steady.RSSBytes), ratio("rss_steady"))
	}
	if x.Memory != nil && x.Memory.AfterDelete.RSSBytes > 0 {
		row(fmt.Sprintf("RSS after every pod deleted (+%.0f s)", x.Memory.AfterDeleteSettleSeconds), "", mib(x.Memory.AfterDelete.RSSBytes), "")
	}
	row("CPU per pod", num(u.CPUPerPodMS)+" ms", num(x.CPUPerPodMS)+" ms", ratio("cpu_per_pod"))
	if u.CPUToReadyPerPodMS > 0 && x.CPUToReadyPerPodMS > 0 {
		row("CPU per pod until the last Ready", num(u.CPUToReadyPerPodMS)+" ms", num(x.CPUToReadyPerPodMS)+" ms", ratio("cpu_to_ready_per_pod"))
	}
	if u.ControlPlaneCPUPerPodMS > 0 && x.ControlPlaneCPUPerPodMS > 0 {
		row("kube-apiserver + etcd CPU per pod", num(u.ControlPlaneCPUPerPodMS)+" ms", num(x.ControlPlaneCPUPerPodMS)+" ms", ratio("control_plane_cpu_per_pod"))
	}
	row("API writes per pod", fmt.Sprintf("%.2f", u.APIWritesPerPod), fmt.Sprintf("%.2f", x.APIWritesPerPod), ratio("api_writes_per_pod"))
	row("API writes per pod without events", fmt.Sprintf("%.2f", u.APIWritesPerPodNoEvents), fmt.Sprintf("%.2f", x.APIWritesPerPodNoEvents), ratio("api_writes_per_pod_excluding_events"))
	if u.Recovery != nil && x.Recovery != nil {
		rec := func(r *Recovery) string {
			if !r.Recovered {
				return "not recovered"
			}
			return fmt.Sprintf("%.2f s (healthy %.2f s)", r.Seconds, r.HealthySeconds)
		}
		row(fmt.Sprintf("kill -9 with %d pods: back, all Ready", u.Recovery.Pods), rec(u.Recovery), rec(x.Recovery), ratio("recovery_seconds"))
		harm := func(r *Recovery) string {
			return fmt.Sprintf("%d / %d / %d", r.ContainerRestarts, r.DuplicateSandboxes, r.ReadyFlaps)
		}
		row("kill -9: restarts / duplicate sandboxes / Ready flaps", harm(u.Recovery), harm(x.Recovery), "")
	}
	return b.String()
}

// controlPlaneCPU is the CPU seconds kube-apiserver and etcd have used,
// from the pid files deploy/local/controlplane.sh keeps beside the admin
// kubeconfig; -1 when they are not there (another control plane).
func controlPlaneCPU(admin string) float64 {
	total := 0.0
	for _, name := range []string{"kube-apiserver.pid", "etcd.pid"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(admin), name))
		if err != nil {
			return -1
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return -1
		}
		ps, err := readProc(pid)
		if err != nil {
			return -1
		}
		total += ps.cpu
	}
	return total
}

// homeRelative writes a path under the user's home as ~/...: the JSON
// goes into the repository's docs and names no one's machine.
func homeRelative(path string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return path
	}
	if rest, ok := strings.CutPrefix(path, home+"/"); ok {
		return "~/" + rest
	}
	return path
}

// perAgent is path with "-<agent>" before its extension.
func perAgent(path, kind string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + kind + ext
}

// MarkdownTag names the run's table in docs/BENCHMARKS.md:
// against-upstream-<pods>, with -qps<N> when the client QPS is not
// upstream's 50 and -notoken for pods without a token.
func (a *Against) MarkdownTag(pods int) string {
	tag := fmt.Sprintf("against-upstream-%d", pods)
	if a.APIQPS != 0 && a.APIQPS != upstreamAPIQPS {
		tag += fmt.Sprintf("-qps%d", a.APIQPS)
	}
	if a.NoToken {
		tag += "-notoken"
	}
	return tag
}

// WriteMarkdown replaces the text between "<!-- tag -->" and
// "<!-- /tag -->" in the file path with text.
func WriteMarkdown(path, tag, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--markdown: %w", err)
	}
	open, end := "<!-- "+tag+" -->\n", "<!-- /"+tag+" -->"
	s := string(b)
	i := strings.Index(s, open)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("--markdown %s: no %q ... %q markers", path, strings.TrimSpace(open), end)
	}
	s = s[:i+len(open)] + text + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// againstDir makes the directory of one agent's run against upstream (its
// root, its fake runtime's socket and logs) under parent, the bench's
// --root-dir, or the system's temporary directory when parent is "": each
// agent gets its own, so the two never share a pod directory.
func againstDir(parent, kind string) (string, error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", fmt.Errorf("--root-dir: %w", err)
		}
	}
	return os.MkdirTemp(parent, "actorlet-against-"+kind+"-")
}

// FakeCRICalls is what `actorlet-bench fake-cri --calls-file` writes at each
// SIGUSR1: the CRI calls it served so far by method, and how many signals
// it answered (Seq).
type FakeCRICalls struct {
	Seq   int            `json:"seq"`
	Calls map[string]int `json:"calls"`
}

func (ar *agentRun) callsFile() string { return filepath.Join(ar.dir, "cri-calls.json") }

// criCalls asks the fake runtime for its call counts (SIGUSR1) and waits,
// at most 10 s, for the answer that follows the last one read.
func (ar *agentRun) criCalls(ctx context.Context) (map[string]float64, error) {
	if ar.fake == nil || ar.fake.Process == nil {
		return nil, errors.New("no fake CRI runtime")
	}
	last := 0
	if c, err := readFakeCRICalls(ar.callsFile()); err == nil {
		last = c.Seq
	}
	if err := ar.fake.Process.Signal(syscall.SIGUSR1); err != nil {
		return nil, fmt.Errorf("ask the fake CRI runtime for its calls: %w", err)
	}
	var c FakeCRICalls
	err := ar.untilFake(ctx, 10*time.Second, "write its calls", func() bool {
		var err error
		c, err = readFakeCRICalls(ar.callsFile())
		return err == nil && c.Seq > last
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(c.Calls))
	for k, v := range c.Calls {
		out[k] = float64(v)
	}
	return out, nil
}

func readFakeCRICalls(path string) (FakeCRICalls, error) {
	var c FakeCRICalls
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}
