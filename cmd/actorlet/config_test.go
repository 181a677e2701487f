package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

const configHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// writeConfig writes body as a KubeletConfiguration file in a fresh
// directory and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubelet-config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadConfig parses args as actorlet does, with --config path, and applies
// the file as runAgent does: the options, the ignored fields, the error.
func loadConfig(t *testing.T, path string, args ...string) (*options, []string, error) {
	t.Helper()
	o := defaultOptions()
	fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(append([]string{"--config", path}, args...)); err != nil {
		t.Fatal(err)
	}
	ignored, err := o.applyConfigFile(fs.Changed)
	return o, ignored, err
}

func TestConfigDecodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr []string // substrings of the error
	}{
		{name: "unknown top-level field", body: configHeader + "maxPods: 10\nfooBar: 1\n", wantErr: []string{`unknown field "fooBar"`}},
		{name: "unknown nested field", body: configHeader + "authentication:\n  anonymous:\n    enabld: true\n",
			wantErr: []string{`unknown field "authentication.anonymous.enabld"`}},
		{name: "two unknown fields", body: configHeader + "a: 1\nb: 2\n", wantErr: []string{`unknown field "a"`, `unknown field "b"`}},
		{name: "field in the wrong case", body: configHeader + "MaxPods: 10\n", wantErr: []string{`unknown field "MaxPods"`}},
		{name: "duplicate field", body: configHeader + "maxPods: 10\nmaxPods: 20\n", wantErr: []string{"maxPods"}},
		{name: "wrong kind", body: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", wantErr: []string{`kind "KubeProxyConfiguration", want KubeletConfiguration`}},
		{name: "no kind", body: "apiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 3\n", wantErr: []string{`kind ""`}},
		{name: "other version", body: "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", wantErr: []string{`apiVersion "kubelet.config.k8s.io/v1alpha1", want kubelet.config.k8s.io/v1beta1`}},
		{name: "no apiVersion", body: "kind: KubeletConfiguration\n", wantErr: []string{`apiVersion ""`}},
		{name: "empty", body: "\n", wantErr: []string{"empty"}},
		{name: "not YAML", body: "maxPods: [1\n", wantErr: []string{"not YAML or JSON"}},
		{name: "a list", body: "- 1\n- 2\n", wantErr: []string{"not a KubeletConfiguration"}},
		{name: "number for a string", body: configHeader + "maxPods: many\n", wantErr: []string{"maxPods"}},
		{name: "bad duration", body: configHeader + "syncFrequency: soon\n", wantErr: []string{"syncFrequency: ", "soon"}},
		{name: "bad nested duration", body: configHeader + "authentication: {webhook: {cacheTTL: 5parsecs}}\n",
			wantErr: []string{"authentication.webhook.cacheTTL: ", "parsecs"}},
		{name: "bad quantity", body: configHeader + "logging: {options: {json: {infoBufferSize: lots}}}\n",
			wantErr: []string{"logging.options.json.infoBufferSize: "}},
		{name: "bad taint shape", body: configHeader + "registerWithTaints: gpu\n", wantErr: []string{"registerWithTaints"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.body)
			_, _, err := loadConfig(t, p)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, _, err := loadConfig(t, filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}

// Values that decode but are wrong are refused by the flags' validation,
// which names the file's field, the file and the flag.
func TestConfigBadValuesNameTheField(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "negative maxPods", body: "maxPods: -3\n", want: "maxPods of %s (--max-pods) must not be negative"},
		{name: "taint effect", body: "registerWithTaints: [{key: gpu, effect: Sometimes}]\n", want: "registerWithTaints of %s (--register-with-taints): taint \"gpu\": effect \"Sometimes\""},
		{name: "cluster DNS not an IP", body: "clusterDNS: [kube-dns]\n", want: "clusterDNS of %s (--cluster-dns): \"kube-dns\" is not an IP address"},
		{name: "cgroup driver", body: "cgroupDriver: cgroupv2\n", want: "cgroupDriver of %s (--cgroup-driver) must be cgroupfs or systemd"},
		{name: "max images", body: "nodeStatusMaxImages: -2\n", want: "nodeStatusMaxImages of %s (--node-status-max-images) must be -1"},
		{name: "port", body: "port: 70000\n", want: "port of %s (--port) must be 0-65535"},
		{name: "address", body: "address: somewhere\n", want: "address of %s (--address) \"somewhere\" is not an IP address"},
		{name: "negative duration", body: "fileCheckFrequency: -1s\n", want: "fileCheckFrequency of %s (--file-check-frequency) must be positive"},
		{name: "eviction signal", body: "evictionHard: {memory.avail: 1Gi}\n", want: "memory.avail"},
		{name: "webhook authorization without a kubeconfig (v1beta1's default)", body: "authentication: {webhook: {enabled: false}}\n",
			want: "authorization.mode of %s (--authorization-mode)=Webhook needs --kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := configHeader + "authentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n" + tt.body
			if strings.HasPrefix(tt.body, "authentication:") {
				body = configHeader + tt.body
			}
			p := writeConfig(t, body)
			o, _, err := loadConfig(t, p)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			err = o.validate()
			want := tt.want
			if strings.Contains(want, "%s") {
				want = strings.ReplaceAll(want, "%s", p)
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("validate: %v\nwant it to contain %q", err, want)
			}
		})
	}
}

// A file that leaves everything out gets v1beta1's defaults, which are not
// the flags' defaults: anonymous requests refused, webhook authentication
// and authorization, no read-only port.
func TestConfigDefaultsAreV1beta1s(t *testing.T) {
	o, ignored, err := loadConfig(t, writeConfig(t, configHeader))
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) != 0 {
		t.Errorf("ignored %v in a file that sets nothing", ignored)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"authentication.anonymous.enabled", o.AnonymousAuth, false},
		{"authentication.webhook.enabled", o.AuthenticationTokenWebhook, true},
		{"authentication.webhook.cacheTTL", o.AuthenticationTokenWebhookTTL, 2 * time.Minute},
		{"authorization.mode", o.AuthorizationMode, "Webhook"},
		{"authorization.webhook.cacheAuthorizedTTL", o.AuthorizationWebhookAuthorized, 5 * time.Minute},
		{"authorization.webhook.cacheUnauthorizedTTL", o.AuthorizationWebhookUnauthorized, 30 * time.Second},
		{"readOnlyPort", o.ReadOnlyPort, int32(0)},
		{"port", o.Port, int32(10250)},
		{"healthzPort", o.HealthzPort, int32(10248)},
		{"healthzBindAddress", o.HealthzBindAddress, "127.0.0.1"},
		{"address", o.Address, "0.0.0.0"},
		{"maxPods", o.MaxPods, int32(110)},
		{"syncFrequency", o.SyncFrequency, time.Minute},
		{"fileCheckFrequency", o.FileCheckFrequency, 20 * time.Second},
		{"nodeStatusUpdateFrequency", o.NodeStatusUpdateFrequency, 10 * time.Second},
		{"nodeStatusReportFrequency", o.NodeStatusReportFrequency, 5 * time.Minute},
		{"nodeLeaseDurationSeconds", o.NodeLeaseDurationSeconds, int32(40)},
		{"nodeStatusMaxImages", o.NodeStatusMaxImages, int32(50)},
		{"cgroupDriver", o.CgroupDriver, "cgroupfs"},
		{"resolvConf", o.ResolvConf, "/etc/resolv.conf"},
		{"kubeAPIQPS", o.KubeAPIQPS, float32(50)},
		{"eventRecordQPS", o.EventQPS, float32(50)},
		{"imageGCHighThresholdPercent", o.ImageGCHighThreshold, int32(85)},
		{"imageMinimumGCAge", o.ImageMinimumGCAge, 2 * time.Minute},
		{"evictionPressureTransitionPeriod", o.EvictionPressureTransitionPeriod, 5 * time.Minute},
		{"evictionHard (upstream's default thresholds)", o.EvictionHard.set, false},
		{"enableDebuggingHandlers", o.EnableDebuggingHandlers, true},
		{"enableContentionProfiling", o.ContentionProfiling, false},
		{"containerRuntimeEndpoint", o.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock"},
		{"podLogsDir", o.PodLogsDir, "/var/log/pods"},
		{"rotateCertificates", o.RotateCertificates, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Fatalf("%v, want %v", tt.got, tt.want)
			}
		})
	}
	// As upstream: an explicit nodeStatusUpdateFrequency is also the
	// report frequency.
	o, _, err = loadConfig(t, writeConfig(t, configHeader+"nodeStatusUpdateFrequency: 20s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeStatusReportFrequency != 20*time.Second {
		t.Fatalf("nodeStatusReportFrequency %s, want the update frequency 20s", o.NodeStatusReportFrequency)
	}
}

// Precedence, as upstream: a flag on the command line beats the file, the
// file beats the flag's default.
func TestConfigPrecedence(t *testing.T) {
	body := configHeader + `maxPods: 20
syncFrequency: 30s
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
registerWithTaints: [{key: dedicated, value: gpu, effect: NoSchedule}]
evictionHard: {memory.available: 1Gi}
authentication: {anonymous: {enabled: true}}
enableServer: false
enableContentionProfiling: true
`
	tests := []struct {
		name  string
		args  []string
		check func(*options) string // "" when right
	}{
		{name: "file beats flag defaults", check: func(o *options) string {
			if o.MaxPods != 20 || o.SyncFrequency != 30*time.Second || o.ClusterDomain != "cluster.local" ||
				!slices.Equal(o.ClusterDNS, []string{"10.96.0.10"}) || o.ReadOnlyPort != 0 || !o.AnonymousAuth || o.Port != 0 || !o.ContentionProfiling {
				return "file values not applied"
			}
			if len(o.RegisterWithTaints) != 1 || o.RegisterWithTaints[0] != (v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}) {
				return "taints not applied"
			}
			if !o.EvictionHard.set || !reflect.DeepEqual(o.EvictionHard.m, map[string]string{"memory.available": "1Gi"}) {
				return "evictionHard not applied"
			}
			return ""
		}},
		{name: "flags beat the file", args: []string{"--max-pods", "7", "--cluster-dns", "10.0.0.53,10.0.0.54", "--anonymous-auth=false",
			"--register-with-taints", "a=b:NoExecute", "--eviction-hard", "memory.available<2Gi", "--port", "10260",
			"--contention-profiling=false"},
			check: func(o *options) string {
				if o.MaxPods != 7 || !slices.Equal(o.ClusterDNS, []string{"10.0.0.53", "10.0.0.54"}) || o.AnonymousAuth || o.Port != 10260 || o.ContentionProfiling {
					return "flags lost to the file"
				}
				if len(o.RegisterWithTaints) != 1 || o.RegisterWithTaints[0].Key != "a" || o.EvictionHard.m["memory.available"] != "2Gi" {
					return "taints or eviction flags lost to the file"
				}
				if o.SyncFrequency != 30*time.Second {
					return "the file's other fields not applied"
				}
				return ""
			}},
		{name: "a flag given at its default value still wins", args: []string{"--read-only-port", "10255"}, check: func(o *options) string {
			if o.ReadOnlyPort != 10255 {
				return "read-only port from the file"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, err := loadConfig(t, writeConfig(t, body), tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(o); msg != "" {
				t.Fatalf("%s: %+v", msg, o)
			}
		})
	}
}

// Fields the file sets that actorlet does not implement are returned (to
// be logged once at start); fields set to their default, and fields
// actorlet honours, are not.
func TestConfigUnimplementedFields(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		{name: "nothing set", body: "", want: nil},
		{name: "honoured fields only", body: "maxPods: 10\ncgroupDriver: systemd\nclusterDNS: [10.96.0.10]\nlogging: {format: json, verbosity: 4}\n", want: nil},
		{name: "unimplemented, at their defaults", body: "cgroupsPerQOS: true\ncpuManagerPolicy: none\nfailSwapOn: true\ncpuManagerReconcilePeriod: 0s\nmemorySwap: {}\n", want: nil},
		{name: "unimplemented, set", body: "cpuManagerPolicy: static\nfailSwapOn: false\nfeatureGates: {InPlacePodVerticalScaling: true}\n" +
			"logging: {flushFrequency: 1s}\nshutdownGracePeriod: 30s\nmaxPods: 10\n",
			want: []string{"cpuManagerPolicy", "failSwapOn", "featureGates", "logging.flushFrequency", "shutdownGracePeriod"}},
		{name: "kubeadm's generated file", body: `authentication:
  anonymous: {enabled: false}
  webhook: {cacheTTL: 0s, enabled: true}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 0s, cacheUnauthorizedTTL: 0s}
cgroupDriver: systemd
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
logging:
  flushFrequency: 0
  options:
    json: {infoBufferSize: "0"}
    text: {infoBufferSize: "0"}
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ignored, err := loadConfig(t, writeConfig(t, configHeader+tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ignored, tt.want) {
				t.Fatalf("ignored %v, want %v", ignored, tt.want)
			}
		})
	}
}

// Relative paths in the file are relative to its directory, as upstream.
func TestConfigRelativePaths(t *testing.T) {
	p := writeConfig(t, configHeader+"staticPodPath: manifests\ntlsCertFile: pki/k.crt\ntlsPrivateKeyFile: /abs/k.key\nresolvConf: \"\"\n")
	o, _, err := loadConfig(t, p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(p)
	if o.PodManifestPath != filepath.Join(dir, "manifests") || o.TLSCertFile != filepath.Join(dir, "pki/k.crt") ||
		o.TLSPrivateKeyFile != "/abs/k.key" || o.ResolvConf != "" {
		t.Fatalf("paths: %q %q %q %q", o.PodManifestPath, o.TLSCertFile, o.TLSPrivateKeyFile, o.ResolvConf)
	}
}

// The example in deploy/ decodes, validates (with the kubeconfig its
// webhook needs) and sets nothing actorlet ignores.
func TestConfigExampleInDeploy(t *testing.T) {
	o, ignored, err := loadConfig(t, "../../deploy/config/kubelet-config.yaml", "--kubeconfig", "/etc/kubernetes/kubelet.conf",
		"--client-ca-file", "", "--pod-manifest-path", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) != 0 {
		t.Errorf("the example sets fields actorlet ignores: %v", ignored)
	}
	if err := o.validate(); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
	if o.CgroupDriver != "systemd" || !o.RotateCertificates || o.ClusterDomain != "cluster.local" || o.AnonymousAuth {
		t.Fatalf("example not applied: %+v", o)
	}
}

// /configz's configuration is built from the options: what the flags
// changed shows, and read back it gives the same options.
func TestEffectiveKubeletConfig(t *testing.T) {
	t.Run("without a file: the flags' defaults", func(t *testing.T) {
		o := defaultOptions()
		c := o.effectiveKubeletConfig()
		if c.Kind != "KubeletConfiguration" || c.APIVersion != "kubelet.config.k8s.io/v1beta1" {
			t.Fatalf("type %s/%s", c.APIVersion, c.Kind)
		}
		if c.ReadOnlyPort != 10255 || !*c.Authentication.Anonymous.Enabled || c.Authorization.Mode != "AlwaysAllow" ||
			*c.Authentication.Webhook.Enabled || c.Port != 10250 || !*c.EnableServer || *c.NodeStatusMaxImages != 50 {
			t.Fatalf("configz without a file does not show the flags' defaults: %+v", c)
		}
		if len(c.EvictionHard) != 4 || c.EvictionHard["memory.available"] != "100Mi" {
			t.Fatalf("evictionHard %v, want upstream's defaults", c.EvictionHard)
		}
		if !*c.CgroupsPerQOS || c.ContentType == "" {
			t.Fatalf("fields actorlet does not honour lack v1beta1's defaults: %+v", c)
		}
	})
	t.Run("file and flags", func(t *testing.T) {
		o, _, err := loadConfig(t, writeConfig(t, configHeader+"maxPods: 20\ncpuManagerPolicy: static\nevictionHard: {memory.available: 1Gi}\n"),
			"--max-pods", "9", "--port", "0", "--cluster-dns", "10.0.0.10", "--register-with-taints", "k=v:NoSchedule")
		if err != nil {
			t.Fatal(err)
		}
		c := o.effectiveKubeletConfig()
		if c.MaxPods != 9 || *c.EnableServer || !slices.Equal(c.ClusterDNS, []string{"10.0.0.10"}) || c.CPUManagerPolicy != "static" ||
			len(c.RegisterWithTaints) != 1 || c.EvictionHard["memory.available"] != "1Gi" || c.Authorization.Mode != "Webhook" {
			t.Fatalf("configz %+v", c)
		}
		// Read back, the configuration gives the same options.
		back := defaultOptions()
		for _, f := range configFields {
			f.toOptions(c, back)
		}
		o.Config, o.fileFields, o.kubeletConfig = "", nil, nil
		if !reflect.DeepEqual(o, back) {
			t.Fatalf("options from /configz differ:\n got %+v\nwant %+v", back, o)
		}
	})
	t.Run("the file is not changed", func(t *testing.T) {
		o, _, err := loadConfig(t, writeConfig(t, configHeader+"maxPods: 20\n"), "--max-pods", "9")
		if err != nil {
			t.Fatal(err)
		}
		_ = o.effectiveKubeletConfig()
		if o.kubeletConfig.MaxPods != 20 {
			t.Fatalf("the file's configuration changed: maxPods %d", o.kubeletConfig.MaxPods)
		}
	})
}

// The new flags (issue 11) are checked; a bad one exits 2 before anything
// starts, as a bad config file does.
func TestNodeFlagsAndConfigExitTwo(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "cluster DNS not an IP", args: []string{"--cluster-dns", "10.0.0.1,dns"}},
		{name: "cluster domain", args: []string{"--cluster-domain", "Bad_Domain"}},
		{name: "taint without effect", args: []string{"--register-with-taints", "a=b"}},
		{name: "taint effect", args: []string{"--register-with-taints", "a=b:Never"}},
		{name: "taint key", args: []string{"--register-with-taints", "-a=b:NoSchedule"}},
		{name: "taint twice", args: []string{"--register-with-taints", "a=b:NoSchedule,a=c:NoSchedule"}},
		{name: "max images", args: []string{"--node-status-max-images", "-2"}},
		{name: "cgroup driver", args: []string{"--cgroup-driver", "cgroup2"}},
		{name: "bootstrap without kubeconfig", args: []string{"--bootstrap-kubeconfig", "/etc/kubernetes/bootstrap-kubelet.conf"}},
		{name: "serving certificate without kubeconfig", args: []string{"--rotate-server-certificates"}},
		{name: "resolv-conf is a directory", args: []string{"--resolv-conf", "."}},
		{name: "missing config", args: []string{"--config", "/nonexistent/kubelet-config.yaml"}},
		{name: "config unknown field", args: []string{"--config", "testdata-unknown"}},
	}
	unknown := writeConfig(t, configHeader+"noSuchField: 1\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := slices.Clone(tt.args)
			if args[len(args)-1] == "testdata-unknown" {
				args[len(args)-1] = unknown
			}
			if code := run(args); code != exitUsage {
				t.Fatalf("run(%v) = %d, want %d", args, code, exitUsage)
			}
		})
	}
}

func TestTaintsFlag(t *testing.T) {
	tests := []struct {
		name    string
		values  []string // one per use of the flag
		want    []v1.Taint
		wantErr string
	}{
		{name: "key value effect", values: []string{"dedicated=gpu:NoSchedule"},
			want: []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}},
		{name: "no value", values: []string{"example.com/special:PreferNoSchedule"},
			want: []v1.Taint{{Key: "example.com/special", Effect: v1.TaintEffectPreferNoSchedule}}},
		{name: "a list and a second use", values: []string{"a=1:NoSchedule,b=2:NoExecute", "c:NoSchedule"},
			want: []v1.Taint{{Key: "a", Value: "1", Effect: "NoSchedule"}, {Key: "b", Value: "2", Effect: "NoExecute"}, {Key: "c", Effect: "NoSchedule"}}},
		{name: "same key, other effect", values: []string{"a=1:NoSchedule,a=1:NoExecute"},
			want: []v1.Taint{{Key: "a", Value: "1", Effect: "NoSchedule"}, {Key: "a", Value: "1", Effect: "NoExecute"}}},
		{name: "no effect", values: []string{"a=1"}, wantErr: "want key[=value]:Effect"},
		{name: "bad effect", values: []string{"a=1:Maybe"}, wantErr: `effect "Maybe"`},
		{name: "bad value", values: []string{"a=b c:NoSchedule"}, wantErr: `value "b c"`},
		{name: "duplicate across uses", values: []string{"a:NoSchedule", "a=2:NoSchedule"}, wantErr: "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []v1.Taint
			f := &taintsFlag{&got}
			var err error
			for _, v := range tt.values {
				if err = f.Set(v); err != nil {
					break
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("taints %v, want %v", got, tt.want)
			}
			if s := f.String(); s == "" || !strings.Contains(s, tt.want[0].Key) {
				t.Fatalf("String() %q", s)
			}
		})
	}
}

func TestNodeFlagDefaults(t *testing.T) {
	o := defaultOptions()
	if o.ResolvConf != "/etc/resolv.conf" || o.NodeStatusMaxImages != 50 || o.CgroupDriver != "cgroupfs" ||
		o.ClusterDomain != "" || o.ClusterDNS != nil || o.RotateCertificates || o.ServerTLSBootstrap || o.Config != "" {
		t.Fatalf("defaults %+v", o)
	}
	o.Kubeconfig = "/k"
	o.BootstrapKubeconfig = "/b"
	o.ServerTLSBootstrap = true
	o.NodeStatusMaxImages = -1
	o.ClusterDNS = []string{"10.96.0.10", "fd00::a"}
	o.RegisterWithTaints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoExecute}}
	o.CgroupDriver = "systemd"
	o.ClusterDomain = "cluster.local."
	o.AuthorizationMode = authzWebhook
	if err := o.validate(); err != nil {
		t.Fatalf("valid node flags refused: %v", err)
	}
}
