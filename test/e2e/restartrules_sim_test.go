package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// Container restart rules (ContainerRestartRules, beta and on since
// v1.35) on the simulated runtime, through the real binary: the pods of
// upstream's "Container Restart Rules" NodeConformance specs
// (test/e2e/common/node/container_restart_policy.go) and of the Job spec
// "containers restarted by container restart policy should not trigger
// PodFailurePolicy" (test/e2e/apps/job.go: a container with restartPolicy
// OnFailure in a pod with Never that fails once, then succeeds).

const (
	rule42    = `restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]`
	ruleNot0  = `restartPolicyRules: [{action: Restart, exitCodes: {operator: NotIn, values: [0]}}]`
	ctrNever  = `restartPolicy: Never`
	ctrAlways = `restartPolicy: Always`
	exit42    = `command: ["sh", "-c", "sleep 0.2; exit 42"]`
	exit1     = `command: ["sh", "-c", "sleep 0.2; exit 1"]`
	exit3     = `command: ["sh", "-c", "sleep 0.2; exit 3"]`
)

func TestE2ESimContainerRestartRules(t *testing.T) {
	dir := t.TempDir()
	// failOnce as upstream's Job spec: the first run leaves a mark on a
	// file the pod mounts and fails, the second finds it and succeeds.
	flag := filepath.Join(t.TempDir(), "fail-once")
	if err := os.WriteFile(flag, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, dir, "rules.yaml", manifests(
		busyboxPod("rule-match", neverRestart, grace2, exit42, ctrNever, rule42),
		busyboxPod("rule-mismatch", neverRestart, grace2, exit1, ctrNever, rule42),
		busyboxPod("rule-notin", neverRestart, grace2, exit3, ctrNever, ruleNot0),
		busyboxPod("ctr-never", "spec.restartPolicy: Always", grace2, exit1, ctrNever),
		busyboxPod("ctr-always", neverRestart, grace2, exit1, ctrAlways),
		busyboxPod("pod-always", "spec.restartPolicy: Always", grace2, exit1),
		busyboxPod("fail-once", neverRestart, grace2, `restartPolicy: OnFailure`,
			`command: ["sh", "-c", "sleep 0.2; if [ -s /mnt/fail-once ]; then exit 0; fi; echo failed > /mnt/fail-once; exit 1"]`,
			`volumeMounts: [{name: flag, mountPath: /mnt/fail-once}]`,
			`spec.volumes: [{name: flag, hostPath: {path: `+flag+`, type: File}}]`),
	))
	// Refused as the v1.37 API server refuses it: RestartAllContainers
	// is alpha and off, and rules need the container's restartPolicy.
	writeManifest(t, dir, "bad.yaml", manifests(
		busyboxPod("bad-action", neverRestart, exit42, ctrNever,
			`restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [42]}}]`),
		busyboxPod("bad-no-policy", neverRestart, exit42, rule42)))
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--crashloop-backoff-initial", "200ms", "--crashloop-backoff-max", "1s"}})

	restarted := func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 2
	}
	for _, tt := range []struct{ name, why string }{
		{"rule-match", "exit code 42 matches the rule In [42]"},
		{"rule-notin", "exit code 3 matches the rule NotIn [0]"},
		{"ctr-always", "the container's own restartPolicy Always overrides the pod's Never"},
		{"pod-always", "no container-level policy: the pod's Always"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := a.waitPod(time.Minute, tt.name+"-e2e-node", "restarted twice ("+tt.why+")", restarted)
			if p.Status.Phase != v1.PodRunning {
				t.Errorf("phase %s while its container is being restarted, want Running: %s", p.Status.Phase, describe(p))
			}
			if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode == 0 {
				t.Errorf("lastState %+v, want the failed run", last)
			}
		})
	}
	for _, tt := range []struct{ name, why string }{
		{"rule-mismatch", "exit code 1 does not match In [42], the container's Never applies"},
		{"ctr-never", "the container's own restartPolicy Never overrides the pod's Always"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := a.waitPod(time.Minute, tt.name+"-e2e-node", "Failed ("+tt.why+")", func(p *v1.Pod) bool {
				return p.Status.Phase == v1.PodFailed
			})
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 1 {
				t.Errorf("want one terminated run with exit code 1, got %s", describe(p))
			}
		})
	}
	t.Run("fail-once", func(t *testing.T) {
		p := a.waitPod(time.Minute, "fail-once-e2e-node", "Succeeded after one restart", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
		})
		cs := p.Status.ContainerStatuses[0]
		if p.Status.Phase != v1.PodSucceeded || cs.RestartCount != 1 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			t.Fatalf("want Succeeded with one restart (a PodFailurePolicy on exit code 1 must not see Failed): %s", describe(p))
		}
		if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
			t.Errorf("lastState %+v, want the failed first run (exit code 1)", last)
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, msg := range []string{
			`spec.containers[0].restartPolicyRules[0].action: Unsupported value: \"RestartAllContainers\": supported values: \"Restart\"`,
			"spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used",
		} {
			testenv.WaitFor(t, 30*time.Second, "refusal logged: "+msg, func() (bool, error) { return a.logContains(msg), nil })
		}
		pods, err := a.pods()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if strings.HasPrefix(p.Name, "bad-") {
				t.Errorf("invalid pod %s runs: %s", p.Name, describe(&p))
			}
		}
	})
}
