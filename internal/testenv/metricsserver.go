package testenv

import (
	"fmt"
	"testing"
	"time"
)

// metricsServerTimeout bounds deploy/local/metrics-server.sh up once the
// control plane is up: the first run builds metrics-server (about 2.5 min on
// 2 cores with cold caches).
const metricsServerTimeout = 15 * time.Minute

// MetricsServerEnv is what deploy/local/metrics-server.sh up prints.
type MetricsServerEnv struct {
	URL        string // METRICS_SERVER: https://<host ip>:<port>, where it serves
	Kubeconfig string // METRICS_SERVER_KUBECONFIG: its identity (user metrics-server)
	Log        string // METRICS_SERVER_LOG: its log (-v=2: a line per node scraped)
}

var metricsServer part[MetricsServerEnv]

// MetricsServer brings up the local control plane (as ControlPlane) and a
// real metrics-server registered as the APIService v1beta1.metrics.k8s.io
// through deploy/local/metrics-server.sh up, once per test process, and
// returns what the script printed: once it returns, the APIService is
// Available and `kubectl top` asks metrics-server, which scrapes every
// Node's /metrics/resource at its InternalIP and status port every 15 s.
// When the machine cannot run it (script exit 3: no Go toolchain to build
// it, no non-loopback IPv4 address) the test is skipped with the reason, or
// fails when CI=true.
//
// metrics-server stays up after the tests, like the control plane;
// `deploy/local/metrics-server.sh down` (or controlplane.sh down) stops it.
func MetricsServer(t testing.TB) MetricsServerEnv {
	t.Helper()
	ControlPlane(t)
	root := RepoRoot(t)
	metricsServer.once.Do(func() {
		timeout := scriptBudget(t, metricsServerTimeout)
		msg := fmt.Sprintf("no answer within %v (the first run builds metrics-server, ~2.5 min: "+
			"run deploy/local/metrics-server.sh build first)", timeout)
		metricsServer.up(root, "metrics-server.sh", timeout, msg, func(vals map[string]string) (MetricsServerEnv, bool) {
			e := MetricsServerEnv{
				URL:        vals["METRICS_SERVER"],
				Kubeconfig: vals["METRICS_SERVER_KUBECONFIG"],
				Log:        vals["METRICS_SERVER_LOG"],
			}
			return e, e.URL != "" && e.Kubeconfig != "" && e.Log != ""
		})
	})
	return metricsServer.get(t, "metrics-server", "deploy/local/metrics-server.sh")
}
