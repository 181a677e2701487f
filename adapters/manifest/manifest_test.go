package manifest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/errdefs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: nginx
    image: nginx:1.25
`

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    []string // pod names
		wantErr string
	}{
		{name: "yaml pod", data: podYAML, want: []string{"web"}},
		{name: "json pod", data: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, want: []string{"j"}},
		{name: "multi doc", data: podYAML + "---\n" + strings.Replace(podYAML, "web", "api", 1) + "---\n", want: []string{"web", "api"}},
		{name: "concatenated json", data: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}`, want: []string{"a", "b"}},
		{name: "pod list", data: "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n- kind: Pod\n  metadata: {name: b}\n", want: []string{"a", "b"}},
		{name: "list", data: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n", want: []string{"a"}},
		{name: "list with a service", data: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n", wantErr: `items[0]: kind "Service" is not supported`},
		{name: "empty", data: "", want: nil},
		{name: "only comments", data: "# nothing\n---\n", want: nil},
		{name: "unknown fields are ignored", data: podYAML + "extra: 1\n", want: []string{"web"}},
		{name: "unknown kind", data: "apiVersion: v1\nkind: Deployment\n", wantErr: `kind: Unsupported value: "Deployment"`},
		{name: "missing kind", data: "apiVersion: v1\nmetadata: {name: x}\n", wantErr: "kind: Required value"},
		{name: "wrong apiVersion", data: "apiVersion: apps/v1\nkind: Pod\n", wantErr: `apiVersion: Unsupported value: "apps/v1"`},
		{name: "bad yaml", data: "kind: Pod\nmetadata: [\n", wantErr: "document 1"},
		{name: "scalar", data: "hello\n", wantErr: "not an object"},
		{name: "sequence", data: "- a\n- b\n", wantErr: "not an object"},
		{name: "wrong field type", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: 3\n", wantErr: "spec.containers"},
		{name: "bad quantity", data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources: {limits: {cpu: lots}}\n", wantErr: "quantities must match"},
		{name: "second doc bad", data: podYAML + "---\nkind: Secret\napiVersion: v1\n", wantErr: "document 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, err := Decode([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
				if p.Kind != "Pod" || p.APIVersion != "v1" {
					t.Errorf("pod %s: type meta %s/%s", p.Name, p.APIVersion, p.Kind)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("names = %v, want %v", names, tt.want)
			}
		})
	}
}

func validPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaName("web"),
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "nginx"}},
		},
	}
}

func TestValidate(t *testing.T) {
	neg := int64(-1)
	zero := int64(0)
	tests := []struct {
		name    string
		mutate  func(p *v1.Pod)
		wantErr []string // substrings; empty = valid
	}{
		{name: "valid", mutate: func(p *v1.Pod) {}},
		{name: "valid defaulted", mutate: func(p *v1.Pod) { ApplyDefaults(p, "file", "node1", "/x") }},
		{name: "missing name", mutate: func(p *v1.Pod) { p.Name = "" }, wantErr: []string{"metadata.name: Required value"}},
		{name: "bad name", mutate: func(p *v1.Pod) { p.Name = "Web_1" }, wantErr: []string{"metadata.name: Invalid value: \"Web_1\""}},
		{name: "bad namespace", mutate: func(p *v1.Pod) { p.Namespace = "a.b" }, wantErr: []string{"metadata.namespace: Invalid value"}},
		{name: "no containers", mutate: func(p *v1.Pod) { p.Spec.Containers = nil }, wantErr: []string{"spec.containers: Required value"}},
		{name: "second image missing", mutate: func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d"})
		}, wantErr: []string{"spec.containers[1].image: Required value"}},
		{name: "container name not a label", mutate: func(p *v1.Pod) { p.Spec.Containers[0].Name = "C.1" }, wantErr: []string{"spec.containers[0].name: Invalid value"}},
		{name: "duplicate across init and containers", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "c", Image: "busybox"}}
		}, wantErr: []string{`spec.containers[0].name: Duplicate value: "c"`}},
		{name: "restart policy", mutate: func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, wantErr: []string{`spec.restartPolicy: Unsupported value: "Sometimes"`}},
		{name: "pull policy", mutate: func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Maybe" }, wantErr: []string{"spec.containers[0].imagePullPolicy: Unsupported value"}},
		{name: "port zero and too big host port", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 0, HostPort: 70000}}
		}, wantErr: []string{"spec.containers[0].ports[0].containerPort: Invalid value: 0", "spec.containers[0].ports[0].hostPort: Invalid value: 70000"}},
		{name: "port protocol", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}}
		}, wantErr: []string{"spec.containers[0].ports[0].protocol: Unsupported value"}},
		{name: "request above limit", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
				Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
			}
		}, wantErr: []string{"spec.containers[0].resources.requests[memory]: Invalid value: \"128Mi\": must be less than or equal to memory limit of 64Mi"}},
		{name: "probe without handler", mutate: func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe = &v1.Probe{} }, wantErr: []string{"spec.containers[0].livenessProbe: Required value"}},
		{name: "probe two handlers", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{
				Exec:      &v1.ExecAction{Command: []string{"true"}},
				TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)},
			}}
		}, wantErr: []string{"spec.containers[0].readinessProbe: Forbidden: may not specify more than 1 handler type"}},
		{name: "probe negative threshold", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, FailureThreshold: -1, SuccessThreshold: 2}
		}, wantErr: []string{"livenessProbe.failureThreshold: Invalid value: -1", "livenessProbe.successThreshold: Invalid value: 2: must be 1"}},
		{name: "probe unknown named port", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}}
		}, wantErr: []string{`readinessProbe.httpGet.port: Not found: "http"`}},
		{name: "probe named port ok", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 80}}
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}}
		}},
		{name: "grace period negative", mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = &neg }, wantErr: []string{"spec.terminationGracePeriodSeconds: Invalid value: -1"}},
		{name: "grace period zero ok", mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = &zero }},
		{name: "active deadline zero", mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = &zero }, wantErr: []string{"spec.activeDeadlineSeconds: Invalid value: 0"}},
		{name: "env name", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "OK"}, {Name: "A=B"}}
		}, wantErr: []string{`spec.containers[0].env[1].name: Invalid value: "A=B"`}},
		{name: "mount of unknown volume", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, wantErr: []string{`spec.containers[0].volumeMounts[0].name: Not found: "data"`}},
		{name: "several errors together", mutate: func(p *v1.Pod) {
			p.Name = ""
			p.Spec.Containers[0].Image = ""
		}, wantErr: []string{"metadata.name: Required value", "spec.containers[0].image: Required value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkValidate(t, tt.mutate, tt.wantErr) })
	}
}

func TestApplyDefaults(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	now = func() time.Time { return t0 }
	t.Cleanup(func() { now = time.Now })

	decode := func(t *testing.T, s string) *v1.Pod {
		t.Helper()
		pods, err := Decode([]byte(s))
		if err != nil || len(pods) != 1 {
			t.Fatalf("decode: %v %d", err, len(pods))
		}
		return pods[0]
	}

	t.Run("fields", func(t *testing.T) {
		p := decode(t, `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: a
    image: nginx
    ports: [{containerPort: 80}]
    resources: {limits: {cpu: 500m}, requests: {memory: 1Mi}}
    livenessProbe: {httpGet: {port: 80}}
  - name: b
    image: reg:5000/x/nginx:1.2
  - name: c
    image: nginx:latest
  - name: d
    image: nginx@sha256:abcd
  - name: e
    image: reg:5000/nginx
`)
		ApplyDefaults(p, "file", "Node-1", "/etc/kubernetes/manifests/web.yaml")
		checks := []struct {
			name      string
			got, want any
		}{
			{"name", p.Name, "web-node-1"},
			{"namespace", p.Namespace, "default"},
			{"nodeName", p.Spec.NodeName, "Node-1"},
			{"uid is md5 hex", len(p.UID), 32},
			{"hash", p.Annotations[ConfigHashAnnotation], string(p.UID)},
			{"source", p.Annotations[ConfigSourceAnnotation], "file"},
			{"seen", p.Annotations[ConfigSeenAnnotation], "2026-01-02T03:04:05.000000006Z"},
			{"restartPolicy", p.Spec.RestartPolicy, v1.RestartPolicyAlways},
			{"dnsPolicy", p.Spec.DNSPolicy, v1.DNSClusterFirst},
			{"scheduler", p.Spec.SchedulerName, "default-scheduler"},
			{"grace", *p.Spec.TerminationGracePeriodSeconds, int64(30)},
			{"securityContext", p.Spec.SecurityContext != nil, true},
			{"phase", p.Status.Phase, v1.PodPending},
			{"toleration", p.Spec.Tolerations, []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}},
			{"pull no tag", p.Spec.Containers[0].ImagePullPolicy, v1.PullAlways},
			{"pull tag with registry port", p.Spec.Containers[1].ImagePullPolicy, v1.PullIfNotPresent},
			{"pull latest", p.Spec.Containers[2].ImagePullPolicy, v1.PullAlways},
			{"pull digest", p.Spec.Containers[3].ImagePullPolicy, v1.PullIfNotPresent},
			{"pull registry port no tag", p.Spec.Containers[4].ImagePullPolicy, v1.PullAlways},
			{"termination path", p.Spec.Containers[0].TerminationMessagePath, "/dev/termination-log"},
			{"termination policy", p.Spec.Containers[0].TerminationMessagePolicy, v1.TerminationMessageReadFile},
			{"protocol", p.Spec.Containers[0].Ports[0].Protocol, v1.ProtocolTCP},
			{"probe timeout", p.Spec.Containers[0].LivenessProbe.TimeoutSeconds, int32(1)},
			{"probe period", p.Spec.Containers[0].LivenessProbe.PeriodSeconds, int32(10)},
			{"probe success", p.Spec.Containers[0].LivenessProbe.SuccessThreshold, int32(1)},
			{"probe failure", p.Spec.Containers[0].LivenessProbe.FailureThreshold, int32(3)},
			{"probe path", p.Spec.Containers[0].LivenessProbe.HTTPGet.Path, "/"},
			{"request from limit", p.Spec.Containers[0].Resources.Requests.Cpu().String(), "500m"},
			{"request kept", p.Spec.Containers[0].Resources.Requests.Memory().String(), "1Mi"},
		}
		for _, c := range checks {
			if !equalAny(c.got, c.want) {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if err := Validate(p); err != nil {
			t.Errorf("defaulted pod invalid: %v", err)
		}
	})

	t.Run("keeps given uid and tolerations", func(t *testing.T) {
		p := decode(t, podYAML)
		p.UID = "given"
		p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}, {Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
		ApplyDefaults(p, "http", "n", "u")
		if p.UID != "given" || p.Annotations[ConfigHashAnnotation] != "given" {
			t.Errorf("uid = %s", p.UID)
		}
		if len(p.Spec.Tolerations) != 2 {
			t.Errorf("tolerations = %v", p.Spec.Tolerations)
		}
	})

	uid := func(t *testing.T, data, node, origin string) string {
		p := decode(t, data)
		ApplyDefaults(p, "file", node, origin)
		return string(p.UID)
	}
	determinism := []struct {
		name                  string
		data1, node1, origin1 string
		data2, node2, origin2 string
		same                  bool
	}{
		{name: "same manifest same place", data1: podYAML, node1: "n", origin1: "/m/a.yaml", data2: podYAML, node2: "n", origin2: "/m/a.yaml", same: true},
		{name: "other file", data1: podYAML, node1: "n", origin1: "/m/a.yaml", data2: podYAML, node2: "n", origin2: "/m/b.yaml"},
		{name: "other node", data1: podYAML, node1: "n", origin1: "/m/a.yaml", data2: podYAML, node2: "m", origin2: "/m/a.yaml"},
		{name: "changed content", data1: podYAML, node1: "n", origin1: "/m/a.yaml", data2: strings.Replace(podYAML, "1.25", "1.26", 1), node2: "n", origin2: "/m/a.yaml"},
		{name: "formatting does not matter", data1: podYAML, node1: "n", origin1: "/m/a.yaml", data2: `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web"},"spec":{"containers":[{"image":"nginx:1.25","name":"nginx"}]}}`, node2: "n", origin2: "/m/a.yaml", same: true},
	}
	for _, tt := range determinism {
		t.Run("uid "+tt.name, func(t *testing.T) {
			a, b := uid(t, tt.data1, tt.node1, tt.origin1), uid(t, tt.data2, tt.node2, tt.origin2)
			if (a == b) != tt.same {
				t.Errorf("uids %s and %s: same=%v, want %v", a, b, a == b, tt.same)
			}
		})
	}
	t.Run("seen time is not hashed", func(t *testing.T) {
		a := uid(t, podYAML, "n", "o")
		now = func() time.Time { return t0.Add(time.Hour) }
		if b := uid(t, podYAML, "n", "o"); a != b {
			t.Errorf("uid changed with time: %s %s", a, b)
		}
	})
}

func equalAny(a, b any) bool {
	switch av := a.(type) {
	case []v1.Toleration:
		bv := b.([]v1.Toleration)
		if len(av) != len(bv) {
			return false
		}
		for i := range av {
			if av[i] != bv[i] {
				return false
			}
		}
		return true
	}
	return a == b
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if data == "<dir>" {
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadDirAndDirLister(t *testing.T) {
	other := strings.Replace(podYAML, "web", "api", 1)
	tests := []struct {
		name     string
		files    map[string]string // nil = missing dir
		wantPods []string          // names after DirLister
		wantErrs []string          // substrings, one per error
		notFound bool
	}{
		{name: "missing dir", files: nil, wantErrs: []string{"manifest dir"}, notFound: true},
		{name: "empty dir", files: map[string]string{}},
		{name: "two files", files: map[string]string{"a.yaml": podYAML, "b.json": `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"api"},"spec":{"containers":[{"name":"c","image":"i"}]}}`}, wantPods: []string{"web-n1", "api-n1"}},
		{name: "hidden and subdir skipped", files: map[string]string{".a.swp": "garbage: [", "sub": "<dir>", "a.yaml": podYAML}, wantPods: []string{"web-n1"}},
		{name: "bad yaml file does not hide others", files: map[string]string{"a.yaml": "kind: [", "b.yaml": podYAML}, wantPods: []string{"web-n1"}, wantErrs: []string{"a.yaml: document 1"}},
		{name: "invalid field named with file", files: map[string]string{"a.yaml": strings.Replace(podYAML, "    image: nginx:1.25\n", "", 1), "b.yaml": other}, wantPods: []string{"api-n1"}, wantErrs: []string{"a.yaml: document 1: pod default/web-n1: spec.containers[0].image: Required value"}},
		{name: "duplicate name", files: map[string]string{"a.yaml": podYAML, "b.yaml": strings.Replace(podYAML, "1.25", "1.26", 1)}, wantPods: []string{"web-n1"}, wantErrs: []string{"b.yaml: document 1: pod default/web-n1: duplicate of the pod in"}},
		{name: "multi doc file", files: map[string]string{"a.yaml": podYAML + "---\n" + other}, wantPods: []string{"web-n1", "api-n1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "missing")
			if tt.files != nil {
				dir = writeFiles(t, tt.files)
			}
			_, origins, rerrs := ReadDir(dir)
			for _, o := range origins {
				if filepath.Dir(o) != dir {
					t.Errorf("origin %s not in %s", o, dir)
				}
			}
			if tt.notFound && (len(rerrs) != 1 || !errdefs.IsNotFound(rerrs[0])) {
				t.Errorf("ReadDir errs = %v, want one not-found", rerrs)
			}
			pods, errs := DirLister{Dir: dir, NodeName: "n1"}.List(context.Background())
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantPods, ",") {
				t.Errorf("pods = %v, want %v", names, tt.wantPods)
			}
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("errs = %v, want %v", errs, tt.wantErrs)
			}
			for i, w := range tt.wantErrs {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("err %q does not contain %q", errs[i], w)
				}
			}
		})
	}
}

func TestFetchAndURLLister(t *testing.T) {
	big := strings.Repeat("#", MaxManifestBytes+1)
	tests := []struct {
		name        string
		status      int
		body        string
		wantPods    []string
		wantErr     string
		unavailable bool
	}{
		{name: "one pod", status: 200, body: podYAML, wantPods: []string{"web-n"}},
		{name: "list", status: 200, body: `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}},{"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`, wantPods: []string{"a-n", "b-n"}},
		{name: "empty body", status: 200, body: "", wantPods: nil},
		{name: "not found", status: 404, body: "nope", wantErr: "404 Not Found", unavailable: true},
		{name: "server error", status: 500, body: podYAML, wantErr: "500", unavailable: true},
		{name: "garbage", status: 200, body: "kind: [", wantErr: "document 1", unavailable: true},
		{name: "too big", status: 200, body: big, wantErr: "body: larger than 3145728 bytes", unavailable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			_, err := Fetch(context.Background(), srv.Client(), srv.URL)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.unavailable != errdefs.IsUnavailable(err) {
					t.Errorf("unavailable = %v", errdefs.IsUnavailable(err))
				}
			} else if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			pods, errs := URLLister{URL: srv.URL, NodeName: "n", Client: srv.Client()}.List(context.Background())
			if tt.wantErr != "" {
				if pods != nil || len(errs) != 1 {
					t.Fatalf("List = %v, %v; want nil pods and one error", pods, errs)
				}
				return
			}
			if pods == nil {
				t.Errorf("List gave nil pods on success")
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
				if p.Annotations[ConfigSourceAnnotation] != "http" {
					t.Errorf("source annotation = %q", p.Annotations[ConfigSourceAnnotation])
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.wantPods, ",") {
				t.Errorf("pods = %v, want %v", names, tt.wantPods)
			}
		})
	}
}

func metaName(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: n} }
