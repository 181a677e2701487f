package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Sidecars (restartable init containers) and the managed /etc/hosts, over
// the real binary on sim.
func TestE2ESimSidecarAndHostAliases(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "sidecar.yaml", busyboxPod("withsidecar",
		`spec.hostAliases: [{ip: "10.1.2.3", hostnames: ["db.local"]}]`,
		`spec.initContainers: [{name: proxy, image: `+simImage+`, restartPolicy: Always, command: ["sleep", "infinity"]},`+
			` {name: setup, image: `+simImage+`, command: ["sh", "-c", "sleep 0.2; true"]}]`,
		`command: ["sh", "-c", "cat /etc/hosts; sleep infinity"]`))
	a := startAgent(t, agentOpts{manifestDir: dir})
	p := a.waitPod(time.Minute, "withsidecar-e2e-node", "Running with its sidecar", func(p *v1.Pod) bool {
		return isRunning(p) && len(p.Status.InitContainerStatuses) == 2 &&
			p.Status.InitContainerStatuses[0].State.Running != nil &&
			p.Status.InitContainerStatuses[1].State.Terminated != nil
	})
	for _, c := range p.Status.Conditions {
		if c.Status != v1.ConditionTrue {
			t.Errorf("condition %s is %s: %s", c.Type, c.Status, c.Message)
		}
	}
	a.waitLog(t, "withsidecar-e2e-node", "app", "hostAliases in the managed /etc/hosts", func(log string) bool {
		return strings.Contains(log, "10.1.2.3\tdb.local") && strings.Contains(log, "withsidecar")
	})
}
