package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// POST /pods is a create, as the API server's: the same manifest again
// answers 200 and restarts nothing; another spec under a name that is
// taken answers 409 and the running pod keeps running; PUT
// /pods/{namespace}/{name} is the explicit replacement. Before issue 33 a
// POST of another spec answered 201 and silently killed the running pod.
func TestE2ESimPushIsACreate(t *testing.T) {
	a := startAgent(t, agentOpts{})
	first := busyboxPod("web", grace2, sleepForever)
	uid, name := a.pushPod(t, first)
	defer a.deletePushed(name)
	p := a.waitPod(time.Minute, name, "Running", isRunning)
	container := p.Status.ContainerStatuses[0].ContainerID

	if code, body := a.postPod(t, first); code != http.StatusOK || !strings.Contains(body, uid) {
		t.Fatalf("the same manifest again: %d %s; want 200 with uid %s", code, body, uid)
	}
	other := busyboxPod("web", grace2, sleepForever, "env: [{name: V, value: two}]")
	code, body := a.postPod(t, other)
	if code != http.StatusConflict || !strings.Contains(body, "PUT /pods/default/"+name) {
		t.Fatalf("another spec under the name: %d %s; want 409 naming the PUT", code, body)
	}
	// Nothing restarted: the same pod, container and restart count.
	p, err := a.pod(name)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.UID) != uid || !isRunning(p) || p.Status.ContainerStatuses[0].ContainerID != container ||
		p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("after the 409 the pod changed: %s (uid %s, want %s)", describe(p), p.UID, uid)
	}

	code, body = a.putPod(t, "default", name, other)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s; want 200 (replaced)", code, body)
	}
	var ref struct {
		UID string `json:"uid"`
	}
	if err := json.Unmarshal([]byte(body), &ref); err != nil || ref.UID == "" || ref.UID == uid {
		t.Fatalf("PUT answer %q (%v): want the new pod's uid, not %s", body, err, uid)
	}
	p = a.waitPod(time.Minute, name, "Running as the replacement", func(p *v1.Pod) bool {
		return string(p.UID) == ref.UID && isRunning(p)
	})
	if env := p.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != "two" {
		t.Fatalf("the replacement runs %v, want V=two", env)
	}
	if code, body := a.putPod(t, "default", "elsewhere", other); code != http.StatusBadRequest {
		t.Fatalf("PUT to another name than the manifest's: %d %s; want 400", code, body)
	}
}

// putPod sends a manifest to PUT /pods/{namespace}/{name}.
func (a *agent) putPod(t *testing.T, ns, name, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, a.mainURL("/pods/"+ns+"/"+name), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := a.mainClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
