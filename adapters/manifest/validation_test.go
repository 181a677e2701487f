package manifest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What the API server's validation refuses and a node can check: each case
// names the field of the error. Every case here passed Validate before
// issue 9 (the pod ran).
func TestValidateAsTheAPIServer(t *testing.T) {
	ptr := func(v int64) *int64 { return &v }
	always := v1.ContainerRestartPolicyAlways
	f, tr := false, true
	rl := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	tests := []struct {
		name    string
		mutate  func(p *v1.Pod)
		wantErr []string // substrings; empty = valid
	}{
		{name: "annotations over 256 KiB", mutate: func(p *v1.Pod) {
			p.Annotations = map[string]string{"big": strings.Repeat("x", 300<<10)}
		}, wantErr: []string{"metadata.annotations: Too long: may not be more than 262144 bytes"}},
		{name: "annotations of 256 KiB in all, split", mutate: func(p *v1.Pod) {
			p.Annotations = map[string]string{"a": strings.Repeat("x", 130<<10), "b": strings.Repeat("x", 130<<10)}
		}, wantErr: []string{"metadata.annotations: Too long"}},
		{name: "annotations just under the limit", mutate: func(p *v1.Pod) {
			p.Annotations = map[string]string{"a": strings.Repeat("x", 200<<10)}
		}},
		{name: "annotation key", mutate: func(p *v1.Pod) { p.Annotations = map[string]string{"bad key!": "v"} },
			wantErr: []string{`metadata.annotations: Invalid value: "bad key!"`}},
		{name: "label key", mutate: func(p *v1.Pod) { p.Labels = map[string]string{"bad key!": "v"} },
			wantErr: []string{`metadata.labels: Invalid value: "bad key!"`}},
		{name: "label value", mutate: func(p *v1.Pod) { p.Labels = map[string]string{"app": "not valid!"} },
			wantErr: []string{`metadata.labels: Invalid value: "not valid!"`}},
		{name: "huge label value, value cut", mutate: func(p *v1.Pod) { p.Labels = map[string]string{"app": strings.Repeat("a", 1<<20)} },
			wantErr: []string{"metadata.labels: Invalid value", "(1048576 bytes)"}},
		{name: "label value too long", mutate: func(p *v1.Pod) { p.Labels = map[string]string{"app": strings.Repeat("a", 64)} },
			wantErr: []string{"metadata.labels: Invalid value", "must be no more than 63 bytes"}},
		{name: "good labels and annotations", mutate: func(p *v1.Pod) {
			p.Labels = map[string]string{"app.kubernetes.io/name": "web", "tier": "front-end_1"}
			p.Annotations = map[string]string{"example.com/Note": "any text at all!"}
		}},
		{name: "generateName", mutate: func(p *v1.Pod) { p.GenerateName = "Web_" }, wantErr: []string{"metadata.generateName: Invalid value"}},
		{name: "name too long, value cut", mutate: func(p *v1.Pod) { p.Name = strings.Repeat("a", 1<<20) },
			wantErr: []string{"metadata.name: Invalid value", "(1048576 bytes)", "must be no more than 253 characters"}},
		{name: "owner reference without uid", mutate: func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1"}}
		}, wantErr: []string{"metadata.ownerReferences[0].uid: Required value"}},
		{name: "finalizer", mutate: func(p *v1.Pod) { p.Finalizers = []string{"not a name"} },
			wantErr: []string{`metadata.finalizers: Invalid value: "not a name"`}},
		{name: "image with whitespace", mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = " nginx" },
			wantErr: []string{"spec.containers[0].image: Invalid value", "leading or trailing whitespace"}},
		{name: "termination message policy", mutate: func(p *v1.Pod) { p.Spec.Containers[0].TerminationMessagePolicy = "Sometimes" },
			wantErr: []string{"spec.containers[0].terminationMessagePolicy: Unsupported value"}},
		{name: "two volume sources", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, HostPath: &v1.HostPathVolumeSource{Path: "/x"}}}}
		}, wantErr: []string{"spec.volumes[0]: Forbidden: may not specify more than 1 volume type"}},
		{name: "hostPath without a path", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}}}}
		}, wantErr: []string{"spec.volumes[0].hostPath.path: Required value"}},
		{name: "configMap item escapes the volume", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: []v1.KeyToPath{{Key: "k", Path: "../../etc/passwd"}}}}}}
		}, wantErr: []string{"spec.volumes[0].configMap.items[0].path: Invalid value", "must not contain '..'"}},
		{name: "duplicate mount path", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "a"}, {Name: "b"}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "a", MountPath: "/data"}, {Name: "b", MountPath: "/data"}}
		}, wantErr: []string{`spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique`}},
		{name: "absolute subPath", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "a"}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "a", MountPath: "/data", SubPath: "/etc"}}
		}, wantErr: []string{"spec.containers[0].volumeMounts[0].subPath: Invalid value", "must be a relative path"}},
		{name: "env valueFrom with no source", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{}}}
		}, wantErr: []string{"spec.containers[0].env[0].valueFrom: Invalid value", "must specify one of"}},
		{name: "env valueFrom with two sources", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{
				FieldRef:     &v1.ObjectFieldSelector{FieldPath: "metadata.name"},
				SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
		}, wantErr: []string{"spec.containers[0].env[0].valueFrom: Invalid value", "more than one field"}},
		{name: "env fieldPath not supported", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.containers"}}}}
		}, wantErr: []string{"spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value"}},
		{name: "env downward API fields", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{
				{Name: "A", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				{Name: "B", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			}
		}},
		{name: "env resource divisor", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("3")}}}}
		}, wantErr: []string{"spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Unsupported value"}},
		{name: "resource name without a domain", mutate: func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("gpu", "1") },
			wantErr: []string{"spec.containers[0].resources.limits[gpu]: Invalid value", "must be a standard resource for containers"}},
		{name: "extended resource overcommitted", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: rl("example.com/gpu", "2"), Requests: rl("example.com/gpu", "1")}
		}, wantErr: []string{"spec.containers[0].resources.requests[example.com/gpu]: Invalid value", "must be equal to example.com/gpu limit of 2"}},
		{name: "extended resource fraction", mutate: func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("example.com/gpu", "500m") },
			wantErr: []string{"spec.containers[0].resources.limits[example.com/gpu]: Invalid value", "must be an integer"}},
		{name: "extended, hugepages and standard resources", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Limits:   rl("example.com/gpu", "1", "hugepages-2Mi", "4Mi", "cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi"),
				Requests: rl("example.com/gpu", "1", "cpu", "500m")}
		}},
		{name: "lifecycle hook without a handler", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{}}
		}, wantErr: []string{"spec.containers[0].lifecycle.preStop: Required value: must specify a handler type"}},
		{name: "lifecycle hook port", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(0)}}}
		}, wantErr: []string{"spec.containers[0].lifecycle.postStart.httpGet.port: Invalid value: 0"}},
		{name: "negative runAsUser", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsUser: ptr(-1)}
		}, wantErr: []string{"spec.containers[0].securityContext.runAsUser: Invalid value: -1"}},
		{name: "privileged without escalation", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &tr, AllowPrivilegeEscalation: &f}
		}, wantErr: []string{"spec.containers[0].securityContext: Invalid value", "`privileged` to true"}},
		{name: "pod fsGroup", mutate: func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr(-5)} },
			wantErr: []string{"spec.securityContext.fsGroup: Invalid value: -5"}},
		{name: "init container with a probe", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", LivenessProbe: probe}}
		}, wantErr: []string{"spec.initContainers[0].livenessProbe: Forbidden"}},
		{name: "sidecar with a probe", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "side", Image: "busybox", RestartPolicy: &always, LivenessProbe: probe}}
		}},
		// Container restart rules (ContainerRestartRules, beta and on
		// since v1.35), as the v1.37 API server checks them.
		{name: "restartPolicy Always on a container", mutate: func(p *v1.Pod) { p.Spec.Containers[0].RestartPolicy = &always }},
		{name: "restartPolicy Never with a rule on a container", mutate: func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			p.Spec.Containers[0].RestartPolicy = policy(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}
		}},
		{name: "restartPolicy OnFailure with a NotIn rule on an init container", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", RestartPolicy: policy(v1.ContainerRestartPolicyOnFailure),
				RestartPolicyRules: []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1)}}}
		}},
		{name: "unknown container restartPolicy", mutate: func(p *v1.Pod) { p.Spec.Containers[0].RestartPolicy = policy(v1.ContainerRestartPolicy("Sometimes")) },
			wantErr: []string{`spec.containers[0].restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"`}},
		{name: "rules without a restartPolicy", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}
		}, wantErr: []string{"spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"}},
		{name: "rules on an init container without a restartPolicy", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox",
				RestartPolicyRules: []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}}}
		}, wantErr: []string{"spec.initContainers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"}},
		{name: "rules on a sidecar", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "side", Image: "busybox", RestartPolicy: &always,
				RestartPolicyRules: []v1.ContainerRestartRule{restartRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}}}
		}, wantErr: []string{"spec.initContainers[0].restartPolicyRules: Forbidden: restartPolicyRules are not allowed for init containers with restart policy Always"}},
		{name: "rule action RestartAllContainers (alpha, off)", mutate: func(p *v1.Pod) {
			r := restartRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)
			r.Action = v1.ContainerRestartRuleActionRestartAllContainers
			p.Spec.Containers[0].RestartPolicy = policy(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{r}
		}, wantErr: []string{`spec.containers[0].restartPolicyRules[0].action: Unsupported value: "RestartAllContainers": supported values: "Restart"`}},
		{name: "rule without exitCodes", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = policy(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}
		}, wantErr: []string{"spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified"}},
		{name: "rule with an unknown operator", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = policy(v1.ContainerRestartPolicyNever)
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{restartRule("Maybe", 1)}
		}, wantErr: []string{`spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "Maybe": supported values: "In", "NotIn"`}},
		{name: "too many rules and values", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = policy(v1.ContainerRestartPolicyNever)
			values := make([]int32, 256)
			for i := range values {
				values[i] = int32(i)
			}
			for range 21 {
				p.Spec.Containers[0].RestartPolicyRules = append(p.Spec.Containers[0].RestartPolicyRules, restartRule(v1.ContainerRestartRuleOnExitCodesOpIn, values...))
			}
		}, wantErr: []string{"spec.containers[0].restartPolicyRules: Too many: 21: must have at most 20 items",
			"spec.containers[0].restartPolicyRules[0].exitCodes.values: Too many: 256: must have at most 255 items"}},
		{name: "init container with restartPolicy Never has no probes", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", RestartPolicy: policy(v1.ContainerRestartPolicyNever), LivenessProbe: probe}}
		}, wantErr: []string{"spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"}},
		{name: "host port twice", mutate: func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "nginx"})
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			p.Spec.Containers[1].Ports = []v1.ContainerPort{{ContainerPort: 81, HostPort: 8080}}
		}, wantErr: []string{`spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"`}},
		{name: "host port of an init container and a container", mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}}
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		}},
		{name: "hostNetwork port mismatch", mutate: func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		}, wantErr: []string{"spec.containers[0].ports[0].containerPort: Invalid value: 80: must match `hostPort`"}},
		{name: "hostname", mutate: func(p *v1.Pod) { p.Spec.Hostname = "Not_A_Label" }, wantErr: []string{"spec.hostname: Invalid value"}},
		{name: "dnsPolicy None without dnsConfig", mutate: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone },
			wantErr: []string{"spec.dnsConfig: Required value"}},
		{name: "dnsConfig nameserver", mutate: func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"dns.example.com"}}
		}, wantErr: []string{"spec.dnsConfig.nameservers[0]: Invalid value"}},
		{name: "host alias IP", mutate: func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "nowhere", Hostnames: []string{"a"}}} },
			wantErr: []string{"spec.hostAliases[0].ip: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkValidate(t, tt.mutate, tt.wantErr) })
	}
}

// checkValidate validates validPod changed by mutate: no error when
// wantErr is empty, else an error containing each of wantErr, and never a
// huge one.
func checkValidate(t *testing.T, mutate func(*v1.Pod), wantErr []string) {
	t.Helper()
	p := validPod()
	mutate(p)
	err := Validate(p)
	if len(wantErr) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("valid, want errors %q", wantErr)
	}
	for _, w := range wantErr {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if len(err.Error()) > 4096 {
		t.Errorf("error of %d bytes: a huge value must not make a huge error", len(err.Error()))
	}
}

// A multi-document file with one bad document: the others run, and the bad
// one is reported with its file, its number (from 1) and the field.
func TestMultiDocumentFileKeepsTheGoodDocuments(t *testing.T) {
	doc := func(name string) string { return strings.Replace(podYAML, "name: web", "name: "+name, 1) }
	badLabel := strings.Replace(doc("two"), "metadata:\n", "metadata:\n  labels: {\"bad key!\": x}\n", 1)
	tests := []struct {
		name    string
		file    string
		want    []string
		wantErr []string
	}{
		{name: "invalid label in document 2", file: manifestsOf(doc("one"), badLabel, doc("three")),
			want: []string{"one-n1", "three-n1"}, wantErr: []string{"pods.yaml: document 2: pod default/two-n1: metadata.labels: Invalid value: \"bad key!\""}},
		{name: "undecodable document 2", file: manifestsOf(doc("one"), "kind: Pod\nmetadata: [\n", doc("three")),
			want: []string{"one-n1", "three-n1"}, wantErr: []string{"pods.yaml: document 2: "}},
		{name: "wrong kind in document 2", file: manifestsOf(doc("one"), "apiVersion: v1\nkind: Secret\n", doc("three")),
			want: []string{"one-n1", "three-n1"}, wantErr: []string{`pods.yaml: document 2: kind: Unsupported value: "Secret"`}},
		{name: "missing image in document 3", file: manifestsOf(doc("one"), doc("two"), strings.Replace(doc("three"), "    image: nginx:1.25\n", "", 1)),
			want: []string{"one-n1", "two-n1"}, wantErr: []string{"pods.yaml: document 3: pod default/three-n1: spec.containers[0].image: Required value"}},
		{name: "leading separator and a comment-only document", file: "---\n" + manifestsOf(doc("one"), "# nothing\n", badLabel),
			want: []string{"one-n1"}, wantErr: []string{"pods.yaml: document 3: pod default/two-n1: metadata.labels"}},
		{name: "json stream: a syntax error ends it", file: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"one"},"spec":{"containers":[{"name":"c","image":"i"}]}}
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"two","labels":{"bad key!":"x"}},"spec":{"containers":[{"name":"c","image":"i"}]}}
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"three"},"spec":{"containers":[{"name":"c","image":"i"}]}}
{"apiVersion": oops}`,
			want: []string{"one-n1", "three-n1"}, wantErr: []string{"pods.json: document 4: invalid character", "pods.json: document 2: pod default/two-n1: metadata.labels"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "pods.yaml"
			if strings.HasPrefix(tt.file, "{") {
				name = "pods.json"
			}
			dir := writeFiles(t, map[string]string{name: tt.file})
			pods, errs := DirLister{Dir: dir, NodeName: "n1"}.List(context.Background())
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("pods = %v, want %v", names, tt.want)
			}
			if len(errs) != len(tt.wantErr) {
				t.Fatalf("errs = %v, want %d", errs, len(tt.wantErr))
			}
			for i, w := range tt.wantErr {
				if !strings.Contains(errs[i].Error(), filepath.Join(dir, w)) {
					t.Errorf("err %q does not contain %q", errs[i], filepath.Join(dir, w))
				}
				if errDigest(errs[i]) == "" {
					t.Errorf("err %q names no content (the source would warn at every check)", errs[i])
				}
			}
		})
	}
}

func manifestsOf(docs ...string) string { return strings.Join(docs, "---\n") }

// A manifest file over MaxManifestBytes is refused with an error naming it
// and the cap, without reading it; the other files run.
func TestManifestFileOverTheCap(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": podYAML})
	big := strings.Replace(strings.Replace(podYAML, "name: web", "name: big", 1),
		"metadata:\n", "metadata:\n  annotations:\n    big: "+strings.Repeat("x", 5<<20)+"\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	list := func() error {
		t.Helper()
		pods, errs := DirLister{Dir: dir, NodeName: "n1"}.List(context.Background())
		if len(pods) != 1 || pods[0].Name != "web-n1" {
			t.Fatalf("pods %v, want web-n1 only", pods)
		}
		if len(errs) != 1 {
			t.Fatalf("errs %v, want one", errs)
		}
		want := filepath.Join(dir, "big.yaml") + ": " + "5243"
		if !strings.Contains(errs[0].Error(), want) || !strings.Contains(errs[0].Error(), "larger than 3145728 bytes (MaxManifestBytes)") {
			t.Fatalf("err %q: want the file, its size and the cap", errs[0])
		}
		return errs[0]
	}
	first := list()
	if d := errDigest(first); d == "" || errDigest(list()) != d {
		t.Fatal("the same big file must give the same content digest (warned once)")
	}
	// Exactly the cap is read.
	capped := strings.Replace(podYAML, "name: web", "name: capped", 1)
	exact := capped + "# " + strings.Repeat("x", MaxManifestBytes-len(capped)-3) + "\n"
	if len(exact) != MaxManifestBytes {
		t.Fatalf("test file of %d bytes", len(exact))
	}
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(exact), 0o644); err != nil {
		t.Fatal(err)
	}
	pods, errs := DirLister{Dir: dir, NodeName: "n1"}.List(context.Background())
	if len(pods) != 2 || len(errs) != 0 {
		t.Fatalf("a file of exactly MaxManifestBytes: pods %d, errs %v; want 2 and none", len(pods), errs)
	}
}

// restartRule is a Restart rule on the given exit codes.
func restartRule(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// policy is a container restartPolicy to point at.
func policy(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }
