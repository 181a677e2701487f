package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The node-resource scenarios of issue 12, on the simulated runtime.
const (
	// ScenarioEviction: --pods rounds of one pushed pod whose container
	// allocates past --eviction-hard memory.available; the time from the
	// crossing to the pod killed.
	ScenarioEviction = "eviction"
	// ScenarioEvictionDensity: the same rounds on a node already running
	// --pods pods (default 1,000).
	ScenarioEvictionDensity = "eviction-density"
	// ScenarioStats: --pods pods Running, then the agent's CPU over
	// --duration idle (default 1 min) and the latency of /stats/summary
	// and /metrics/resource.
	ScenarioStats = "stats"
)

func init() {
	Scenarios = append(Scenarios, ScenarioEviction, ScenarioEvictionDensity, ScenarioStats)
}

// Defaults of the node-resource scenarios.
const (
	evictionDefaultRounds      = 20
	evictionDensityDefaultPods = 1000
	evictionDensityRounds      = 20
	// evictionHard is the agent's --eviction-hard unless --agent-arg gives
	// one: upstream's defaults with memory.available raised to 1Gi (the
	// sim's node has 16Gi).
	evictionHard = "memory.available<1Gi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%"
	// housekeeping is the EvictionActor's period: each round waits a
	// random part of it first, so the crossings fall at every phase of
	// the pass cycle.
	housekeeping = 10 * time.Second
	// victimRequest makes the victims Burstable: admitted under
	// MemoryPressure (BestEffort pods are refused), as a real workload
	// that grows would have been.
	victimRequest = "16Mi"
	// crossedLine is what a victim's container writes right after its
	// alloc; the log line's timestamp is the crossing.
	crossedLine = "crossed"
	// statsDefaultPods, statsDefaultIdle, statsSettle, statsRequests: the
	// stats scenario's node, idle window, the quiet time before it, and the
	// requests per endpoint.
	statsDefaultPods = 1000
	statsDefaultIdle = time.Minute
	statsSettle      = 15 * time.Second
	statsRequests    = 200
)

// Eviction holds what the eviction scenarios add. Times are measured
// from the crossing: the timestamp of the victim's "crossed" log line,
// written by its container right after `alloc` took the node's
// memory.available under the threshold (the runtime's own clock).
type Eviction struct {
	Rounds  int `json:"rounds"`
	Evicted int `json:"evicted"`
	// BackgroundPods Running on the node during the rounds, and how long
	// they took to start (create to all Running).
	BackgroundPods    int     `json:"background_pods"`
	BackgroundSeconds float64 `json:"background_seconds,omitempty"`
	// Threshold is the agent's --eviction-hard; HousekeepingSeconds the
	// pass period the target is set against (kill p99 within one period).
	Threshold           string  `json:"threshold"`
	HousekeepingSeconds float64 `json:"housekeeping_seconds"`
	// KillMS: crossing to the victim's container stopped in the runtime
	// (the STOPPED event's finish time, from the CRI event stream).
	KillMS        Latency   `json:"kill_ms"`
	KillSamplesMS []float64 `json:"kill_samples_ms"`
	// StatusMS: crossing to /pods answering phase Failed, reason Evicted
	// (polled every 50 ms once the container stopped).
	StatusMS Latency `json:"status_ms"`
	// SummaryMS: /stats/summary read before each round (the read each
	// housekeeping pass does, through the node API).
	SummaryMS Latency `json:"summary_ms"`
	// AllocMiB is the mean allocation of a victim (the node's
	// memory.available less half the threshold).
	AllocMiB float64  `json:"alloc_mib"`
	Failures []string `json:"failures,omitempty"`
}

// StatsCost holds what the stats scenario adds.
type StatsCost struct {
	Pods int `json:"pods"`
	// IdleSeconds of the window with no request but the agent's own
	// (eviction passes every 10 s, stats collection, relists, ...),
	// after SettleSeconds of quiet; IdleCPUSeconds the agent's user+system
	// CPU in it (the embedded simulated runtime included) and
	// IdleCorePercent that over the window, in % of one core.
	SettleSeconds   float64 `json:"settle_seconds"`
	IdleSeconds     float64 `json:"idle_seconds"`
	IdleCPUSeconds  float64 `json:"idle_cpu_seconds"`
	IdleCorePercent float64 `json:"idle_core_percent"`
	// Requests per endpoint, one at a time on one keep-alive connection
	// to the secure port (as metrics-server scrapes).
	Requests        int     `json:"requests"`
	SummaryMS       Latency `json:"summary_ms"`
	SummaryBytes    int     `json:"summary_bytes"`
	SummaryPods     int     `json:"summary_pods"`
	ResourceMS      Latency `json:"resource_ms"`
	ResourceBytes   int     `json:"resource_bytes"`
	RequestsCPUSecs float64 `json:"requests_cpu_seconds"`
}

func (e *Eviction) summary() string {
	return fmt.Sprintf("%d/%d evicted with %d pods running, crossing to killed p50 %.0fms p90 %.0fms p99 %.0fms max %.0fms, to Failed/Evicted on /pods p99 %.0fms, summary p50 %.0fms",
		e.Evicted, e.Rounds, e.BackgroundPods, e.KillMS.P50, e.KillMS.P90, e.KillMS.P99, e.KillMS.Max, e.StatusMS.P99, e.SummaryMS.P50)
}

func (c *StatsCost) summary() string {
	return fmt.Sprintf("%d pods, idle CPU %.2f%% of a core over %.0fs, /stats/summary p50 %.0fms p99 %.0fms (%d pods, %d KiB), /metrics/resource p50 %.0fms p99 %.0fms",
		c.Pods, c.IdleCorePercent, c.IdleSeconds, c.SummaryMS.P50, c.SummaryMS.P99, c.SummaryPods, c.SummaryBytes/1024, c.ResourceMS.P50, c.ResourceMS.P99)
}

// nodeSession is an agent on the sim with n pods Running and no observer
// left polling (the scenarios measure the agent at rest).
type nodeSession struct {
	*session
	cpuStart float64
}

// openNode starts an agent on the sim with extra flags (unless
// o.AgentArgs names them), pushes n pods and waits until all are Running.
// The fill's start latencies go to r.
func openNode(ctx context.Context, o Options, r *Result, n, maxPods int, extra []string) (*nodeSession, error) {
	root := o.RootDir
	var tmp string
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "actorlet-bench-"); err != nil {
			return nil, err
		}
		tmp = root
	}
	a, err := startAgent(ctx, agentSpec{binary: o.Binary, runtime: "sim://" + simQuery(o.Sim), maxPods: maxPods,
		rootDir: root, extra: append(slices.Clone(o.AgentArgs), extra...)})
	if err != nil {
		if tmp != "" && !o.KeepDir {
			_ = os.RemoveAll(tmp)
		}
		return nil, err
	}
	s := &nodeSession{session: &session{o: o, a: a, started: true, tmp: tmp}}
	s.push = newPushClient(a.mainURL, a.client(time.Minute, o.Concurrency))
	s.target = pushTarget{s.push}
	if ps, err := readProc(a.pid); err == nil {
		s.idleRSS, s.cpuStart = ps.rss, ps.cpu
	}
	s.start = time.Now()
	s.obs = newObserver(a.roURL, GoalRunning, s.start, a.client(2*time.Minute, 0))
	if n == 0 {
		return s, nil
	}
	specs := make([]podSpec, n)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("bench-%05d", i), image: o.Image}
	}
	octx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.obs.run(octx) }()
	o.Log.Info("creating pods", "pods", n, "concurrency", o.Concurrency)
	created, _, cerr := s.createAll(ctx, specs)
	r.CreatedSeconds = round3(time.Since(s.start).Seconds())
	lat, last := s.waitAll(ctx, created, o.Timeout)
	stop()
	<-done
	finish(r, s.session, lat, last)
	polls, mean, series, _ := s.obs.stats()
	r.Polls, r.PollMeanMS, r.RunningOverTime = polls, round(float64(mean)/float64(time.Millisecond)), series
	if cerr != nil || len(lat) < n {
		s.closeNode(ctx, r)
		return nil, fmt.Errorf("filling the node: %d of %d pods Running: %v", len(lat), n, cerr)
	}
	return s, nil
}

// closeNode fills r with the agent's footprint and stops it.
func (s *nodeSession) closeNode(ctx context.Context, r *Result) {
	if ms, err := s.a.scrapeMetrics(ctx); err == nil {
		r.GoroutinesEnd = ms.goroutines
		r.ActorsByKindEnd = ms.actors
		for _, n := range ms.actors {
			r.ActorsEnd += n
		}
		r.GoroutinesPeak = max(r.GoroutinesPeak, ms.goroutines)
	}
	if ps, err := readProc(s.a.pid); err == nil {
		r.RSSPeakBytes, r.RSSEndBytes = max(ps.hwm, ps.rss), ps.rss
		r.CPUSeconds = round3(ps.cpu - s.cpuStart)
		r.CPUCoresMean = round3(r.CPUSeconds / time.Since(s.start).Seconds())
	}
	r.RSSIdleBytes = s.idleRSS
	r.AgentArgs, r.Runtime = s.a.args, s.a.args[1]
	s.a.stop()
	s.cleanup()
}

// hasFlag says whether args set the flag (--name or --name=...).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// flagValue is the last value args give the flag, "" if none.
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		if a == name && i+1 < len(args) {
			v = args[i+1]
		} else if rest, ok := strings.CutPrefix(a, name+"="); ok {
			v = rest
		}
	}
	return v
}

// memoryThreshold is the memory.available amount of an --eviction-hard
// value, in bytes of a node of capacity bytes ("1Gi", "10%").
func memoryThreshold(hard string, capacity int64) (int64, error) {
	for _, part := range strings.Split(hard, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "<")
		if !ok || strings.TrimSpace(k) != "memory.available" {
			continue
		}
		v = strings.TrimSpace(v)
		if p, ok := strings.CutSuffix(v, "%"); ok {
			var f float64
			if _, err := fmt.Sscanf(p, "%g", &f); err != nil || f <= 0 || f > 100 {
				return 0, fmt.Errorf("memory.available<%s: not a percentage", v)
			}
			return int64(f / 100 * float64(capacity)), nil
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return 0, fmt.Errorf("memory.available<%s: %w", v, err)
		}
		return q.Value(), nil
	}
	return 0, fmt.Errorf("--eviction-hard %q has no memory.available threshold", hard)
}

// runEviction runs the eviction rounds on a node with background pods
// Running. Each round: read the Summary (the node's memory.available),
// wait a random part of the housekeeping period, push a Burstable pod
// whose container allocates the available memory less half the threshold
// and logs "crossed", then wait for its container to stop (CRI event) and
// for /pods to say Failed/Evicted, and delete it.
func runEviction(ctx context.Context, o Options, r *Result, rounds, background int) error {
	var extra []string
	hard := flagValue(o.AgentArgs, "--eviction-hard")
	if !hasFlag(o.AgentArgs, "--eviction-hard") {
		hard = evictionHard
		extra = append(extra, "--eviction-hard", hard)
	}
	ev := &Eviction{Rounds: rounds, BackgroundPods: background, Threshold: hard, HousekeepingSeconds: housekeeping.Seconds()}
	r.Eviction, r.Goal = ev, "Evicted"
	s, err := openNode(ctx, o, r, background, background+rounds+10, extra)
	if err != nil {
		return err
	}
	defer s.closeNode(ctx, r)
	// The Result's own pod count and latencies are the rounds' (the
	// fill's are in BackgroundSeconds).
	ev.BackgroundSeconds = r.Seconds
	r.Pods, r.Running = rounds, 0

	watch, err := watchStops(ctx, s.a.cri)
	if err != nil {
		return err
	}
	defer watch.close()
	rng := rand.New(rand.NewPCG(uint64(o.ChaosSeed), 0))
	client := s.a.client(time.Minute, 1)
	var kills, statuses, summaries []float64
	var allocs float64
	t0 := time.Now()
	for i := range rounds {
		if ctx.Err() != nil {
			break
		}
		kill, status, sum, alloc, err := s.evictionRound(ctx, client, watch, hard, i, rng.Int64N(int64(housekeeping)))
		if sum > 0 {
			summaries = append(summaries, sum)
		}
		if err != nil {
			ev.Failures = append(ev.Failures, fmt.Sprintf("round %d: %v", i, err))
			o.Log.Warn("eviction round failed", "round", i, "err", err)
			continue
		}
		o.Log.Info("evicted", "round", i, "kill_ms", round(kill), "status_ms", round(status), "alloc_mib", alloc>>20)
		kills, statuses = append(kills, kill), append(statuses, status)
		allocs += float64(alloc >> 20)
	}
	ev.Evicted = len(kills)
	ev.KillMS, ev.StatusMS, ev.SummaryMS = Summarize(kills), Summarize(statuses), Summarize(summaries)
	slices.Sort(kills)
	for i := range kills {
		kills[i] = round(kills[i])
	}
	ev.KillSamplesMS = kills
	if ev.Evicted > 0 {
		ev.AllocMiB = round(allocs / float64(ev.Evicted))
	}
	r.Running, r.LatencyMS, r.LatencySamplesMS = ev.Evicted, ev.KillMS, kills
	r.Seconds = round3(time.Since(t0).Seconds())
	if ev.Evicted < rounds {
		return fmt.Errorf("only %d of %d rounds evicted their pod", ev.Evicted, rounds)
	}
	return nil
}

// evictionRound is one round: the latencies from the crossing to the
// container stopped and to /pods saying Failed/Evicted, in ms, the
// Summary's latency and the bytes allocated.
func (s *nodeSession) evictionRound(ctx context.Context, client *http.Client, watch *stopWatch, hard string, i int, jitter int64) (kill, status, sumMS float64, alloc int64, err error) {
	t := time.Now()
	sum, _, err := getSummary(ctx, client, s.a.mainURL)
	sumMS = float64(time.Since(t)) / float64(time.Millisecond)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	if sum.Node.Memory == nil || sum.Node.Memory.AvailableBytes == nil || sum.Node.Memory.WorkingSetBytes == nil {
		return 0, 0, sumMS, 0, errors.New("the Summary has no node memory")
	}
	avail := int64(*sum.Node.Memory.AvailableBytes)
	thr, err := memoryThreshold(hard, avail+int64(*sum.Node.Memory.WorkingSetBytes))
	if err != nil {
		return 0, 0, sumMS, 0, err
	}
	alloc = (avail - thr/2) &^ (1<<20 - 1) // whole MiB
	if alloc <= 0 || avail-alloc >= thr {
		return 0, 0, sumMS, 0, fmt.Errorf("memory.available %d already under the threshold %d", avail, thr)
	}
	select {
	case <-ctx.Done():
		return 0, 0, sumMS, 0, ctx.Err()
	case <-time.After(time.Duration(jitter)):
	}
	name := fmt.Sprintf("evict-%03d", i)
	b, err := s.push.do(ctx, http.MethodPost, "/pods", victimManifest(name, s.o.Image, alloc), http.StatusCreated)
	if err != nil {
		return 0, 0, sumMS, alloc, err
	}
	var ref struct{ UID, Name string }
	if err := json.Unmarshal(b, &ref); err != nil || ref.UID == "" {
		return 0, 0, sumMS, alloc, fmt.Errorf("push %s: answer %q", name, b)
	}
	defer func() { _ = s.push.remove(ctx, ref.Name) }()
	var stop containerStop
	select {
	case stop = <-watch.wait(ref.UID):
	case <-time.After(housekeeping*3 + time.Minute):
		return 0, 0, sumMS, alloc, errors.New("the victim's container did not stop")
	case <-ctx.Done():
		return 0, 0, sumMS, alloc, ctx.Err()
	}
	at, err := waitEvicted(ctx, client, s.a.roURL, ref.Name)
	if err != nil {
		return 0, 0, sumMS, alloc, err
	}
	crossed, err := crossedAt(ctx, client, s.a.mainURL, ref.Name)
	if err != nil {
		return 0, 0, sumMS, alloc, err
	}
	if stop.exitCode != 137 || stop.reason == "OOMKilled" {
		return 0, 0, sumMS, alloc, fmt.Errorf("the container ended %d %s, not killed", stop.exitCode, stop.reason)
	}
	ms := func(t time.Time) float64 { return float64(t.Sub(crossed)) / float64(time.Millisecond) }
	return ms(stop.at), ms(at), sumMS, alloc, nil
}

// victimManifest is a Burstable pod whose container allocates alloc
// bytes, then logs crossedLine.
func victimManifest(name, image string, alloc int64) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
    app: actorlet-bench-eviction
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "alloc %dMi; echo %s; sleep 3600"]
    resources:
      requests:
        memory: %s
`, name, Namespace, image, alloc>>20, crossedLine, victimRequest)
}

// getSummary GETs /stats/summary and decodes it; it returns the body's size.
func getSummary(ctx context.Context, client *http.Client, url string) (*statsapi.Summary, int, error) {
	b, err := get(ctx, client, url+"/stats/summary")
	if err != nil {
		return nil, 0, err
	}
	var sum statsapi.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, len(b), fmt.Errorf("decode /stats/summary: %w", err)
	}
	return &sum, len(b), nil
}

func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// waitEvicted polls /pods every 50 ms until name is Failed with reason
// Evicted, and returns when the answer arrived.
func waitEvicted(ctx context.Context, client *http.Client, url, name string) (time.Time, error) {
	deadline := time.Now().Add(time.Minute)
	var last string
	for {
		b, err := get(ctx, client, url+"/pods")
		now := time.Now()
		if err != nil {
			return time.Time{}, err
		}
		var list struct {
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
				Status   struct{ Phase, Reason string }
			} `json:"items"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			return time.Time{}, fmt.Errorf("decode /pods: %w", err)
		}
		for _, p := range list.Items {
			if p.Metadata.Name == name {
				last = p.Status.Phase + "/" + p.Status.Reason
				if p.Status.Phase == "Failed" && p.Status.Reason == "Evicted" {
					return now, nil
				}
			}
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("%s not Failed/Evicted on /pods after a minute (last %q)", name, last)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// crossedAt reads the victim's log through the node API and returns the
// timestamp of its crossedLine.
func crossedAt(ctx context.Context, client *http.Client, url, name string) (time.Time, error) {
	b, err := get(ctx, client, fmt.Sprintf("%s/containerLogs/%s/%s/main?timestamps=true", url, Namespace, name))
	if err != nil {
		return time.Time{}, err
	}
	return parseCrossed(string(b))
}

// parseCrossed finds "TIMESTAMP crossed" in a log read with timestamps.
func parseCrossed(log string) (time.Time, error) {
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		ts, msg, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.TrimSpace(msg) != crossedLine {
			continue
		}
		return time.Parse(time.RFC3339Nano, ts)
	}
	return time.Time{}, fmt.Errorf("no %q line in the container's log: %q", crossedLine, log)
}

// containerStop is a container's end as the runtime reported it.
type containerStop struct {
	at       time.Time
	exitCode int32
	reason   string
}

// stopWatch follows the runtime's container events (GetContainerEvents)
// and records, per pod UID, when its container stopped.
type stopWatch struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	stops   map[string]containerStop
	waiters map[string][]chan containerStop
}

// watchStops subscribes to the runtime's events at endpoint
// (unix:///path) and returns once the stream is established.
func watchStops(ctx context.Context, endpoint string) (*stopWatch, error) {
	if endpoint == "" {
		return nil, errors.New("no CRI endpoint known for this agent")
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := runtimeapi.NewRuntimeServiceClient(conn).GetContainerEvents(sctx, &runtimeapi.GetEventsRequest{})
	if err == nil {
		_, err = stream.Header()
	}
	if err != nil {
		cancel()
		_ = conn.Close()
		return nil, fmt.Errorf("container events from %s: %w", endpoint, err)
	}
	w := &stopWatch{conn: conn, cancel: cancel, done: make(chan struct{}),
		stops: map[string]containerStop{}, waiters: map[string][]chan containerStop{}}
	go func() {
		defer close(w.done)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			w.apply(ev)
		}
	}()
	return w, nil
}

// apply records a container's STOPPED event (sandboxes' are ignored).
func (w *stopWatch) apply(ev *runtimeapi.ContainerEventResponse) {
	if ev.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT || ev.GetPodSandboxStatus() == nil {
		return
	}
	uid := ev.GetPodSandboxStatus().GetMetadata().GetUid()
	for _, c := range ev.GetContainersStatuses() {
		if c.GetId() != ev.GetContainerId() {
			continue
		}
		at := c.GetFinishedAt()
		if at == 0 {
			at = ev.GetCreatedAt()
		}
		st := containerStop{at: time.Unix(0, at), exitCode: c.GetExitCode(), reason: c.GetReason()}
		w.mu.Lock()
		if _, seen := w.stops[uid]; !seen {
			w.stops[uid] = st
			for _, ch := range w.waiters[uid] {
				ch <- st
			}
			delete(w.waiters, uid)
		}
		w.mu.Unlock()
		return
	}
}

// wait returns a channel that gets the stop of uid's container.
func (w *stopWatch) wait(uid string) <-chan containerStop {
	ch := make(chan containerStop, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if st, ok := w.stops[uid]; ok {
		ch <- st
		return ch
	}
	w.waiters[uid] = append(w.waiters[uid], ch)
	return ch
}

func (w *stopWatch) close() {
	w.cancel()
	_ = w.conn.Close()
	<-w.done
}

// runStats fills the node with o.Pods pods, lets it settle, measures the
// agent's CPU over o.Duration with no request, then times /stats/summary
// and /metrics/resource, statsRequests each, one at a time.
func runStats(ctx context.Context, o Options, r *Result) error {
	st := &StatsCost{Pods: o.Pods, SettleSeconds: statsSettle.Seconds(), Requests: statsRequests}
	r.Stats = st
	s, err := openNode(ctx, o, r, o.Pods, o.Pods+10, nil)
	if err != nil {
		return err
	}
	defer s.closeNode(ctx, r)
	o.Log.Info("pods running; idle window", "settle", statsSettle, "idle", o.Duration)
	if err := sleepCtx(ctx, statsSettle); err != nil {
		return err
	}
	p0, err := readProc(s.a.pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, o.Duration); err != nil {
		return err
	}
	p1, err := readProc(s.a.pid)
	if err != nil {
		return err
	}
	idle := time.Since(t0).Seconds()
	st.IdleSeconds, st.IdleCPUSeconds = round3(idle), round3(p1.cpu-p0.cpu)
	st.IdleCorePercent = round3((p1.cpu - p0.cpu) / idle * 100)

	client := s.a.client(time.Minute, 1)
	var sums, ress []float64
	for i := range statsRequests {
		t := time.Now()
		sum, n, err := getSummary(ctx, client, s.a.mainURL)
		if err != nil {
			return err
		}
		sums = append(sums, float64(time.Since(t))/float64(time.Millisecond))
		if i == 0 {
			st.SummaryBytes, st.SummaryPods = n, len(sum.Pods)
		}
	}
	for i := range statsRequests {
		t := time.Now()
		b, err := get(ctx, client, s.a.mainURL+"/metrics/resource")
		if err != nil {
			return err
		}
		ress = append(ress, float64(time.Since(t))/float64(time.Millisecond))
		if i == 0 {
			st.ResourceBytes = len(b)
		}
	}
	if p2, err := readProc(s.a.pid); err == nil {
		st.RequestsCPUSecs = round3(p2.cpu - p1.cpu)
	}
	st.SummaryMS, st.ResourceMS = Summarize(sums), Summarize(ress)
	if st.SummaryPods < o.Pods {
		return fmt.Errorf("/stats/summary lists %d of %d pods", st.SummaryPods, o.Pods)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
