package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/actorlet/actorlet/adapters/cri"
)

// Scenarios.
const (
	ScenarioStandaloneSim = "standalone-sim"
	ScenarioContainerd    = "containerd"
	ScenarioChurn         = "churn"
	ScenarioChaos         = "chaos"
	ScenarioProbes        = "probes"
	ScenarioClusterSim    = "cluster-sim"
	ScenarioSoak          = "soak"
)

// Scenarios lists every scenario name.
var Scenarios = []string{ScenarioStandaloneSim, ScenarioContainerd, ScenarioChurn, ScenarioChaos, ScenarioProbes, ScenarioClusterSim, ScenarioSoak}

// Pod sources of the standalone scenarios.
const (
	SourcePush = "push" // POST /pods
	SourceFile = "file" // manifests written to --pod-manifest-path
)

// ErrNotYet is returned for scenarios that need what this actorlet does not
// have yet (cluster mode, exec probes).
var ErrNotYet = errors.New("not available in this actorlet yet")

// Options configure one run.
type Options struct {
	Scenario string
	Pods     int
	// Duration of the load in churn, chaos and probes.
	Duration time.Duration
	// Concurrency is the number of parallel callers creating pods
	// (default 50, as the upstream measurements in docs/BENCHMARKS.md).
	Concurrency int
	// Source is SourcePush (default) or SourceFile.
	Source string
	// Binary is the actorlet binary to start (default: the actorlet in
	// the directory of the running executable, actorlet-bench's, else the
	// actorlet on PATH; see DefaultAgent).
	Binary string
	// FakeCRI is the binary whose `fake-cri` subcommand serves upstream's
	// fake CRI runtime for --against upstream (default os.Executable():
	// actorlet-bench itself).
	FakeCRI string
	// Endpoint, when set, is the main URL of an actorlet already running
	// (no process is started); AgentPID lets RSS and CPU be read, and
	// RuntimeEndpoint lets checks go through its CRI runtime.
	Endpoint string
	AgentPID int
	// RuntimeEndpoint is the CRI endpoint for the containerd scenario
	// (default: `deploy/local/containerd.sh up`), or of an external agent.
	RuntimeEndpoint string
	// Image for the pods (default localhost/actorlet/busybox:1).
	Image string
	// Sim holds the sim:// query for sim scenarios ("start-latency=50ms").
	Sim string
	// ChaosKillRate in crashes per second (chaos, default 20).
	ChaosKillRate float64
	ChaosSeed     int64
	// ChurnRate paces churn, chaos and soak: pods replaced per second
	// (0: every caller as fast as it goes; soak's default is 5).
	ChurnRate float64
	// SampleEvery is soak's sampling interval (default 10 s).
	SampleEvery time.Duration
	// Timeout bounds the wait for the goal (default 10 min).
	Timeout time.Duration
	// RootDir for the agent (default a temp dir, removed unless KeepDir).
	RootDir string
	KeepDir bool
	// AgentArgs are extra flags for the agent.
	AgentArgs []string
	// Kubeconfig is cluster-sim's admin kubeconfig (pods are created and
	// watched, and the API server's /metrics read, with it), and
	// NodeKubeconfig the agent's (system:node:<Node>). Without them
	// deploy/local/controlplane.sh brings up the local control plane and
	// makes the node's.
	Kubeconfig     string
	NodeKubeconfig string
	// Node is the agent's --hostname-override (default bench-node).
	Node string
	// Log receives progress; default discards.
	Log *slog.Logger
	// ProfileCPU, when > 0, fetches a CPU profile of that length from the
	// agent's /debug/pprof/profile while pods start, into ProfileOut.
	ProfileCPU time.Duration
	ProfileOut string
	// ProfileAfterReady (--against upstream), when > 0 with ProfileOut,
	// also fetches a CPU profile of that length from each agent once its
	// last pod is Ready, into ProfileOut-<agent>-after-ready: what it does
	// while the events drain and at rest, the part of CPU per pod that
	// CPU per pod until the last Ready leaves out.
	ProfileAfterReady time.Duration
	// ProfileAPIServer (--against upstream) also profiles kube-apiserver's
	// CPU from each agent's first pod create to its last pod Ready, in
	// 2 s profiles into ProfileOut-apiserver-<agent>-NNN.
	ProfileAPIServer bool
	// HeapOut, when set, receives the agent's heap profile
	// (/debug/pprof/heap) at the end of the run, before it stops.
	HeapOut string
	// Against "upstream" is the scenario against-upstream (upstream.go):
	// the load on actorlet, then on the upstream kubelet (Kubelet, default
	// deploy/local/kubelet.sh build's), with RecoveryPods pods (default
	// 200) for the kill -9 recovery, on the node IP NodeIP (default the
	// host's first non-loopback IPv4 address).
	Against      string
	Kubelet      string
	RecoveryPods int
	NodeIP       string
	// Rounds of the comparison (default 1), in alternating order.
	Rounds int
	// APIQPS and APIBurst are both agents' client limits in --against
	// upstream (default upstream's 50 and 100; the unthrottled
	// runs use 1000 and 2000).
	APIQPS   int
	APIBurst int
	// NoToken creates the pods with automountServiceAccountToken: false
	// (cluster-sim and --against upstream): no projected token volume, so
	// no TokenRequest per pod.
	NoToken bool
	// Only runs one agent of --against upstream (AgentActorlet or
	// AgentUpstream): its figures, no ratios.
	Only string
	// NoRecovery skips the kill -9 recovery of --against upstream.
	NoRecovery bool
	// GOMAXPROCS, when > 0, is the bench's own GOMAXPROCS for the run and
	// the agent's (in its environment), so a scaling curve gives the
	// driver and the agent the same number of cores.
	GOMAXPROCS int
	// MutexOut and BlockOut, when set, receive the agent's mutex and
	// block profiles (/debug/pprof/mutex, /debug/pprof/block) at the end
	// of the run: where its goroutines waited on locks and channels. An
	// agent the bench starts gets --contention-profiling for them; one
	// given by Endpoint needs it (or its profiles are empty).
	MutexOut string
	BlockOut string
	// AfterDelete (standalone-sim): once every pod runs, delete them all
	// and read the agent's memory idle, Ready and after the deletion into
	// Result.Memory (afterdelete.go).
	AfterDelete bool
	// The resize scenario (resize.go): the agent (AgentActorlet, default,
	// or AgentUpstream), the runtime (ResizeRuntimeSim, default, or
	// ResizeRuntimeContainerd), resizes per pod (default 2) and how long
	// one may take (default 1 min).
	ResizeAgent   string
	ResizeRuntime string
	ResizeRounds  int
	ResizeTimeout time.Duration
}

func (o *Options) defaults() error {
	switch {
	case o.Against == "":
	case o.Against != AgainstUpstream:
		return fmt.Errorf("--against %q: want upstream", o.Against)
	case o.Scenario != "" && o.Scenario != ScenarioAgainstUpstream:
		return fmt.Errorf("--against upstream is a scenario of its own: not with --scenario %s", o.Scenario)
	default:
		o.Scenario = ScenarioAgainstUpstream
	}
	if o.Scenario == "" {
		return errors.New("--scenario is required (one of " + strings.Join(Scenarios, ", ") + ")")
	}
	if !slices.Contains(Scenarios, o.Scenario) {
		return fmt.Errorf("unknown scenario %q (one of %s)", o.Scenario, strings.Join(Scenarios, ", "))
	}
	o.stormDefaults() // storm.go
	if o.Pods <= 0 {
		switch o.Scenario {
		case ScenarioContainerd:
			o.Pods = 50
		case ScenarioChurn, ScenarioChaos, ScenarioProbes:
			o.Pods = 100
		case ScenarioSoak:
			o.Pods = soakDefaultPods
		case ScenarioEviction:
			o.Pods = evictionDefaultRounds
		case ScenarioEvictionDensity:
			o.Pods = evictionDensityDefaultPods
		case ScenarioStats:
			o.Pods = statsDefaultPods
		case ScenarioAgainstUpstream:
			o.Pods = 100
		case ScenarioResize:
			o.Pods = resizeDefaultPods
		default:
			o.Pods = 1000
		}
	}
	if o.GOMAXPROCS < 0 {
		return fmt.Errorf("--gomaxprocs must not be negative, got %d", o.GOMAXPROCS)
	}
	if o.Rounds < 0 {
		return fmt.Errorf("--rounds must not be negative, got %d", o.Rounds)
	}
	if o.ChurnRate < 0 {
		return fmt.Errorf("--churn-rate must not be negative, got %g", o.ChurnRate)
	}
	if o.Scenario == ScenarioSoak {
		if o.Duration <= 0 {
			o.Duration = time.Hour
		}
		if o.ChurnRate == 0 {
			o.ChurnRate = soakDefaultChurnRate
		}
		if o.ChaosKillRate <= 0 {
			o.ChaosKillRate = soakDefaultKillRate
		}
		if o.SampleEvery <= 0 {
			o.SampleEvery = soakDefaultSampleEvery
		}
	}
	if o.Scenario == ScenarioResize {
		if err := o.resizeDefaults(); err != nil {
			return err
		}
	} else if o.ResizeAgent != "" || o.ResizeRuntime != "" || o.ResizeRounds != 0 || o.ResizeTimeout != 0 {
		return fmt.Errorf("--resize-agent, --resize-runtime, --resize-rounds and --resize-timeout are for --scenario %s", ScenarioResize)
	}
	if o.Scenario == ScenarioStats && o.Duration <= 0 {
		o.Duration = statsDefaultIdle
	}
	if o.Duration <= 0 {
		o.Duration = 30 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 50
	}
	if o.Source == "" {
		o.Source = SourcePush
	}
	if o.Source != SourcePush && o.Source != SourceFile {
		return fmt.Errorf("--source %q: want push or file", o.Source)
	}
	if o.Source == SourceFile && o.Scenario != ScenarioStandaloneSim && o.Scenario != ScenarioContainerd {
		return fmt.Errorf("--source file: only for %s and %s", ScenarioStandaloneSim, ScenarioContainerd)
	}
	if o.Image == "" {
		o.Image = "localhost/actorlet/busybox:1"
	}
	if o.ChaosKillRate <= 0 {
		o.ChaosKillRate = 20
	}
	if o.ChaosSeed == 0 {
		o.ChaosSeed = 42
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Binary == "" && o.Endpoint == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the actorlet binary: %w", err)
		}
		if o.Binary, err = DefaultAgent(exe); err != nil {
			return err
		}
	}
	if o.FakeCRI == "" && o.Against != "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the fake CRI binary (actorlet-bench): %w", err)
		}
		o.FakeCRI = exe
	}
	return nil
}

// DefaultAgent is the actorlet binary the bench starts when none is named:
// the actorlet beside self (the bench's own executable; make bench builds
// both into bin/), else the actorlet on PATH, else an error that says how
// to get one.
func DefaultAgent(self string) (string, error) {
	beside := filepath.Join(filepath.Dir(self), "actorlet")
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return beside, nil
	}
	if p, err := exec.LookPath("actorlet"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no actorlet binary to start: none at %s and none on PATH "+
		"(make bench builds bin/actorlet beside bin/actorlet-bench; or name one with --actorlet)", beside)
}

// Run runs one scenario and returns its result. A run that starts but
// misses its goal returns the partial result and an error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.GOMAXPROCS > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.GOMAXPROCS))
	}
	r := &Result{Scenario: o.Scenario, Pods: o.Pods, Goal: GoalRunning, Concurrency: o.Concurrency,
		Source: o.Source, Machine: machine(), StartedAt: time.Now().UTC().Truncate(time.Second)}
	if o.Endpoint == "" && o.Against == "" {
		// Against upstream, each agent's figures carry their own, taken
		// just before its run.
		r.FileSystem = measureFileSystem(o.RootDir, o.Log)
	}
	var err error
	switch o.Scenario {
	case ScenarioStandaloneSim:
		err = runStart(ctx, o, r, "sim://"+simQuery(sizedSim(o.Sim, o.Pods)))
	case ScenarioContainerd:
		var ep string
		ep, err = containerdEndpoint(ctx, &o)
		if err == nil {
			err = runStart(ctx, o, r, ep)
		}
	case ScenarioChurn:
		err = runChurn(ctx, o, r, churnMode{})
	case ScenarioChaos:
		err = runChurn(ctx, o, r, churnMode{chaos: true})
	case ScenarioSoak:
		err = runChurn(ctx, o, r, churnMode{chaos: true, soak: true})
		thinSoak(r)
	case ScenarioProbes:
		err = runProbes(ctx, o, r)
	case ScenarioClusterSim:
		err = runClusterSim(ctx, o, r)
	case ScenarioEviction:
		err = runEviction(ctx, o, r, o.Pods, 0)
	case ScenarioEvictionDensity:
		err = runEviction(ctx, o, r, evictionDensityRounds, o.Pods)
	case ScenarioStats:
		err = runStats(ctx, o, r)
	case ScenarioAgainstUpstream:
		err = runAgainstUpstream(ctx, o, r)
	case ScenarioStatusStorm:
		err = runStatusStorm(ctx, o, r)
	case ScenarioResize:
		err = runResize(ctx, o, r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r, err
}

// sizedSim gives the simulated node room for pods (unless q sets
// node-memory): the sim accounts ~4.5 MiB per running pod, so its default
// 16 GiB node is full at ~3,600 pods, and the eviction manager would evict
// pods of a start benchmark, one of which the bench may never see Running.
func sizedSim(q string, pods int) string {
	v, err := url.ParseQuery(strings.TrimPrefix(q, "?"))
	if err != nil || v.Has("node-memory") {
		return q
	}
	const perPod, base = 8 << 20, 16 << 30
	mem := fmt.Sprintf("node-memory=%d", base+int64(pods)*perPod)
	if strings.TrimPrefix(q, "?") == "" {
		return mem
	}
	return strings.TrimPrefix(q, "?") + "&" + mem
}

func simQuery(q string) string {
	if q == "" {
		return ""
	}
	return "?" + strings.TrimPrefix(q, "?")
}

// benchNode is the agent's --hostname-override.
const benchNode = "bench-node"

// session is one agent under load: its process, the sampler, the observer.
type session struct {
	o       Options
	a       *agent
	started bool // we started the agent
	tmp     string
	start   time.Time
	samp    *sampler
	obs     *observer
	idleRSS uint64
	cpu0    float64 // agent CPU seconds when the load started
	target  podTarget
	push    *pushClient // nil unless the target is the push API
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// sessionConfig says how a session drives its agent. The zero target and
// feed mean the node API: pods pushed (or written as manifests) and /pods
// polled.
type sessionConfig struct {
	runtime string // --container-runtime-endpoint
	goal    string
	extra   []string // agent flags
	maxPods int      // 0: pods + concurrency
	node    string   // --hostname-override; "" is benchNode
	// ready, when set, is waited for after the agent is healthy and
	// before the clock starts (cluster: the Node is Ready).
	ready func(ctx context.Context) error
	// target creates and removes pods (cluster: the API server).
	target podTarget
	// feed, when set, replaces /pods polling: it calls the observer until
	// ctx is done (cluster: a watch on the API server).
	feed func(ctx context.Context, obs *observer)
	// pollEvery, when set, is the shortest interval between /pods polls
	// (default 20 ms).
	pollEvery time.Duration
}

// open starts the agent (or connects to the user's) and the instruments.
func open(ctx context.Context, o Options, runtimeEndpoint, goal string, extra ...string) (*session, error) {
	return openWith(ctx, o, sessionConfig{runtime: runtimeEndpoint, goal: goal, extra: extra})
}

func openWith(ctx context.Context, o Options, cfg sessionConfig) (*session, error) {
	runtimeEndpoint, goal, extra := cfg.runtime, cfg.goal, cfg.extra
	if cfg.maxPods <= 0 {
		cfg.maxPods = o.Pods + o.Concurrency
	}
	if cfg.node == "" {
		cfg.node = benchNode
	}
	s := &session{o: o}
	if o.Endpoint != "" {
		s.a = externalAgent(o.Endpoint, o.AgentPID, o.RuntimeEndpoint)
	} else {
		root := o.RootDir
		if root == "" {
			var err error
			if root, err = os.MkdirTemp("", "actorlet-bench-"); err != nil {
				return nil, err
			}
			s.tmp = root
		}
		var manifests string
		if o.Source == SourceFile {
			manifests = filepath.Join(root, "manifests")
			if err := os.MkdirAll(manifests, 0o755); err != nil {
				return nil, err
			}
		}
		args := append(slices.Clone(o.AgentArgs), extra...)
		if o.Source == SourceFile {
			// Upstream's 20 s would dominate the latency; a user filling a
			// node from a directory sets it lower too.
			args = append([]string{"--file-check-frequency", "1s"}, args...)
		}
		if o.MutexOut != "" || o.BlockOut != "" {
			// The agent samples contention only when asked (it costs).
			args = append([]string{"--contention-profiling"}, args...)
		}
		a, err := startAgent(ctx, agentSpec{binary: o.Binary, runtime: runtimeEndpoint, maxPods: cfg.maxPods,
			node: cfg.node, rootDir: root, manifest: manifests, extra: args, gomaxprocs: o.GOMAXPROCS})
		if err != nil {
			s.cleanup()
			return nil, err
		}
		s.a, s.started = a, true
	}
	if cfg.ready != nil {
		if err := cfg.ready(ctx); err != nil {
			if s.started {
				s.a.stop()
			}
			s.cleanup()
			return nil, err
		}
	}
	// Let the agent settle (first relist, sources synced) before the clock
	// starts, and read its idle footprint.
	time.Sleep(500 * time.Millisecond)
	if ps, err := readProc(s.a.pid); err == nil {
		s.idleRSS, s.cpu0 = ps.rss, ps.cpu
	}
	switch {
	case cfg.target != nil:
		s.target = cfg.target
	case o.Source == SourceFile:
		s.target = fileTarget{dir: filepath.Join(s.a.rootDir, "manifests"), node: cfg.node}
	default:
		s.push = newPushClient(s.a.mainURL, s.a.client(time.Minute, o.Concurrency))
		s.target = pushTarget{s.push}
	}
	s.start = time.Now()
	cctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.samp = startSampler(cctx, s.a, s.start, 200*time.Millisecond)
	s.obs = newObserver(s.a.roURL, goal, s.start, s.a.client(2*time.Minute, 0))
	if cfg.pollEvery > 0 {
		s.obs.minInterval = cfg.pollEvery
	}
	s.wg.Add(1)
	if cfg.feed != nil {
		go func() { defer s.wg.Done(); cfg.feed(cctx, s.obs) }()
	} else {
		go func() { defer s.wg.Done(); s.obs.run(cctx) }()
	}
	if o.ProfileCPU > 0 && o.ProfileOut != "" {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.profile(cctx) }()
	}
	return s, nil
}

// close stops the instruments, fills r with what they measured, and stops
// the agent (and removes its temp dir).
func (s *session) close(ctx context.Context, r *Result) {
	s.samp.finish(ctx)
	ms, err := s.a.scrapeMetrics(ctx)
	if err == nil {
		r.GoroutinesEnd = ms.goroutines
		r.ActorsByKindEnd = ms.actors
		for _, n := range ms.actors {
			r.ActorsEnd += n
		}
		if r.Churn != nil {
			r.Churn.ActorRestarts = ms.actorRestarts
		}
		if r.Pods > 0 && len(ms.runtimeOps) > 0 {
			r.RuntimeOpsPerPod = map[string]float64{}
			for op, n := range ms.runtimeOps {
				r.RuntimeOpsPerPod[op] = round(n / float64(r.Pods))
			}
		}
	}
	for _, p := range []struct{ name, out string }{{"heap", s.o.HeapOut}, {"mutex", s.o.MutexOut}, {"block", s.o.BlockOut}} {
		if p.out == "" {
			continue
		}
		if err := fetch(ctx, s.a.client(0, 0), s.a.mainURL+"/debug/pprof/"+p.name, p.out); err != nil {
			s.o.Log.Warn(p.name+" profile failed", "err", err)
		}
	}
	s.cancel()
	s.wg.Wait()
	s.samp.mu.Lock()
	r.RSSPeakBytes = s.samp.peakRSS
	r.RSSEndBytes = s.samp.last.rss
	r.CPUSeconds = round3(s.samp.last.cpu - s.cpu0)
	r.GoroutinesPeak = max(s.samp.peakG, r.GoroutinesEnd)
	r.RSSOverTime = s.samp.rssSeries
	s.samp.mu.Unlock()
	r.RSSIdleBytes = s.idleRSS
	polls, mean, series, _ := s.obs.stats()
	r.Polls, r.PollMeanMS = polls, round(float64(mean)/float64(time.Millisecond))
	r.RunningOverTime = series
	if r.Pods > 0 {
		r.CPUPerPodMS = round(r.CPUSeconds * 1000 / float64(r.Pods))
		if r.RSSPeakBytes > r.RSSIdleBytes {
			r.RSSPerPodBytes = float64(int64(float64(r.RSSPeakBytes-r.RSSIdleBytes) / float64(r.Pods)))
		}
	}
	if r.Seconds > 0 {
		r.CPUCoresMean = round3(r.CPUSeconds / time.Since(s.start).Seconds())
	}
	r.AgentArgs = s.a.args
	if s.started {
		r.Runtime = s.a.args[1]
	}
	if s.started {
		s.a.stop()
	}
	s.cleanup()
}

func (s *session) cleanup() {
	if s.tmp != "" && !s.o.KeepDir {
		unmountUnder(s.tmp, &s.o) // volumes of pods the run left (tmpfs, as upstream's)
		_ = os.RemoveAll(s.tmp)
	}
}

// profile fetches a CPU profile from the agent while it is loaded.
func (s *session) profile(ctx context.Context) {
	profileTo(ctx, s.a, s.o.ProfileCPU, s.o.ProfileOut, &s.o)
}

// profileTo writes a CPU profile of a, d long, to path.
func profileTo(ctx context.Context, a *agent, d time.Duration, path string, o *Options) {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", a.mainURL, int(d.Seconds()))
	if err := fetch(ctx, a.client(0, 0), url, path); err != nil {
		o.Log.Warn("cpu profile failed", "url", url, "err", err)
		return
	}
	o.Log.Info("cpu profile written", "file", path)
}

// fetch GETs url into the file path.
func fetch(ctx context.Context, client *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s (is the agent's /debug/ wired? see docs/WIRING-issue5.md)", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// runtime dials the agent's CRI runtime for checks that must not trust
// actorlet's own view.
func (s *session) runtime(ctx context.Context) (*cri.Client, error) {
	if s.a.cri == "" {
		return nil, errors.New("no CRI endpoint known for this agent (--runtime-endpoint)")
	}
	return cri.Dial(ctx, s.a.cri, time.Minute)
}

// createAll creates specs with o.Concurrency parallel callers and records
// each pod's create time (just before its request).
func (s *session) createAll(ctx context.Context, specs []podSpec) (map[string]time.Time, []created, error) {
	at := make(map[string]time.Time, len(specs))
	var names []created
	var mu sync.Mutex
	var firstErr error
	work := make(chan podSpec)
	var wg sync.WaitGroup
	for range s.o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				t0 := time.Now()
				c, err := s.target.create(ctx, p)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					at[c.name] = t0
					names = append(names, c)
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range specs {
		if ctx.Err() != nil {
			break
		}
		work <- p
	}
	close(work)
	wg.Wait()
	return at, names, firstErr
}

// waitAll waits until every name reached the goal or the timeout passed;
// it returns each pod's latency in ms (only those that reached it) and
// the time the last one reached it.
func (s *session) waitAll(ctx context.Context, created map[string]time.Time, timeout time.Duration) ([]float64, time.Time) {
	deadline := time.After(timeout)
	lat := make([]float64, 0, len(created))
	var last time.Time
	for name, t0 := range created {
		select {
		case t := <-s.obs.waitReached(name):
			lat = append(lat, float64(t.Sub(t0))/float64(time.Millisecond))
			if t.After(last) {
				last = t
			}
			continue
		case <-deadline:
		case <-ctx.Done():
		}
		// Out of time: collect what did reach the goal, without waiting.
		for n, t0 := range created {
			if t := s.obs.reachedAt(n); !t.IsZero() {
				lat = append(lat, float64(t.Sub(t0))/float64(time.Millisecond))
				if t.After(last) {
					last = t
				}
			}
		}
		return lat, last
	}
	return lat, last
}

// runStart is standalone-sim and containerd: N pods, until all Running.
func runStart(ctx context.Context, o Options, r *Result, runtimeEndpoint string) error {
	s, err := open(ctx, o, runtimeEndpoint, GoalRunning)
	if err != nil {
		return err
	}
	defer s.close(ctx, r)
	specs := make([]podSpec, o.Pods)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("bench-%05d", i), image: o.Image}
	}
	o.Log.Info("creating pods", "pods", o.Pods, "source", o.Source, "concurrency", o.Concurrency)
	var mem *MemoryFigures
	if o.AfterDelete && o.Scenario == ScenarioStandaloneSim {
		mem = &MemoryFigures{Idle: readMemory(ctx, s.a)}
		r.Memory = mem
	}
	created, names, cerr := s.createAll(ctx, specs)
	r.CreatedSeconds = round3(time.Since(s.start).Seconds())
	lat, last := s.waitAll(ctx, created, o.Timeout)
	finish(r, s, lat, last)
	if mem != nil {
		s.measureAfterDelete(ctx, mem, names)
	}
	if o.Scenario == ScenarioContainerd && s.started {
		// The agent leaves pods running when it stops: remove them so
		// containerd is left as found.
		removeAll(ctx, s, names)
	}
	return goalErr(r, cerr)
}

func finish(r *Result, s *session, lat []float64, last time.Time) {
	r.Running = len(lat)
	r.LatencyMS = Summarize(lat)
	slices.Sort(lat)
	for i := range lat {
		lat[i] = round(lat[i])
	}
	r.LatencySamplesMS = lat
	if !last.IsZero() {
		r.Seconds = round3(last.Sub(s.start).Seconds())
	}
	if r.Seconds > 0 {
		r.PodsPerSecond = round(float64(r.Running) / r.Seconds)
	}
}

func goalErr(r *Result, cerr error) error {
	if cerr != nil {
		return fmt.Errorf("creating pods: %w", cerr)
	}
	if r.Running < r.Pods {
		return fmt.Errorf("only %d of %d pods reached %s", r.Running, r.Pods, r.Goal)
	}
	if r.Violations > 0 {
		return fmt.Errorf("%d invariant violations", r.Violations)
	}
	return nil
}

// removeAll deletes the pods and waits until /pods no longer lists them.
func removeAll(ctx context.Context, s *session, names []created) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.o.Concurrency)
	var gone []<-chan time.Time
	for _, c := range names {
		gone = append(gone, s.obs.markDeleted(c.name))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_ = s.target.remove(ctx, c)
		}()
	}
	wg.Wait()
	deadline := time.After(2 * time.Minute)
	for _, g := range gone {
		select {
		case <-g:
		case <-deadline:
			s.o.Log.Warn("pods not removed in time")
			return
		}
	}
}

// containerdEndpoint returns o.RuntimeEndpoint, or brings up the local
// containerd with deploy/local/containerd.sh (found from the working
// directory up) and sets o.Image to its busybox.
func containerdEndpoint(ctx context.Context, o *Options) (string, error) {
	if o.RuntimeEndpoint != "" {
		return o.RuntimeEndpoint, nil
	}
	script, err := findScript("deploy/local/containerd.sh")
	if err != nil {
		return "", fmt.Errorf("containerd scenario: give --runtime-endpoint, or run from the repository: %w", err)
	}
	o.Log.Info("bringing up containerd", "script", script)
	cmd := exec.CommandContext(ctx, script, "up")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s up: %w", script, err)
	}
	var ep string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "CONTAINER_RUNTIME_ENDPOINT="); ok {
			ep = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "BUSYBOX_IMAGE="); ok {
			o.Image = strings.TrimSpace(v)
		}
	}
	if ep == "" {
		return "", fmt.Errorf("%s up printed no CONTAINER_RUNTIME_ENDPOINT", script)
	}
	o.RuntimeEndpoint = ep
	return ep, nil
}

func findScript(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found at or above the working directory", rel)
		}
		dir = parent
	}
}
