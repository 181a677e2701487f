package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The user's path: kubectl exec and port-forward through the API server,
// which reaches the node's --port with its kubelet client certificate
// (authorized by a SubjectAccessReview on nodes/proxy).
func TestE2EClusterKubectlExec(t *testing.T) {
	const node = "e2e-exec"
	c := newCluster(t)
	c.startReachableNode(t, node)
	ctx := context.Background()
	for _, p := range []*v1.Pod{
		apiPod("shell", node, simImage, "sleep", "infinity"),
		apiPod("web", node, simImage, "httpd", "-f", "-p", "8080"),
	} {
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := p.Name
		t.Cleanup(func() {
			zero := int64(0)
			_ = c.cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		c.waitPod(t, "default", name, "Running", time.Minute, isRunning)
	}

	kubectl := func(stdin string, args ...string) (string, int, error) {
		cmd := exec.Command(c.env.Kubectl, append([]string{"--kubeconfig", c.env.AdminKubeconfig, "--request-timeout", "30s"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), ee.ExitCode(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return out.String(), 0, err
	}

	if out, _, err := kubectl("", "exec", "shell", "--", "echo", "hello"); err != nil || out != "hello\n" {
		t.Fatalf("kubectl exec echo hello = %q, %v", out, err)
	}
	if _, code, err := kubectl("", "exec", "shell", "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("kubectl exec exit 3: exit code %d (%v), want 3", code, err)
	}
	if out, _, err := kubectl("piped\nthrough\n", "exec", "-i", "shell", "--", "cat"); err != nil || out != "piped\nthrough\n" {
		t.Fatalf("kubectl exec -i cat = %q, %v", out, err)
	}

	// kubectl port-forward prints the local port, then forwards until killed.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(pctx, c.env.Kubectl, "--kubeconfig", c.env.AdminKubeconfig, "port-forward", "pod/web", "--address", "127.0.0.1", ":8080")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
	port := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				n, _ := strconv.Atoi(m[1])
				port <- n
				break
			}
		}
		for sc.Scan() { // keep draining
		}
	}()
	select {
	case p := <-port:
		code, body, err := getThrough(uint16(p))
		if err != nil || code != http.StatusOK || body != "ok\n" {
			t.Fatalf("GET through kubectl port-forward = %d %q %v (kubectl: %s)", code, body, err, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward did not start: %s", errb.String())
	}
}
