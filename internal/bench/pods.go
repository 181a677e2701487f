package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Namespace holds every pod a bench creates.
const Namespace = "bench"

// podSpec is one pod a scenario creates.
type podSpec struct {
	name  string
	image string
	// probe adds an exec readiness probe that appends a line to
	// /tmp/probes every period (counted through the runtime).
	probe       bool
	probePeriod int
	// noToken: automountServiceAccountToken false (API pods).
	noToken bool
}

// probeFile is where the probe command leaves one line per execution.
const probeFile = "/tmp/probes"

func (p podSpec) manifest() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
    app: actorlet-bench
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, p.name, Namespace, p.image)
	if p.probe {
		fmt.Fprintf(&b, `    readinessProbe:
      exec:
        command: ["sh", "-c", "echo x >> %s"]
      periodSeconds: %d
      timeoutSeconds: 1
`, probeFile, p.probePeriod)
	}
	return []byte(b.String())
}

// pushClient creates and deletes pods through the node API (POST /pods,
// DELETE /pods/{ns}/{name}), retrying what a restarting actor may answer
// (503) for a while.
type pushClient struct {
	url     string
	client  *http.Client
	retries atomic.Int64
}

func newPushClient(url string, client *http.Client) *pushClient {
	return &pushClient{url: url, client: client}
}

func (c *pushClient) do(ctx context.Context, method, path string, body []byte, want int) ([]byte, error) {
	delay := 50 * time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, method, c.url+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err := c.client.Do(req)
		var b []byte
		if err == nil {
			b, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == want {
				return b, nil
			}
			err = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
			if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode < 500 {
				return nil, err
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, err
		}
		c.retries.Add(1)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// create pushes one pod and returns the name the node lists it under (as
// upstream for static pods, with the node name as a suffix) and its UID.
func (c *pushClient) create(ctx context.Context, p podSpec) (created, error) {
	b, err := c.do(ctx, http.MethodPost, "/pods", p.manifest(), http.StatusCreated)
	if err != nil {
		return created{}, err
	}
	var ref struct {
		UID  string `json:"uid"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &ref); err != nil || ref.Name == "" {
		return created{}, fmt.Errorf("push %s: answer %q: %v", p.name, b, err)
	}
	return created{name: ref.Name, uid: ref.UID, spec: p.name}, nil
}

// created is a pod as the node knows it.
type created struct {
	name string // as listed on /pods
	uid  string // "" when the target does not tell
	spec string // the manifest's name
}

// remove deletes a pushed pod by the name the node lists.
func (c *pushClient) remove(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/pods/"+Namespace+"/"+name, nil, http.StatusOK)
	return err
}

// podTarget is how pods reach the agent: the push API, a manifest
// directory, or (cluster mode) the API server.
type podTarget interface {
	create(ctx context.Context, p podSpec) (created, error)
	remove(ctx context.Context, c created) error
}

type pushTarget struct{ c *pushClient }

func (t pushTarget) create(ctx context.Context, p podSpec) (created, error) {
	return t.c.create(ctx, p)
}
func (t pushTarget) remove(ctx context.Context, c created) error { return t.c.remove(ctx, c.name) }

// fileTarget writes manifests; the node lists a static pod with its node
// name as a suffix.
type fileTarget struct{ dir, node string }

func (t fileTarget) create(_ context.Context, p podSpec) (created, error) {
	return created{name: p.name + "-" + t.node, spec: p.name}, writeManifest(t.dir, p)
}
func (t fileTarget) remove(_ context.Context, c created) error {
	return os.Remove(filepath.Join(t.dir, c.spec+".yaml"))
}

// writeManifest writes p into dir atomically (rename), as a user or a
// provisioning tool drops a static pod.
func writeManifest(dir string, p podSpec) error {
	tmp := filepath.Join(dir, "."+p.name+".tmp")
	if err := os.WriteFile(tmp, p.manifest(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, p.name+".yaml"))
}
