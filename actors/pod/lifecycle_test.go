package pod

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"

	"github.com/actorlet/actorlet/adapters/podfiles"
)

func execHook(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func TestPostStartHookFailureKillsContainer(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: execHook("sh", "-c", "exit 3")}
	h := newHarnessWith(t, p, func(d *Deps) { d.Runtime.(*fakecri.Runtime).SetExec("app", 3) })
	st := h.waitStatus("restarted after the hook failure", func(s *v1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount >= 1
	})
	if term := st.ContainerStatuses[0].LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
		t.Fatalf("lastState %+v, want killed (137)", st.ContainerStatuses[0].LastTerminationState)
	}
	if h.rt.Count("StopContainer") == 0 {
		t.Fatal("the container of a failed postStart hook was not stopped")
	}
}

func TestPostStartHookSuccess(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: execHook("touch", "/tmp/started")}
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	h.waitFor("hook exec", func() bool { return h.execCount("app") == 1 })
	if h.rt.Count("StopContainer") != 0 {
		t.Fatal("stopped after a successful hook")
	}
}

func TestPreStopHookRunsBeforeStop(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	grace := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: execHook("sh", "-c", "echo bye")}
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	h.send(&messages.KillPod{UID: p.UID, Reason: "test"})
	h.waitFor("terminated", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.terminated
	})
	exec, stop := -1, -1
	for i, c := range h.rt.Calls() {
		if c == "ExecSync" && exec < 0 {
			exec = i
		}
		if c == "StopContainer" && stop < 0 {
			stop = i
		}
	}
	if exec < 0 || stop < 0 || exec > stop {
		t.Fatalf("preStop exec at %d, StopContainer at %d: want the hook first", exec, stop)
	}
	if log := h.execLog(); len(log) != 1 || log[0] != "app sh -c echo bye" {
		t.Fatalf("execs %q", log)
	}
	if stops := h.rt.Stops(); len(stops) == 0 || stops[0].Timeout < 28 || stops[0].Timeout > 30 {
		t.Fatalf("stops %+v: want the first with what is left of 30 s", stops)
	}
}

func TestTerminationMessage(t *testing.T) {
	tests := []struct {
		name    string
		policy  v1.TerminationMessagePolicy
		file    string
		log     string
		code    int32
		wantMsg string
	}{
		{name: "from the file", policy: v1.TerminationMessageReadFile, file: "bye now", code: 0, wantMsg: "bye now"},
		{name: "file wins over logs", policy: v1.TerminationMessageFallbackToLogsOnError, file: "from file", log: "from log\n", code: 1, wantMsg: "from file"},
		{name: "fallback to logs on error", policy: v1.TerminationMessageFallbackToLogsOnError, log: "line 1\nline 2\n", code: 1, wantMsg: "line 1\nline 2\n"},
		{name: "no fallback on success", policy: v1.TerminationMessageFallbackToLogsOnError, log: "line 1\n", code: 0, wantMsg: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod(v1.RestartPolicyNever, "app")
			p.Spec.Containers[0].TerminationMessagePolicy = tt.policy
			pods := t.TempDir()
			h := newHarnessWith(t, p, func(d *Deps) { d.Files = podfiles.New(pods, "", quiet) })
			h.waitStatus("Running", running)
			c := h.rt.Containers()[0]
			if len(c.Mounts) != 2 || c.Mounts[0].ContainerPath != "/dev/termination-log" || c.Mounts[1].ContainerPath != "/etc/hosts" ||
				!strings.HasPrefix(c.Mounts[0].HostPath, filepath.Join(pods, "uid-1", "containers", "app")) {
				t.Fatalf("mounts %+v", c.Mounts)
			}
			if tt.file != "" {
				if err := os.WriteFile(c.Mounts[0].HostPath, []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tt.log != "" {
				var b strings.Builder
				for _, l := range strings.SplitAfter(tt.log, "\n") {
					if l != "" {
						b.WriteString("2026-01-01T00:00:00.000000000Z stdout F " + l)
					}
				}
				if err := os.MkdirAll(filepath.Dir(c.LogPath), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(c.LogPath, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h.rt.ExitNamed("app", tt.code)
			h.poke()
			st := h.waitStatus("terminated", func(s *v1.PodStatus) bool { return s.ContainerStatuses[0].State.Terminated != nil })
			if got := st.ContainerStatuses[0].State.Terminated.Message; got != tt.wantMsg {
				t.Fatalf("message %q, want %q", got, tt.wantMsg)
			}
		})
	}
}

func TestActiveDeadlineFailsPod(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	ads := int64(30)
	p.Spec.ActiveDeadlineSeconds = &ads
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	h.clk.Step(29 * time.Second)
	h.poke() // the actor looks a second before the deadline
	h.clk.Step(time.Second)
	st := h.waitStatus("Failed", func(s *v1.PodStatus) bool {
		return s.Phase == v1.PodFailed && s.ContainerStatuses[0].State.Terminated != nil
	})
	if st.Reason != ReasonDeadlineExceeded {
		t.Fatalf("reason %q", st.Reason)
	}
	// The fake clock stood at +29s and then at +30s: a kill before the
	// deadline would have finished at +29s.
	if ran := st.ContainerStatuses[0].State.Terminated.FinishedAt.Sub(st.StartTime.Time); ran < 30*time.Second {
		t.Fatalf("killed %s after the start, before the %ds deadline", ran, ads)
	}
	h.waitFor("sandbox stopped", func() bool { return h.rt.Count("StopPodSandbox") == 1 })
	if h.rt.Count("CreateContainer") != 1 {
		t.Fatal("container restarted after the deadline")
	}
}
