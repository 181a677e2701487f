package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
)

// 1,000 pods on sim, each with an exec readiness probe every second: the
// probes keep their period. Reports the achieved mean period (drift from
// 1 s) and the CPU the agent (with its embedded runtime) used meanwhile.
func TestE2ESimProbeDensity1000(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: 1,000 pods with probes")
	}
	const n = 1000
	dir := t.TempDir()
	for f := 0; f*50 < n; f++ {
		var b strings.Builder
		for i := f * 50; i < n && i < f*50+50; i++ {
			b.WriteString("---\n" + busyboxPod(fmt.Sprintf("probed-%04d", i), grace2, touchReady, readyFile))
		}
		writeManifest(t, dir, fmt.Sprintf("probed-%02d.yaml", f), b.String())
	}
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--max-pods", "1100", "--pleg-relist-period", "1s"}})
	waitAll(t, a, n, 5*time.Minute, "Ready", isReady)
	// Measure in the steady state: from when every pod has probed twice
	// more after all were Ready (the start-up burst is over).
	base := a.probeTotal(t)
	testenv.WaitFor(t, time.Minute, "two more probes per pod", func() (bool, error) {
		got := a.probeTotal(t) - base
		return got >= 2*n, fmt.Errorf("%.0f probes since all were Ready", got)
	})
	// Then count 10 more probes per pod: no pod may be probed more often
	// than its period (a correctness bound, whatever the load). The achieved
	// period is a figure of the machine's load, logged here and measured by
	// the bench (`actorlet-bench --scenario probes`), never asserted.
	sample := func() (float64, time.Duration, time.Time) {
		before := time.Now()
		c, cpu := a.probeTotal(t), a.cpuTime(t)
		return c, cpu, before.Add(time.Since(before) / 2) // timed at the middle of its scrape
	}
	c0, cpu0, t0 := sample()
	testenv.WaitFor(t, 5*time.Minute, "ten more probes per pod", func() (bool, error) {
		got := a.probeTotal(t) - c0
		return got >= 10*n, fmt.Errorf("%.0f probes of %d", got, 10*n)
	})
	c1, cpu1, t1 := sample()
	elapsed := t1.Sub(t0)
	probes := c1 - c0
	period := time.Duration(float64(elapsed) * n / probes)
	cpu := (cpu1 - cpu0).Seconds() / elapsed.Seconds()
	t.Logf("1000 pods, exec readiness probe every 1s: %.0f probes in %s = %.1f/s; mean period %s (drift %+.1f%%); CPU %.2f cores (%.0f us per probe, agent + embedded sim)",
		probes, elapsed.Round(time.Millisecond), probes/elapsed.Seconds(), period.Round(time.Millisecond),
		(period.Seconds()-1)*100, cpu, (cpu1-cpu0).Seconds()/probes*1e6)
	// A scrape may land just before or after a round of probes: allow one
	// round more than the window holds.
	if max := float64(n) * (elapsed.Seconds() + 1); probes > max {
		t.Fatalf("%.0f probes in %s: more than one per pod per second (at most %.0f)", probes, elapsed, max)
	}
	// And every pod is still Ready after the window.
	waitAll(t, a, n, time.Minute, "Ready", isReady)
}

// probeTotal sums prober_probe_total over all series.
func (a *agent) probeTotal(t *testing.T) float64 {
	t.Helper()
	sum, err := a.metricSum("prober_probe_total")
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// cpuTime is the agent process's user+system CPU time so far.
func (a *agent) cpuTime(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}
