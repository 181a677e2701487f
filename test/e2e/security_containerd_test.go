package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// securityPod is the manifest of a pod with one container per entry of
// ctrs (name: extra YAML lines of the container, indented by 4), each
// running command, and spec lines (indented by 2).
func securityPod(name, image, command string, spec []string, ctrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  terminationGracePeriodSeconds: 2\n", name)
	for _, s := range spec {
		b.WriteString("  " + s + "\n")
	}
	b.WriteString("  containers:\n")
	for _, c := range ctrs {
		ctrName, extra, _ := strings.Cut(c, ":")
		fmt.Fprintf(&b, "  - name: %s\n    image: %s\n    command: %s\n", ctrName, image, command)
		if extra = strings.TrimSpace(extra); extra != "" {
			b.WriteString("    " + extra + "\n")
		}
	}
	return b.String()
}

// Security settings reach containerd and the kernel as upstream's kubelet
// sets them: what a container sees of its hostname, capabilities and
// no_new_privs, and what is refused before any container exists.
func TestE2EContainerdSecurity(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	show := `["sh", "-c", "hostname; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; cat /proc/sys/kernel/shm_rmid_forced; echo ---; cat /etc/hosts; sleep 3600"]`
	// 61 characters + "-e2e-node" = a 70-character pod name.
	long := "long-" + strings.Repeat("n", 56)
	writeManifest(t, dir, "security.yaml", manifests(
		securityPod(long, image, show, nil, "main"),
		securityPod("priv", image, show, nil, "main: securityContext: {privileged: true}"),
		securityPod("nnp", image, show, nil, "main: securityContext: {allowPrivilegeEscalation: false}"),
		securityPod("override", image, show, []string{"hostname: custom-host", "subdomain: sub", "hostnameOverride: override-host"}, "main"),
		securityPod("nonroot-uid", image, show, nil, "explicit: securityContext: {runAsNonRoot: true, runAsUser: 0}"),
		securityPod("nonroot-image", image, show, nil, "image: securityContext: {runAsNonRoot: true}"),
		securityPod("safe-sysctl", image, show, []string{`securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: "1"}]}`}, "main"),
		securityPod("unsafe-sysctl", image, show, []string{`securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: "1"}, {name: kernel.msgmax, value: "10000000"}]}`}, "main"),
	))
	var uids []string
	t.Cleanup(func() { cleanupPods(t, a, dir, uids...) })
	// waitPod is agent.waitPod failing only the subtest t.
	waitPod := func(t *testing.T, timeout time.Duration, name, what string, cond func(*v1.Pod) bool) *v1.Pod {
		t.Helper()
		var got *v1.Pod
		testenv.WaitFor(t, timeout, name+": "+what, func() (bool, error) {
			p, err := a.pod(name)
			if err != nil {
				return false, err
			}
			got = p
			return cond(p), fmt.Errorf("phase %s %s, containers %s", p.Status.Phase, p.Status.Reason, describe(p))
		})
		uids = append(uids, string(got.UID))
		return got
	}
	output := func(t *testing.T, pod string) (status, hosts string) {
		t.Helper()
		var log string
		a.waitLog(t, pod, "main", "status and /etc/hosts printed", func(l string) bool {
			log = l
			return strings.Contains(l, "---\n") && strings.Contains(l, "localhost")
		})
		status, hosts, _ = strings.Cut(log, "---\n")
		return status, hosts
	}
	running := func(t *testing.T, name string) *v1.Pod {
		t.Helper()
		return waitPod(t, 2*time.Minute, name, "Running", isRunning)
	}

	t.Run("a 70-character pod name is cut to a 63-character hostname", func(t *testing.T) {
		full := long + "-e2e-node"
		p := running(t, full)
		status, hosts := output(t, full)
		want := full[:63]
		if got := strings.SplitN(status, "\n", 2)[0]; got != want {
			t.Errorf("hostname %q, want %q", got, want)
		}
		if line := p.Status.PodIP + "\t" + want; !strings.Contains(hosts, line+"\n") {
			t.Errorf("/etc/hosts has no line %q:\n%s", line, hosts)
		}
	})

	t.Run("a privileged container runs with every capability", func(t *testing.T) {
		running(t, "priv-e2e-node")
		status, _ := output(t, "priv-e2e-node")
		own, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Fatal(err)
		}
		want := regexp.MustCompile(`CapBnd:\s+(\w+)`).FindStringSubmatch(string(own))
		got := regexp.MustCompile(`CapEff:\s+(\w+)`).FindStringSubmatch(status)
		if want == nil || got == nil || got[1] != want[1] {
			t.Errorf("privileged container's effective capabilities %v, want containerd's whole bounding set %v:\n%s", got, want, status)
		}
	})

	t.Run("allowPrivilegeEscalation false sets no_new_privs", func(t *testing.T) {
		running(t, "nnp-e2e-node")
		if status, _ := output(t, "nnp-e2e-node"); !regexp.MustCompile(`(?m)^NoNewPrivs:\s+1$`).MatchString(status) {
			t.Errorf("want NoNewPrivs: 1 in /proc/self/status:\n%s", status)
		}
		running(t, "override-e2e-node") // any other container: no_new_privs off
		if status, _ := output(t, "override-e2e-node"); !regexp.MustCompile(`(?m)^NoNewPrivs:\s+0$`).MatchString(status) {
			t.Errorf("want NoNewPrivs: 0 without allowPrivilegeEscalation:\n%s", status)
		}
	})

	t.Run("hostnameOverride wins over hostname and subdomain", func(t *testing.T) {
		p := running(t, "override-e2e-node")
		status, hosts := output(t, "override-e2e-node")
		if got := strings.SplitN(status, "\n", 2)[0]; got != "override-host" {
			t.Errorf("hostname %q, want override-host", got)
		}
		if line := p.Status.PodIP + "\toverride-host\n"; !strings.Contains(hosts, line) {
			t.Errorf("/etc/hosts has no line %q:\n%s", line, hosts)
		}
	})

	t.Run("runAsNonRoot refuses root before creating the container", func(t *testing.T) {
		for _, tc := range []struct{ pod, ctr, msg string }{
			{pod: "nonroot-uid-e2e-node", ctr: "explicit", msg: "container's runAsUser breaks non-root policy (pod: %q, container: explicit)"},
			{pod: "nonroot-image-e2e-node", ctr: "image", msg: "container has runAsNonRoot and image will run as root (pod: %q, container: image)"},
		} {
			p := waitPod(t, 2*time.Minute, tc.pod, "CreateContainerConfigError", func(p *v1.Pod) bool {
				cs := p.Status.ContainerStatuses
				return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
			})
			want := fmt.Sprintf(tc.msg, fmt.Sprintf("%s_%s(%s)", p.Name, p.Namespace, p.UID))
			if got := p.Status.ContainerStatuses[0].State.Waiting.Message; got != want {
				t.Errorf("container %s: message %q,\nwant %q", tc.ctr, got, want)
			}
			if ctrs := containersOf(t, a.runtime(), string(p.UID)); len(ctrs) != 0 {
				t.Errorf("pod %s: %d containers in containerd, want none", tc.pod, len(ctrs))
			}
		}
	})

	t.Run("a safe sysctl is set, an unsafe one not allowed fails the pod", func(t *testing.T) {
		running(t, "safe-sysctl-e2e-node")
		if status, _ := output(t, "safe-sysctl-e2e-node"); !regexp.MustCompile(`(?m)^1$`).MatchString(status) {
			t.Errorf("kernel.shm_rmid_forced not 1 in the pod:\n%s", status)
		}
		p := waitPod(t, time.Minute, "unsafe-sysctl-e2e-node", "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != "SysctlForbidden" || p.Status.Message != `forbidden sysctl: "kernel.msgmax" not allowlisted` {
			t.Errorf("status %s %q, want SysctlForbidden with upstream's message", p.Status.Reason, p.Status.Message)
		}
		if ctrs := containersOf(t, a.runtime(), string(p.UID)); len(ctrs) != 0 {
			t.Errorf("%d containers in containerd for a refused pod", len(ctrs))
		}
	})
}
