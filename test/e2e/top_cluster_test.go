package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestMetricsServerTop is the user's `kubectl top` on an actorlet node. A
// real metrics-server (deploy/local/metrics-server.sh: built from the Go
// module proxy, registered as the APIService v1beta1.metrics.k8s.io through
// the API server's aggregation layer) scrapes the node's /metrics/resource
// with its client certificate, which the node authorizes with a
// SubjectAccessReview on nodes/metrics. kubectl top pod then shows a pod that
// allocated 64 MiB (the sim's alloc) using 64Mi more than an idle one, and
// kubectl top node shows the node using CPU and at least its pods' memory.
func TestMetricsServerTop(t *testing.T) {
	const node = "e2e-top"
	c := newCluster(t)
	ms := testenv.MetricsServer(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("metrics-server log %s, lines naming %s:\n%s", ms.Log, node, linesNaming(ms.Log, node, 20))
		}
	})
	c.startNode(t, node, agentOpts{})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)

	ctx := context.Background()
	for name, cmd := range map[string]string{"top-idle": "sleep infinity", "top-hog": "alloc 64Mi; sleep infinity"} {
		pod := apiPod(name, node, simImage, "sh", "-c", cmd)
		pod.Labels = map[string]string{"app": "e2e-top"}
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = c.cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	c.waitPod(t, "default", "top-idle", "Running", time.Minute, isRunning)
	c.waitPod(t, "default", "top-hog", "Running", time.Minute, isRunning)

	// metrics-server answers for a pod once it has two scrapes of it (a CPU
	// rate needs two points): up to two --metric-resolution periods (15 s).
	var pods map[string]topRow
	testenv.WaitFor(t, 3*time.Minute, "kubectl top pod -l app=e2e-top --containers: both pods", func() (bool, error) {
		rows, err := kubectlTop(c, "POD", "pod", "-n", "default", "-l", "app=e2e-top", "--containers")
		pods = rows
		return err == nil && len(rows) == 2, fmt.Errorf("rows %v: %w", rows, err)
	})
	for name, row := range pods {
		if row["NAME"] != "main" {
			t.Errorf("kubectl top pod --containers: %s's container is %q, want main", name, row["NAME"])
		}
		if cpu := row.quantity(t, "CPU(cores)"); cpu.Sign() <= 0 || cpu.Cmp(resource.MustParse("1")) > 0 {
			t.Errorf("kubectl top pod: %s uses CPU %s, want more than 0 and at most a core (the sim's container: 10m)", name, cpu.String())
		}
	}
	idleMem := pods["top-idle"].quantity(t, "MEMORY(bytes)")
	hogMem := pods["top-hog"].quantity(t, "MEMORY(bytes)")
	if idleMem.Sign() <= 0 {
		t.Errorf("kubectl top pod: top-idle uses memory %s, want more than 0", idleMem.String())
	}
	diff := hogMem.Value() - idleMem.Value()
	if diff < 63<<20 || diff > 65<<20 {
		t.Errorf("kubectl top pod: top-hog uses %s, top-idle %s: %d MiB more, want 64 (alloc 64Mi)",
			hogMem.String(), idleMem.String(), diff>>20)
	}

	var row topRow
	testenv.WaitFor(t, 2*time.Minute, "kubectl top node "+node, func() (bool, error) {
		rows, err := kubectlTop(c, "NAME", "node", node)
		row = rows[node]
		return err == nil && row != nil, fmt.Errorf("rows %v: %w", rows, err)
	})
	if cpu := row.quantity(t, "CPU(cores)"); cpu.Sign() <= 0 {
		t.Errorf("kubectl top node: CPU %s, want more than 0", cpu.String())
	}
	nodeMem := row.quantity(t, "MEMORY(bytes)")
	if nodeMem.Value() < hogMem.Value()+idleMem.Value() {
		t.Errorf("kubectl top node: memory %s, less than its pods' %s + %s", nodeMem.String(), hogMem.String(), idleMem.String())
	}
	for _, col := range []string{"CPU(%)", "MEMORY(%)"} {
		var pct int
		if _, err := fmt.Sscanf(row[col], "%d%%", &pct); err != nil || pct < 0 || pct > 100 {
			t.Errorf("kubectl top node: %s = %q, want a percentage of the node's allocatable", col, row[col])
		}
	}
}

// topRow is one row of kubectl top: column header -> value.
type topRow map[string]string

func (r topRow) quantity(t *testing.T, col string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(r[col])
	if err != nil {
		t.Fatalf("kubectl top: column %s = %q: %v (row %v)", col, r[col], err, r)
	}
	return q
}

// kubectlTop runs kubectl top args as the admin and returns its rows keyed
// by the column key.
func kubectlTop(c *cluster, key string, args ...string) (map[string]topRow, error) {
	cmd := exec.Command(c.env.Kubectl, append([]string{"--kubeconfig", c.env.AdminKubeconfig, "--request-timeout", "20s", "top"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl top %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	header := strings.Fields(lines[0])
	rows := map[string]topRow{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(header) {
			return nil, fmt.Errorf("kubectl top %s: row %q does not match header %q", strings.Join(args, " "), l, lines[0])
		}
		r := topRow{}
		for i, h := range header {
			r[h] = f[i]
		}
		rows[r[key]] = r
	}
	return rows, nil
}

// linesNaming returns the last n lines of the file at path that contain s.
func linesNaming(path, s string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var hits []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(l, s) {
			hits = append(hits, l)
		}
	}
	return strings.Join(hits[max(0, len(hits)-n):], "\n")
}
