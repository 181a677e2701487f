package pod

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"

	"github.com/actorlet/actorlet/adapters/podfiles"
)

func execProbe(period, failure int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: failure}
}

// stepUntil steps the fake clock a second at a time until the newest
// status satisfies cond; after each step the PodActor has handled the
// timers that step fired.
func (h *harness) stepUntil(what string, cond func(*v1.PodStatus) bool) *v1.PodStatus {
	h.t.Helper()
	var got *v1.PodStatus
	actortest.EventuallyDetail(h.t, what, func() bool {
		if got = h.latest(); got != nil && cond(got) {
			return true
		}
		h.clk.Step(time.Second)
		h.sync()
		return false
	}, func() string { return fmt.Sprintf("last status: %+v", h.latest()) })
	return got
}

// drainAtEnd makes the end of the test wait for the checkpoint writes of
// files (a podfiles adapter keeping checkpoints in dir), which happen off
// the caller: the actors stop, then a last write is waited for, so nothing
// writes in dir once the test removes it.
func (h *harness) drainAtEnd(files *podfiles.Files, dir string) {
	h.t.Cleanup(func() {
		h.stop()
		files.SaveCheckpoint(h.pod.UID, []byte("{}"))
		path := filepath.Join(dir, string(h.pod.UID)+".json")
		h.waitFor("the last checkpoint write", func() bool {
			b, err := os.ReadFile(path)
			tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp*"))
			return err == nil && string(b) == "{}" && len(tmp) == 0
		})
	})
}

func condition(s *v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func readyPod(s *v1.PodStatus) bool {
	return running(s) && s.ContainerStatuses[0].Ready && condition(s, v1.PodReady) == v1.ConditionTrue &&
		condition(s, v1.ContainersReady) == v1.ConditionTrue
}

func notReadyPod(s *v1.PodStatus) bool {
	return running(s) && !s.ContainerStatuses[0].Ready && condition(s, v1.PodReady) == v1.ConditionFalse &&
		condition(s, v1.ContainersReady) == v1.ConditionFalse
}

func TestReadinessDrivesConditions(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(1, 2)
	h := newHarnessWith(t, p, func(d *Deps) { d.Runtime.(*fakecri.Runtime).SetExec("app", 1) })
	st := h.waitStatus("running, not ready", notReadyPod)
	if st.ContainerStatuses[0].Started == nil || !*st.ContainerStatuses[0].Started {
		t.Errorf("started %v: a container without startup probe has started", st.ContainerStatuses[0].Started)
	}
	h.rt.SetExec("app", 0)
	h.stepUntil("ready", readyPod)
	h.rt.SetExec("app", 1)
	n := h.execCount("app")
	h.stepUntil("not ready after failureThreshold", notReadyPod)
	if got := h.execCount("app") - n; got < 2 {
		t.Errorf("not ready after %d failed probes, want failureThreshold 2", got)
	}
	if h.rt.Count("StopContainer") != 0 {
		t.Errorf("a readiness failure must not kill the container")
	}
}

func TestLivenessFailureRestartsContainer(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	grace := int64(7)
	p.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
	p.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = &grace
	p.Spec.Containers[0].LivenessProbe.InitialDelaySeconds = 3 // the restarted one is not killed at once
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	h.rt.SetExec("app", 1)
	st := h.stepUntil("restarted after liveness failure", func(s *v1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount == 1
	})
	h.rt.SetExec("app", 0)
	cs := st.ContainerStatuses[0]
	if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
		t.Fatalf("lastState %+v, want terminated with 137", cs.LastTerminationState)
	}
	var g []int64
	for _, s := range h.rt.Stops() {
		g = append(g, s.Timeout)
	}
	if len(g) == 0 || g[0] != grace {
		t.Errorf("StopContainer timeouts %v, want the probe's terminationGracePeriodSeconds %d first", g, grace)
	}
	h.waitStatus("running again", func(s *v1.PodStatus) bool { return running(s) && s.ContainerStatuses[0].RestartCount == 1 })
}

func TestLivenessFailureWithNeverFailsPod(t *testing.T) {
	p := testPod(v1.RestartPolicyNever, "app")
	p.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	h.rt.SetExec("app", 1)
	h.stepUntil("Failed", func(s *v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if n := h.rt.Count("CreateContainer"); n != 1 {
		t.Fatalf("CreateContainer %d: restartPolicy Never must not restart", n)
	}
}

func TestStartupProbeGatesLivenessAndReadiness(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"startup"}}},
		PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 30}
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"readiness"}}},
		PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"liveness"}}},
		PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	// The startup probe fails (below its threshold): not started.
	h := newHarnessWith(t, p, func(d *Deps) { d.Runtime.(*fakecri.Runtime).SetExec("app", 1) })
	h.waitStatus("running, not started", func(s *v1.PodStatus) bool {
		cs := s.ContainerStatuses[0]
		return running(s) && cs.Started != nil && !*cs.Started && !cs.Ready
	})
	h.waitFor("a startup probe", func() bool { return h.execCount("app") > 0 })
	h.clk.Step(time.Second)
	h.clk.Step(time.Second)
	for _, e := range h.execLog() {
		if e != "app startup" {
			t.Errorf("exec %q before the startup probe succeeded", e)
		}
	}
	h.rt.SetExec("app", 0)
	st := h.stepUntil("started and ready", readyPod)
	if !*st.ContainerStatuses[0].Started {
		t.Fatalf("not started")
	}
	h.waitFor("liveness probing", func() bool {
		for _, e := range h.execLog() {
			if e == "app liveness" {
				return true
			}
		}
		return false
	})
}

func TestReadinessSurvivesPodActorRestart(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(10, 3)
	dir := t.TempDir()
	files := podfiles.New("", dir, quiet)
	h := newHarnessWith(t, p, func(d *Deps) { d.Files = files })
	h.drainAtEnd(files, dir)
	h.waitStatus("ready", readyPod)
	// The checkpoint is written off the mailbox, soon after the result.
	h.waitFor("the checkpoint on disk", func() bool {
		_, err := os.Stat(filepath.Join(dir, "uid-1.json"))
		return err == nil
	})
	// From now on the probe fails, but below its failureThreshold: after
	// the restart the container must stay ready, never flap to not ready.
	h.rt.SetExec("app", 1)
	h.mu.Lock()
	h.statuses = nil
	h.mu.Unlock()
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("a status after the restart", func() bool { return h.latest() != nil })
	h.poke()
	h.waitFor("a probe after the restart", func() bool { return h.execCount("app") >= 2 })
	h.poke()
	h.waitStatus("running", running)
	h.mu.Lock()
	for i, s := range h.statuses {
		if !readyPod(&s) {
			t.Errorf("status %d after the restart is not ready: %+v", i, s.ContainerStatuses)
		}
	}
	h.mu.Unlock()
	// Three failures (the threshold) make it not ready.
	h.stepUntil("not ready", notReadyPod)
}

func TestNotReadyIsNotReportedReadyAfterRestart(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(10, 1)
	dir := t.TempDir()
	files := podfiles.New("", dir, quiet)
	h := newHarnessWith(t, p, func(d *Deps) {
		d.Files = files
		d.Runtime.(*fakecri.Runtime).SetExec("app", 1)
	})
	h.drainAtEnd(files, dir)
	h.waitStatus("not ready", notReadyPod)
	h.mu.Lock()
	h.statuses = nil
	h.mu.Unlock()
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("a status after the restart", func() bool { return h.latest() != nil })
	h.waitFor("a probe after the restart", func() bool { return h.execCount("app") >= 2 })
	h.poke()
	h.waitStatus("not ready", notReadyPod)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, s := range h.statuses {
		if len(s.ContainerStatuses) > 0 && s.ContainerStatuses[0].Ready {
			t.Errorf("status %d after the restart reports ready", i)
		}
	}
}

func TestProbesStopWithTheContainer(t *testing.T) {
	p := testPod(v1.RestartPolicyNever, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
	h := newHarness(t, p)
	h.waitStatus("ready", readyPod)
	h.rt.ExitNamed("app", 0)
	h.poke()
	h.waitStatus("Succeeded", func(s *v1.PodStatus) bool { return s.Phase == v1.PodSucceeded })
	// The ProbeActor is stopped with its container; once it is gone no tick
	// can probe again.
	probeID := h.childPID().Id + "/" + probe.Name("app", messages.ProbeReadiness)
	h.waitFor("the probe actor stopped", func() bool {
		_, alive := h.sys.ProcessRegistry.GetLocal(probeID)
		return !alive
	})
	n := h.execCount("app")
	for range 5 {
		h.clk.Step(time.Second)
	}
	for _, c := range h.rt.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("container still running")
		}
	}
	if got := h.execCount("app"); got != n {
		t.Fatalf("%d probes after the container stopped", got-n)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name    string
		results map[string]*ctrResult
		want    string
	}{
		{name: "no results", results: map[string]*ctrResult{}, want: ""},
		{name: "nil results", want: ""},
		{
			name:    "started and ready",
			results: map[string]*ctrResult{"c1": {Started: &yes, Ready: &yes}},
			want:    "c1 started=true ready=true",
		},
		{
			name:    "not ready, start unknown",
			results: map[string]*ctrResult{"c1": {Ready: &no}},
			want:    "c1 started=? ready=false",
		},
		{
			name:    "several containers",
			results: map[string]*ctrResult{"c1": {Ready: &yes}, "c2": {Started: &no}, "c3": {}},
			want:    "c1 started=? ready=true; c2 started=false ready=?; c3 started=? ready=?",
		},
		{
			name:    "a nil entry is dropped",
			results: map[string]*ctrResult{"c1": {Ready: &yes}, "c2": nil},
			want:    "c1 started=? ready=true",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encodeCheckpoint("uid-1", tt.results)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeCheckpoint("uid-1", b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if s := describeResults(got); s != tt.want {
				t.Errorf("decoded %q from %s, want %q", s, b, tt.want)
			}
		})
	}
}

func TestCheckpointRejected(t *testing.T) {
	yes := true
	other, err := encodeCheckpoint("uid-2", map[string]*ctrResult{"c1": {Ready: &yes}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		b       []byte
		wantErr string
	}{
		{name: "another pod's", b: other, wantErr: `probe checkpoint of pod "uid-2", not "uid-1"`},
		{name: "garbage", b: []byte("{not json"), wantErr: "probe checkpoint: "},
		{name: "JSON of another shape", b: []byte(`[1,2]`), wantErr: "probe checkpoint: "},
		{name: "no pod UID", b: []byte(`{"containers":{"c1":{"ready":true}}}`), wantErr: `probe checkpoint of pod "", not "uid-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeCheckpoint("uid-1", tt.b)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want one with %q", err, tt.wantErr)
			}
			if got == nil || len(got) != 0 {
				t.Fatalf("results %v: a rejected checkpoint gives none (and no nil map)", got)
			}
		})
	}
}

func TestCheckpointEmpty(t *testing.T) {
	got, err := decodeCheckpoint("uid-1", nil) // no checkpoint written yet
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("decode of nothing = %v, %v; want an empty map and no error", got, err)
	}
}

func describeResults(r map[string]*ctrResult) string {
	b := func(p *bool) string {
		if p == nil {
			return "?"
		}
		return fmt.Sprint(*p)
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(r)) {
		out = append(out, fmt.Sprintf("%s started=%s ready=%s", id, b(r[id].Started), b(r[id].Ready)))
	}
	return strings.Join(out, "; ")
}
