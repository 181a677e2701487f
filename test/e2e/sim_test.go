package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

const simImage = "localhost/actorlet/busybox:1"

// writePods writes n sleeping pods, ten per file (multi-document YAML).
func writePods(t *testing.T, dir, prefix string, n int) {
	t.Helper()
	for f := 0; f*10 < n; f++ {
		var b strings.Builder
		for i := f * 10; i < n && i < f*10+10; i++ {
			if b.Len() > 0 {
				b.WriteString("---\n")
			}
			b.WriteString(podYAML(fmt.Sprintf("%s-%03d", prefix, i), simImage, "", `["sleep", "infinity"]`))
		}
		writeManifest(t, dir, fmt.Sprintf("%s-%02d.yaml", prefix, f), b.String())
	}
}

func waitAllRunning(t *testing.T, a *agent, n int, timeout time.Duration) []v1.Pod {
	t.Helper()
	return waitAll(t, a, n, timeout, "Running", isRunning)
}

// waitAll waits until the agent lists n pods, each one state (named what),
// and returns them.
func waitAll(t *testing.T, a *agent, n int, timeout time.Duration, what string, state func(*v1.Pod) bool) []v1.Pod {
	t.Helper()
	var pods []v1.Pod
	testenv.WaitFor(t, timeout, fmt.Sprintf("%d pods %s", n, what), func() (bool, error) {
		var err error
		pods, err = a.pods()
		if err != nil {
			return false, err
		}
		count := 0
		for i := range pods {
			if state(&pods[i]) {
				count++
			}
		}
		return count == n && len(pods) == n, fmt.Errorf("%d of %d listed pods %s", count, len(pods), what)
	})
	return pods
}

func TestE2ESim200StaticPodsReachRunning(t *testing.T) {
	dir := t.TempDir()
	writePods(t, dir, "dense", 200)
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--max-pods", "200"}})
	pods := waitAllRunning(t, a, 200, 3*time.Minute)
	for _, p := range pods {
		if !strings.HasSuffix(p.Name, "-e2e-node") {
			t.Fatalf("static pod name %q lacks the node name suffix", p.Name)
		}
		if p.Status.PodIP == "" || !strings.HasPrefix(p.Status.PodIP, "127.") {
			t.Fatalf("pod %s IP %q", p.Name, p.Status.PodIP)
		}
	}
	// The runtime holds exactly one ready sandbox and one running container per pod.
	rt := a.runtime()
	sbs := allSandboxes(t, rt)
	ctrs := allContainers(t, rt)
	if len(sbs) != 200 || len(ctrs) != 200 {
		t.Fatalf("runtime holds %d sandboxes and %d containers, want 200 each", len(sbs), len(ctrs))
	}
	ips := map[string]bool{}
	for _, p := range pods {
		if ips[p.Status.PodIP] {
			t.Fatalf("pod IP %s used twice", p.Status.PodIP)
		}
		ips[p.Status.PodIP] = true
	}
}

func TestE2ESimAdmissionByMaxPods(t *testing.T) {
	dir := t.TempDir()
	writePods(t, dir, "adm", 5)
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--max-pods", "3"}})
	testenv.WaitFor(t, time.Minute, "3 Running and 2 rejected with OutOfpods", func() (bool, error) {
		pods, err := a.pods()
		if err != nil {
			return false, err
		}
		var run, rejected int
		for i := range pods {
			switch {
			case isRunning(&pods[i]):
				run++
			case pods[i].Status.Phase == v1.PodFailed && pods[i].Status.Reason == "OutOfpods":
				rejected++
			}
		}
		return run == 3 && rejected == 2, fmt.Errorf("%d running, %d rejected", run, rejected)
	})
	if n := len(allContainers(t, a.runtime())); n != 3 {
		t.Fatalf("runtime holds %d containers, want 3", n)
	}
}

func TestE2ESimCrashLoopBackOffGrows(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "crasher.yaml", podYAML("crasher", simImage, "Always", `["sh", "-c", "exit 3"]`))
	base := 300 * time.Millisecond
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{
		"--crashloop-backoff-initial", base.String(), "--crashloop-backoff-max", "5s",
	}})
	rt := a.runtime()
	// Record when each attempt started and when the one before it finished,
	// from the runtime's own timestamps.
	type attempt struct{ created, prevFinished int64 }
	seen := map[uint32]attempt{}
	sawBackOff := false
	testenv.WaitFor(t, 2*time.Minute, "restart count 4 with CrashLoopBackOff", func() (bool, error) {
		p, err := a.pod("crasher-e2e-node")
		if err != nil {
			return false, err
		}
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
			if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 3 {
				return false, fmt.Errorf("CrashLoopBackOff without lastState exit code 3: %+v", cs.LastTerminationState)
			}
		}
		ctrs := containersOf(t, rt, string(p.UID))
		byAttempt := map[uint32]*runtimeapi.ContainerStatus{}
		for _, c := range ctrs {
			st, err := rt.ContainerStatus(context.Background(), c.Id)
			if err != nil {
				continue
			}
			byAttempt[c.Metadata.Attempt] = st
		}
		for n, st := range byAttempt {
			if prev, ok := byAttempt[n-1]; ok && n > 0 && prev.FinishedAt > 0 {
				seen[n] = attempt{created: st.CreatedAt, prevFinished: prev.FinishedAt}
			}
		}
		return cs.RestartCount >= 4 && sawBackOff, fmt.Errorf("restarts %d, saw back-off %v", cs.RestartCount, sawBackOff)
	})
	// Attempt n (n >= 2) may only start after base*2^(n-2) has passed since
	// attempt n-1 finished: the back-off grows.
	checked := 0
	for n, at := range seen {
		if n < 2 {
			continue
		}
		want := base << (n - 2)
		if gap := time.Duration(at.created - at.prevFinished); gap < want {
			t.Errorf("attempt %d started %s after the previous one finished, want at least %s", n, gap, want)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no restart gaps observed: %v", seen)
	}
}

func TestE2ESimRestartPolicies(t *testing.T) {
	dir := t.TempDir()
	pods := map[string]struct {
		policy, cmd string
	}{
		"never-ok":       {"Never", `["sh", "-c", "sleep 0.2; exit 0"]`},
		"never-fail":     {"Never", `["sh", "-c", "sleep 0.2; exit 1"]`},
		"onfailure-ok":   {"OnFailure", `["sh", "-c", "sleep 0.2; true"]`},
		"onfailure-fail": {"OnFailure", `["sh", "-c", "sleep 0.2; false"]`},
	}
	for name, p := range pods {
		writeManifest(t, dir, name+".yaml", podYAML(name, simImage, p.policy, p.cmd))
	}
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--crashloop-backoff-initial", "200ms", "--crashloop-backoff-max", "1s"}})
	tests := []struct {
		name  string
		cond  func(*v1.Pod) bool
		what  string
		phase v1.PodPhase
	}{
		{name: "never-ok", phase: v1.PodSucceeded},
		{name: "never-fail", phase: v1.PodFailed},
		{name: "onfailure-ok", phase: v1.PodSucceeded},
		{name: "onfailure-fail", phase: v1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := a.waitPod(time.Minute, tt.name+"-e2e-node", string(tt.phase), func(p *v1.Pod) bool {
				if p.Status.Phase != tt.phase {
					return false
				}
				if tt.phase == v1.PodRunning {
					return p.Status.ContainerStatuses[0].RestartCount >= 2
				}
				return true
			})
			cs := p.Status.ContainerStatuses[0]
			switch tt.phase {
			case v1.PodSucceeded, v1.PodFailed:
				if cs.RestartCount != 0 || cs.State.Terminated == nil {
					t.Fatalf("want one terminated run, got %s", describe(p))
				}
				if want := map[v1.PodPhase]string{v1.PodSucceeded: "Completed", v1.PodFailed: "Error"}[tt.phase]; cs.State.Terminated.Reason != want {
					t.Fatalf("reason %q, want %q", cs.State.Terminated.Reason, want)
				}
				// Nothing of a finished pod runs: its sandbox is stopped.
				rt := a.runtime()
				testenv.WaitFor(t, 30*time.Second, "sandbox stopped", func() (bool, error) {
					sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
						LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
					if err != nil || len(sbs) != 1 {
						return false, fmt.Errorf("%d sandboxes, %v", len(sbs), err)
					}
					return sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY, fmt.Errorf("sandbox %s", sbs[0].State)
				})
			}
		})
	}
}

func TestE2ESimInitContainersRunInOrder(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "init.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: init
spec:
  initContainers:
  - {name: first, image: `+simImage+`, command: ["sleep", "0.3"]}
  - {name: second, image: `+simImage+`, command: ["sh", "-c", "sleep 0.2; true"]}
  containers:
  - {name: main, image: `+simImage+`, command: ["sleep", "infinity"]}
`)
	a := startAgent(t, agentOpts{manifestDir: dir})
	p := a.waitPod(time.Minute, "init-e2e-node", "Running", isRunning)
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodInitialized && c.Status != v1.ConditionTrue {
			t.Fatalf("Initialized %s", c.Status)
		}
	}
	rt := a.runtime()
	byName := map[string]*runtimeapi.ContainerStatus{}
	for _, c := range containersOf(t, rt, string(p.UID)) {
		st, err := rt.ContainerStatus(context.Background(), c.Id)
		if err != nil {
			t.Fatal(err)
		}
		byName[c.Metadata.Name] = st
	}
	first, second, main := byName["first"], byName["second"], byName["main"]
	if first == nil || second == nil || main == nil {
		t.Fatalf("containers %v", byName)
	}
	if second.StartedAt < first.FinishedAt || main.StartedAt < second.FinishedAt {
		t.Fatalf("out of order: first %d-%d, second %d-%d, main started %d",
			first.StartedAt, first.FinishedAt, second.StartedAt, second.FinishedAt, main.StartedAt)
	}
	if first.ExitCode != 0 || second.ExitCode != 0 {
		t.Fatalf("init exit codes %d %d", first.ExitCode, second.ExitCode)
	}
}

func TestE2ESimManifestRemovalKillsPod(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "keep.yaml", podYAML("keep", simImage, "", `["sleep", "infinity"]`))
	writeManifest(t, dir, "gone.yaml", podYAML("gone", simImage, "", `["sleep", "infinity"]`))
	// An invalid manifest is reported and skipped; it disturbs nobody.
	writeManifest(t, dir, "broken.yaml", podYAML("broken", "", "", `["sleep", "infinity"]`))
	a := startAgent(t, agentOpts{manifestDir: dir})
	gone := a.waitPod(time.Minute, "gone-e2e-node", "Running", isRunning)
	keep := a.waitPod(time.Minute, "keep-e2e-node", "Running", isRunning)
	testenv.WaitFor(t, 30*time.Second, "the broken manifest reported by file and field", func() (bool, error) {
		return a.logContains("broken.yaml") && a.logContains("image"), nil
	})
	rt := a.runtime()
	if n := len(containersOf(t, rt, string(gone.UID))); n != 1 {
		t.Fatalf("gone has %d containers", n)
	}
	if err := os.Remove(filepath.Join(dir, "gone.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "gone's containers and sandbox removed", func() (bool, error) {
		sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(gone.UID)}})
		if err != nil {
			return false, err
		}
		n := len(containersOf(t, rt, string(gone.UID)))
		return n == 0 && len(sbs) == 0, fmt.Errorf("%d containers, %d sandboxes left", n, len(sbs))
	})
	testenv.WaitFor(t, 30*time.Second, "gone disappears from /pods", func() (bool, error) {
		_, err := a.pod("gone-e2e-node")
		return err != nil, nil
	})
	// keep was not disturbed: same container, never restarted.
	p := a.waitPod(10*time.Second, "keep-e2e-node", "still Running", isRunning)
	if p.Status.ContainerStatuses[0].ContainerID != keep.Status.ContainerStatuses[0].ContainerID {
		t.Fatalf("keep's container changed")
	}
}

func TestE2ESimPushEndpoint(t *testing.T) {
	a := startAgent(t, agentOpts{})
	base, client := a.mainURL("/pods"), a.mainClient()
	post := func(body string) (int, string) { return a.postPod(t, body) }
	tests := []struct {
		name     string
		body     string
		wantCode int
		wantBody string
	}{
		{name: "not yaml", body: "{{{", wantCode: http.StatusBadRequest},
		{name: "missing image", body: podYAML("bad", "", "", `["true"]`), wantCode: http.StatusBadRequest, wantBody: "image"},
		{name: "bad restart policy", body: podYAML("bad", simImage, "Sometimes", `["true"]`), wantCode: http.StatusBadRequest, wantBody: "restartPolicy"},
		{name: "valid", body: podYAML("pushed", simImage, "", `["sleep", "infinity"]`), wantCode: http.StatusCreated, wantBody: "pushed-e2e-node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(tt.body)
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Fatalf("POST: %d %q, want %d containing %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	p := a.waitPod(time.Minute, "pushed-e2e-node", "Running", isRunning)
	req, _ := http.NewRequest(http.MethodDelete, base+"/default/pushed-e2e-node", nil)
	if code := statusOf(t)(client.Do(req)); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	rt := a.runtime()
	testenv.WaitFor(t, time.Minute, "pushed pod removed from the runtime", func() (bool, error) {
		n := len(containersOf(t, rt, string(p.UID)))
		return n == 0, fmt.Errorf("%d containers left", n)
	})
	req, _ = http.NewRequest(http.MethodDelete, base+"/default/pushed-e2e-node", nil)
	if code := statusOf(t)(client.Do(req)); code != http.StatusNotFound {
		t.Fatalf("second DELETE: %d, want 404", code)
	}
}

func TestE2ESimMetricsAndHealthz(t *testing.T) {
	dir := t.TempDir()
	writePods(t, dir, "m", 3)
	a := startAgent(t, agentOpts{manifestDir: dir})
	waitAllRunning(t, a, 3, time.Minute)
	testenv.WaitFor(t, 30*time.Second, "metrics show 3 running pods", func() (bool, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", a.roPort))
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			"kubelet_running_pods 3",
			`kubelet_running_containers{container_state="running"} 3`,
			"kubelet_pod_start_duration_seconds_count",
			"kubelet_pleg_relist_duration_seconds_count",
			"actorlet_actor_restarts_total",
		} {
			if !bytes.Contains(b, []byte(want)) {
				return false, fmt.Errorf("metrics lack %q", want)
			}
		}
		return true, nil
	})
}

func TestE2ESimKill9AdoptsContainers(t *testing.T) {
	// The runtime runs as its own process, so it outlives actorlet.
	root, sock, rt := simProcess(t)

	dir := t.TempDir()
	writePods(t, dir, "adopt", 50)
	a := startAgent(t, agentOpts{endpoint: sock, manifestDir: dir, rootDir: filepath.Join(root, "agent")})
	waitAllRunning(t, a, 50, 2*time.Minute)
	ids := func() []string { return containerStates(t, rt) }
	before := ids()
	if len(before) != 50 {
		t.Fatalf("%d containers before, want 50", len(before))
	}
	sbBefore := len(allSandboxes(t, rt))

	a.kill9()
	a.start()
	waitAllRunning(t, a, 50, 2*time.Minute)
	after := ids()
	if strings.Join(before, ",") != strings.Join(after, ",") {
		t.Fatalf("containers changed across kill -9:\nbefore %v\nafter  %v", before, after)
	}
	if n := len(allSandboxes(t, rt)); n != sbBefore {
		t.Fatalf("sandboxes %d -> %d", sbBefore, n)
	}
	pods, err := a.pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("%s restart count %d after an actorlet restart", p.Name, p.Status.ContainerStatuses[0].RestartCount)
		}
	}
}
