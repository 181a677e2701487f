package e2e

import (
	"fmt"
	"testing"
	"time"
)

// The same checks as TestE2EExecSim on real busybox containers: containerd's
// CRI streaming server (deploy/local/containerd.sh: stream_server_address
// 127.0.0.1, port 0) behind actorlet's proxy.
func TestE2EExecContainerd(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	writeManifest(t, dir, "shell.yaml", podYAML("shell", image, "", `["sleep", "3600"]`))
	writeManifest(t, dir, "web.yaml", podYAML("web", image, "", `["sh", "-c", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"]`))
	writeManifest(t, dir, "ticker.yaml", podYAML("ticker", image, "", fmt.Sprintf("[\"sh\", \"-c\", %q]", tickScript(240))))
	var uids []string
	for _, p := range []string{"shell", "web", "ticker"} {
		pod := a.waitPod(2*time.Minute, p+"-e2e-node", "Running", isRunning)
		uids = append(uids, string(pod.UID))
	}
	t.Cleanup(func() { cleanupPods(t, a, dir, uids...) })

	checkStreaming(t, a, "hello\n")
}
