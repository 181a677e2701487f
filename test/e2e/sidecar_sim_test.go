package e2e

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// Sidecars (restartable init containers) and the managed /etc/hosts, over
// the real binary on sim.
func TestE2ESimSidecarAndHostAliases(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "sidecar.yaml", `apiVersion: v1
kind: Pod
metadata: {name: withsidecar}
spec:
  hostAliases:
  - ip: "10.1.2.3"
    hostnames: ["db.local"]
  initContainers:
  - name: proxy
    image: localhost/actorlet/busybox:1
    restartPolicy: Always
    command: ["sleep", "infinity"]
  - name: setup
    image: localhost/actorlet/busybox:1
    command: ["sh", "-c", "sleep 0.2; true"]
  containers:
  - name: app
    image: localhost/actorlet/busybox:1
    command: ["sh", "-c", "cat /etc/hosts; sleep infinity"]
`)
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
	url, client := a.mainURL("/containerLogs/default/withsidecar-e2e-node/app"), a.mainClient()
	testenv.WaitFor(t, 30*time.Second, "hostAliases in the managed /etc/hosts", func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "10.1.2.3\tdb.local") && strings.Contains(string(b), "withsidecar"),
			fmt.Errorf("log %q", b)
	})
}
