package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/actorlet/actorlet/internal/cgroupdir"
)

// agent is the actorlet process under test: one this package started, or
// one the user points at (then RSS and CPU need its PID).
type agent struct {
	mainURL string // POST/DELETE /pods, /debug: https (the secure node API)
	roURL   string // GET /pods, /metrics
	hzURL   string
	pid     int
	cri     string // the CRI endpoint it uses, for checks through the runtime
	args    []string
	rootDir string
	logPath string
	// cgroupRoot is --cgroup-root on a real runtime, removed at stop.
	cgroupRoot string

	cmd  *exec.Cmd
	done chan struct{}

	// tls trusts the agent's serving certificate: the self-signed
	// kubelet.crt of an agent started here, anything for an external agent
	// (the bench measures it, the user chose it).
	tls *tls.Config

	// metrics is the one client of every /metrics scrape: a client per
	// scrape left its idle keep-alive connection open in both processes,
	// an open file and a goroutine more in the agent at each scrape (the
	// soak scenario counts both).
	metricsOnce sync.Once
	metrics     *http.Client
}

// metricsClient is the shared client of scrapeMetrics.
func (a *agent) metricsClient() *http.Client {
	a.metricsOnce.Do(func() { a.metrics = a.client(time.Minute, 1) })
	return a.metrics
}

// client is an HTTP client for every port of the agent (plain or TLS).
func (a *agent) client(timeout time.Duration, conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if a.tls != nil {
		tr.TLSClientConfig = a.tls.Clone()
	}
	if conns > 0 {
		tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = conns, conns
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// trustServingCert pins the self-signed certificate the agent made in
// <root-dir>/pki.
func (a *agent) trustServingCert() error {
	b, err := os.ReadFile(filepath.Join(a.rootDir, "pki", "kubelet.crt"))
	if err != nil {
		return fmt.Errorf("the agent's serving certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b) {
		return errors.New("the agent's kubelet.crt holds no PEM certificate")
	}
	a.tls = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return nil
}

// agentSpec is how to start an agent.
type agentSpec struct {
	binary   string
	runtime  string // --container-runtime-endpoint
	maxPods  int
	node     string // --hostname-override; "" is benchNode
	rootDir  string
	manifest string // --pod-manifest-path, "" for none
	extra    []string
	// gomaxprocs, when > 0, is the agent's GOMAXPROCS (its environment):
	// the scaling curve runs the agent and the bench on the same number
	// of cores.
	gomaxprocs int
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startAgent starts binary as a standalone actorlet with realistic flags
// (upstream defaults but --max-pods) on free loopback ports, and waits for
// /healthz.
func startAgent(ctx context.Context, s agentSpec) (*agent, error) {
	if err := os.MkdirAll(s.rootDir, 0o755); err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ports[i] = p
	}
	a := &agent{
		mainURL: fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		roURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		hzURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		rootDir: s.rootDir,
		logPath: filepath.Join(s.rootDir, "actorlet.log"),
		cri:     s.runtime,
	}
	if strings.HasPrefix(s.runtime, "sim://") {
		a.cri = "unix://" + filepath.Join(s.rootDir, "actorlet-sim.sock")
	}
	if s.node == "" {
		s.node = benchNode
	}
	// The pod logs go to a directory of their own, as upstream's
	// /var/log/pods beside /var/lib/kubelet/pods: in one directory, each
	// pod's log directory and its pod directory were two of 20,000 entries
	// at 10,000 pods, and every mkdir there takes that directory's lock in
	// the kernel, so the pods' starts queued on it.
	a.args = []string{
		"--container-runtime-endpoint", s.runtime,
		"--root-dir", s.rootDir, "--pod-logs-dir", filepath.Join(s.rootDir, "pod-logs"),
		"--hostname-override", s.node, "--node-ip", "127.0.0.1",
		"--address", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]), "--read-only-port", strconv.Itoa(ports[1]),
		"--healthz-port", strconv.Itoa(ports[2]),
		"--max-pods", strconv.Itoa(max(s.maxPods, 110)),
	}
	if s.manifest != "" {
		a.args = append(a.args, "--pod-manifest-path", s.manifest)
	}
	if !strings.HasPrefix(s.runtime, "sim://") {
		// A real runtime: the agent manages the pod cgroups under a cgroup
		// root of its own, and runs on cgroup v1 hosts only with
		// failCgroupV1 off.
		a.cgroupRoot = cgroupdir.Name("actorlet-bench")
		if err := cgroupdir.Make(a.cgroupRoot); err != nil {
			return nil, fmt.Errorf("the agent's cgroup root %s: %w", a.cgroupRoot, err)
		}
		a.args = append(a.args, "--fail-cgroupv1=false", "--cgroup-root", a.cgroupRoot)
		// The host's disk is the machine's: past the default disk
		// thresholds image GC would remove the locally loaded pause image
		// (no registry to pull it again) and disk pressure would refuse
		// the bench's pods. --agent-arg may set them (the last value wins).
		a.args = append(a.args, "--image-gc-high-threshold", "100", "--eviction-hard", "memory.available<100Mi")
	}
	a.args = append(a.args, s.extra...)
	f, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	a.cmd = exec.Command(s.binary, a.args...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if s.gomaxprocs > 0 {
		// The last of duplicate variables wins in exec, so this overrides
		// a GOMAXPROCS the bench itself was started with.
		a.cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(s.gomaxprocs))
	}
	if err := a.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", s.binary, err)
	}
	a.pid = a.cmd.Process.Pid
	a.done = make(chan struct{})
	go func() {
		_ = a.cmd.Wait()
		_ = f.Close()
		close(a.done)
	}()
	if err := a.waitHealthy(ctx, 60*time.Second); err != nil {
		a.stop()
		return nil, err
	}
	if err := a.trustServingCert(); err != nil {
		a.stop()
		return nil, err
	}
	return a, nil
}

// externalAgent is an agent the user started: url is its main port (it
// serves /pods and /metrics too), https://host:10250 as a rule; its
// certificate is not verified and no credentials are sent, so it needs
// anonymous requests allowed (the flags' defaults in standalone).
func externalAgent(url string, pid int, criEndpoint string) *agent {
	url = strings.TrimRight(url, "/")
	a := &agent{mainURL: url, roURL: url, hzURL: url, pid: pid, cri: criEndpoint}
	if strings.HasPrefix(url, "https://") {
		a.tls = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the user's own agent, measured not trusted
	}
	return a
}

func (a *agent) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if a.exited() {
			return fmt.Errorf("actorlet exited during start:\n%s", a.logTail(20))
		}
		c := a.client(5*time.Second, 0)
		resp, err := c.Get(a.hzURL + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			c.CloseIdleConnections()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("healthz %d", resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("actorlet not healthy after %s: %v\n%s", timeout, last, a.logTail(20))
}

func (a *agent) exited() bool {
	if a.done == nil {
		return false
	}
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits (SIGKILL after 20 s). Pods keep running in
// the runtime, as with any actorlet stop.
func (a *agent) stop() {
	if a.cmd == nil || a.exited() {
		return
	}
	if a.cgroupRoot != "" {
		// What the pods left under it (they keep running) stays.
		defer func() { _ = cgroupdir.Remove(a.cgroupRoot) }()
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

func (a *agent) logTail(n int) string {
	if a.logPath == "" {
		return ""
	}
	b, _ := os.ReadFile(a.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// chaosCrashes reads the injector's final count from the agent's log.
func (a *agent) chaosCrashes() int {
	if a.logPath == "" {
		return 0
	}
	b, _ := os.ReadFile(a.logPath)
	m := regexp.MustCompile(`chaos injector stopped.*crashes=(\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func (a *agent) logContains(s string) bool {
	if a.logPath == "" {
		return false
	}
	b, _ := os.ReadFile(a.logPath)
	return bytes.Contains(b, []byte(s))
}

// procStat is what /proc tells about the agent.
type procStat struct {
	rss, hwm uint64  // bytes
	cpu      float64 // user+system seconds
}

var clkTck = 100.0 // USER_HZ; 100 on every Linux we run on

func readProc(pid int) (procStat, error) {
	var ps procStat
	if pid <= 0 {
		return ps, errors.New("no agent pid")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	m := parseStatus(b)
	ps.rss, ps.hwm = m.rss, m.hwm
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, err
	}
	// Fields after the command (which may hold spaces) in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	// f[0] is field 3 (state); utime is field 14, stime 15.
	if len(f) > 12 {
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		ps.cpu = (ut + st) / clkTck
	}
	return ps, nil
}

// statusMemory is the memory lines of /proc/PID/status, in bytes: VmRSS,
// VmHWM, RssAnon, RssFile.
type statusMemory struct {
	rss, hwm, anon, file uint64
	hasRSS               bool
}

// parseStatus reads the memory lines of a /proc/PID/status.
func parseStatus(b []byte) statusMemory {
	var m statusMemory
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS":
			m.rss, m.hasRSS = parseKB(v), true
		case "VmHWM":
			m.hwm = parseKB(v)
		case "RssAnon":
			m.anon = parseKB(v)
		case "RssFile":
			m.file = parseKB(v)
		}
	}
	return m
}

func parseKB(v string) uint64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseUint(f[0], 10, 64)
	if len(f) > 1 && strings.EqualFold(f[1], "kB") {
		n *= 1024
	}
	return n
}

// metricsSnapshot is the part of /metrics the bench reports.
type metricsSnapshot struct {
	goroutines    int
	heapAlloc     float64            // go_memstats_heap_alloc_bytes: live heap and garbage not yet collected
	memstats      map[string]float64 // the go_memstats_*_bytes gauges, by name without the prefix
	actors        map[string]int
	actorRestarts float64
	probeTotal    map[string]float64 // pod name -> probe executions (prober_probe_total, readiness)
	runtimeOps    map[string]float64 // kubelet_runtime_operations_total by operation_type
	runningPods   float64            // kubelet_running_pods
}

// scrapeMetrics reads the agent's /metrics (text format).
func (a *agent) scrapeMetrics(ctx context.Context) (metricsSnapshot, error) {
	ms := metricsSnapshot{actors: map[string]int{}, probeTotal: map[string]float64{}, runtimeOps: map[string]float64{}, memstats: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.roURL+"/metrics", nil)
	if err != nil {
		return ms, err
	}
	resp, err := a.metricsClient().Do(req)
	if err != nil {
		return ms, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return ms, fmt.Errorf("/metrics: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, val, ok := parseSample(line)
		if !ok {
			continue
		}
		if k, ok := strings.CutPrefix(name, "go_memstats_"); ok && strings.HasSuffix(k, "_bytes") {
			ms.memstats[k] = val
		}
		switch name {
		case "go_goroutines":
			ms.goroutines = int(val)
		case "go_memstats_heap_alloc_bytes":
			ms.heapAlloc = val
		case "actorlet_actors":
			ms.actors[labels["kind"]] = int(val)
		case "kubelet_runtime_operations_total":
			ms.runtimeOps[labels["operation_type"]] += val
		case "kubelet_running_pods":
			ms.runningPods = val
		case "actorlet_actor_restarts_total":
			ms.actorRestarts += val
		case "prober_probe_total":
			if labels["probe_type"] == "Readiness" {
				ms.probeTotal[labels["pod"]] += val
			}
		}
	}
	return ms, sc.Err()
}

// parseSample parses `name{a="b",c="d"} value` (no escapes in our labels).
func parseSample(line string) (name string, labels map[string]string, val float64, ok bool) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	head := line[:sp]
	labels = map[string]string{}
	if i := strings.IndexByte(head, '{'); i >= 0 {
		name = head[:i]
		for _, kv := range strings.Split(strings.TrimSuffix(head[i+1:], "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
	} else {
		name = head
	}
	return name, labels, v, true
}

// sampler samples the agent's /proc every interval and /metrics every
// metricsEvery, keeping the peaks and a series for charts.
type sampler struct {
	a     *agent
	start time.Time

	mu        sync.Mutex
	peakRSS   uint64
	peakG     int
	last      procStat
	rssSeries []Sample
	stop      chan struct{}
	done      chan struct{}
}

func startSampler(ctx context.Context, a *agent, start time.Time, every time.Duration) *sampler {
	s := &sampler{a: a, start: start, stop: make(chan struct{}), done: make(chan struct{})}
	s.sample(ctx, true)
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n++
			s.sample(ctx, n%10 == 0) // /metrics every 10th tick
		}
	}()
	return s
}

func (s *sampler) sample(ctx context.Context, withMetrics bool) {
	ps, err := readProc(s.a.pid)
	var g int
	if withMetrics {
		if ms, err := s.a.scrapeMetrics(ctx); err == nil {
			g = ms.goroutines
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.last = ps
		s.peakRSS = max(s.peakRSS, ps.hwm, ps.rss)
		s.rssSeries = append(s.rssSeries, Sample{T: round3(time.Since(s.start).Seconds()), Value: float64(ps.rss)})
	}
	s.peakG = max(s.peakG, g)
}

// finish stops sampling and takes one last sample.
func (s *sampler) finish(ctx context.Context) {
	close(s.stop)
	<-s.done
	s.sample(ctx, true)
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// drain reads and closes a response body so the connection is reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}
