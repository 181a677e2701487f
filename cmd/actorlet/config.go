package main

// --config: a KubeletConfiguration file (kubelet.config.k8s.io/v1beta1),
// decoded with upstream's types, strictly, defaulted as upstream's
// SetDefaults_KubeletConfiguration, then laid under the flags the user gave
// (as upstream: a flag on the command line beats the file, the file beats a
// flag's default). /configz serves the effective configuration built back
// from the options, so flags and file agree there.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/actorlet/actorlet/actors/eviction"
)

// kcfg is upstream's v1beta1 KubeletConfiguration.
type kcfg = kubeletconfig.KubeletConfiguration

const (
	kubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
	kubeletConfigKind       = "KubeletConfiguration"
)

// readKubeletConfig reads, decodes and defaults a KubeletConfiguration
// file. Relative paths in it are made relative to the file's directory, as
// upstream.
func readKubeletConfig(path string) (*kcfg, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := decodeKubeletConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	for _, p := range []*string{&c.StaticPodPath, &c.Authentication.X509.ClientCAFile, &c.TLSCertFile, &c.TLSPrivateKeyFile,
		c.ResolverConfig, &c.PodLogsDir} {
		if p != nil && *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	setKubeletConfigDefaults(c)
	return c, nil
}

// decodeKubeletConfig decodes YAML or JSON strictly: apiVersion and kind
// must be v1beta1's KubeletConfiguration, and an unknown or duplicated
// field is an error naming it.
func decodeKubeletConfig(data []byte) (*kcfg, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("the file is empty (want a " + kubeletConfigAPIVersion + " " + kubeletConfigKind + ")")
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return nil, fmt.Errorf("not a %s: %w", kubeletConfigKind, err)
	}
	if tm.Kind != kubeletConfigKind {
		return nil, fmt.Errorf("kind %q, want %s", tm.Kind, kubeletConfigKind)
	}
	if tm.APIVersion != kubeletConfigAPIVersion {
		return nil, fmt.Errorf("apiVersion %q, want %s (the only version actorlet reads)", tm.APIVersion, kubeletConfigAPIVersion)
	}
	c := &kcfg{}
	strict, err := sigsjson.UnmarshalStrict(js, c, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		// A value's own decoder (a duration, a quantity) does not say
		// which field it was decoding: find it.
		if f := badField(js); f != "" && !strings.Contains(err.Error(), f) {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		return nil, err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return c, nil
}

// badField is the dotted path of the first field of the JSON object js
// that does not decode into a KubeletConfiguration on its own ("" when
// none does not).
func badField(js []byte) string {
	var m map[string]any
	if json.Unmarshal(js, &m) != nil {
		return ""
	}
	return findBadField(m, nil)
}

func findBadField(m map[string]any, path []string) string {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := append(slices.Clone(path), k)
		obj := m[k]
		for i := len(p) - 1; i >= 0; i-- {
			obj = map[string]any{p[i]: obj}
		}
		b, err := json.Marshal(obj)
		if err != nil || json.Unmarshal(b, &kcfg{}) == nil {
			continue
		}
		if sub, ok := m[k].(map[string]any); ok {
			if f := findBadField(sub, p); f != "" {
				return f
			}
		}
		return strings.Join(p, ".")
	}
	return ""
}

// setKubeletConfigDefaults applies v1beta1's defaults (upstream's
// pkg/kubelet/apis/config/v1beta1 SetDefaults_KubeletConfiguration, v1.36,
// without its feature-gated ones): they differ from the flags' defaults
// (anonymous authentication off, webhook authentication and authorization
// on, no read-only port).
func setKubeletConfigDefaults(c *kcfg) {
	c.APIVersion, c.Kind = kubeletConfigAPIVersion, kubeletConfigKind
	dur := func(d *metav1.Duration, def time.Duration) {
		if d.Duration == 0 {
			d.Duration = def
		}
	}
	str := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	if c.EnableServer == nil {
		c.EnableServer = ptr.To(true)
	}
	dur(&c.SyncFrequency, time.Minute)
	dur(&c.FileCheckFrequency, 20*time.Second)
	dur(&c.HTTPCheckFrequency, 20*time.Second)
	str(&c.Address, "0.0.0.0")
	if c.Port == 0 {
		c.Port = 10250
	}
	if c.Authentication.Anonymous.Enabled == nil {
		c.Authentication.Anonymous.Enabled = ptr.To(false)
	}
	if c.Authentication.Webhook.Enabled == nil {
		c.Authentication.Webhook.Enabled = ptr.To(true)
	}
	dur(&c.Authentication.Webhook.CacheTTL, 2*time.Minute)
	if c.Authorization.Mode == "" {
		c.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeWebhook
	}
	dur(&c.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	dur(&c.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
	if c.RegistryPullQPS == nil {
		c.RegistryPullQPS = ptr.To[int32](5)
	}
	if c.RegistryBurst == 0 {
		c.RegistryBurst = 10
	}
	if c.EventRecordQPS == nil {
		c.EventRecordQPS = ptr.To[int32](50)
	}
	if c.EventBurst == 0 {
		c.EventBurst = 100
	}
	if c.EnableDebuggingHandlers == nil {
		c.EnableDebuggingHandlers = ptr.To(true)
	}
	if c.HealthzPort == nil {
		c.HealthzPort = ptr.To[int32](10248)
	}
	str(&c.HealthzBindAddress, "127.0.0.1")
	if c.OOMScoreAdj == nil {
		c.OOMScoreAdj = ptr.To[int32](-999)
	}
	dur(&c.StreamingConnectionIdleTimeout, 4*time.Hour)
	if c.NodeStatusReportFrequency.Duration == 0 {
		// An explicit nodeStatusUpdateFrequency is also the report
		// frequency, for compatibility (as upstream).
		c.NodeStatusReportFrequency = c.NodeStatusUpdateFrequency
		dur(&c.NodeStatusReportFrequency, 5*time.Minute)
	}
	dur(&c.NodeStatusUpdateFrequency, 10*time.Second)
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = 40
	}
	dur(&c.ImageMinimumGCAge, 2*time.Minute)
	if c.ImageGCHighThresholdPercent == nil {
		c.ImageGCHighThresholdPercent = ptr.To[int32](85)
	}
	if c.ImageGCLowThresholdPercent == nil {
		c.ImageGCLowThresholdPercent = ptr.To[int32](80)
	}
	dur(&c.VolumeStatsAggPeriod, time.Minute)
	if c.CgroupsPerQOS == nil {
		c.CgroupsPerQOS = ptr.To(true)
	}
	str(&c.CgroupDriver, cgroupDriverCgroupfs)
	str(&c.CPUManagerPolicy, "none")
	dur(&c.CPUManagerReconcilePeriod, 10*time.Second)
	str(&c.MemoryManagerPolicy, kubeletconfig.NoneMemoryManagerPolicy)
	str(&c.TopologyManagerPolicy, kubeletconfig.NoneTopologyManagerPolicy)
	str(&c.TopologyManagerScope, kubeletconfig.ContainerTopologyManagerScope)
	dur(&c.RuntimeRequestTimeout, 2*time.Minute)
	str(&c.HairpinMode, kubeletconfig.PromiscuousBridge)
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.PodPidsLimit == nil || *c.PodPidsLimit < 0 {
		c.PodPidsLimit = ptr.To[int64](-1)
	}
	if c.ResolverConfig == nil {
		c.ResolverConfig = ptr.To("/etc/resolv.conf")
	}
	if c.CPUCFSQuota == nil {
		c.CPUCFSQuota = ptr.To(true)
	}
	if c.CPUCFSQuotaPeriod == nil {
		c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 100 * time.Millisecond}
	}
	if c.NodeStatusMaxImages == nil {
		c.NodeStatusMaxImages = ptr.To[int32](50)
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = 1000000
	}
	str(&c.ContentType, "application/vnd.kubernetes.protobuf")
	if c.KubeAPIQPS == nil {
		c.KubeAPIQPS = ptr.To[int32](50)
	}
	if c.KubeAPIBurst == 0 {
		c.KubeAPIBurst = 100
	}
	if c.SerializeImagePulls == nil {
		// true unless maxParallelImagePulls allows more than one
		c.SerializeImagePulls = ptr.To(c.MaxParallelImagePulls == nil || *c.MaxParallelImagePulls < 2)
	}
	dur(&c.EvictionPressureTransitionPeriod, 5*time.Minute)
	if c.MergeDefaultEvictionSettings == nil {
		c.MergeDefaultEvictionSettings = ptr.To(false)
	}
	if c.EnableControllerAttachDetach == nil {
		c.EnableControllerAttachDetach = ptr.To(true)
	}
	if c.MakeIPTablesUtilChains == nil {
		c.MakeIPTablesUtilChains = ptr.To(true)
	}
	if c.IPTablesMasqueradeBit == nil {
		c.IPTablesMasqueradeBit = ptr.To[int32](14)
	}
	if c.IPTablesDropBit == nil {
		c.IPTablesDropBit = ptr.To[int32](15)
	}
	if c.FailSwapOn == nil {
		c.FailSwapOn = ptr.To(true)
	}
	str(&c.ContainerLogMaxSize, "10Mi")
	if c.ContainerLogMaxFiles == nil {
		c.ContainerLogMaxFiles = ptr.To[int32](5)
	}
	if c.ContainerLogMaxWorkers == nil {
		c.ContainerLogMaxWorkers = ptr.To[int32](1)
	}
	if c.ContainerLogMonitorInterval == nil {
		c.ContainerLogMonitorInterval = &metav1.Duration{Duration: 10 * time.Second}
	}
	if c.ConfigMapAndSecretChangeDetectionStrategy == "" {
		c.ConfigMapAndSecretChangeDetectionStrategy = kubeletconfig.WatchChangeDetectionStrategy
	}
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{"pods"}
	}
	str(&c.VolumePluginDir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/")
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
	if c.EnableSystemLogHandler == nil {
		c.EnableSystemLogHandler = ptr.To(true)
	}
	if c.EnableProfilingHandler == nil {
		c.EnableProfilingHandler = ptr.To(true)
	}
	if c.EnableDebugFlagsHandler == nil {
		c.EnableDebugFlagsHandler = ptr.To(true)
	}
	if c.SeccompDefault == nil {
		c.SeccompDefault = ptr.To(false)
	}
	if c.FailCgroupV1 == nil {
		c.FailCgroupV1 = ptr.To(true) // v1beta1's default since v1.35
	}
	// memoryThrottlingFactor has no default since v1.37 (MemoryQoS beta:
	// memory.high is not set unless it is configured); actorlet sets no
	// memory.min/low/high, so a file that sets it is named at start as an
	// ignored field (docs/KUBERNETES-1.37.md).
	if c.RegisterNode == nil {
		c.RegisterNode = ptr.To(true)
	}
	if c.LocalStorageCapacityIsolation == nil {
		c.LocalStorageCapacityIsolation = ptr.To(true)
	}
	str(&c.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock")
	str(&c.PodLogsDir, "/var/log/pods")
}

// configField is one KubeletConfiguration field actorlet honours: the
// option it sets, the flag that sets the same option (and beats the file),
// and both directions between them.
type configField struct {
	field string // dotted JSON path in the file: "authentication.anonymous.enabled"
	flag  string // the flag of the same option: "anonymous-auth"
	// toOptions sets the option from the (defaulted) file.
	toOptions func(c *kcfg, o *options)
	// fromOptions sets the field from the option (/configz).
	fromOptions func(o *options, c *kcfg)
}

// Helpers that build configFields for the common shapes.
func strField(field, flag string, f func(*kcfg) *string, opt func(*options) *string) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) { *opt(o) = *f(c) },
		func(o *options, c *kcfg) { *f(c) = *opt(o) }}
}

func durField(field, flag string, f func(*kcfg) *metav1.Duration, opt func(*options) *time.Duration) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) { *opt(o) = f(c).Duration },
		func(o *options, c *kcfg) { *f(c) = metav1.Duration{Duration: *opt(o)} }}
}

func int32Field(field, flag string, f func(*kcfg) *int32, opt func(*options) *int32) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) { *opt(o) = *f(c) },
		func(o *options, c *kcfg) { *f(c) = *opt(o) }}
}

// int32PtrField is a defaulted *int32 field (never nil after defaulting).
func int32PtrField(field, flag string, f func(*kcfg) **int32, opt func(*options) *int32) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) { *opt(o) = **f(c) },
		func(o *options, c *kcfg) { *f(c) = ptr.To(*opt(o)) }}
}

func boolField(field, flag string, f func(*kcfg) *bool, opt func(*options) *bool) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) { *opt(o) = *f(c) },
		func(o *options, c *kcfg) { *f(c) = *opt(o) }}
}

func boolPtrField(field, flag string, f func(*kcfg) **bool, opt func(*options) *bool) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) { *opt(o) = **f(c) },
		func(o *options, c *kcfg) { *f(c) = ptr.To(*opt(o)) }}
}

func mapField(field, flag string, f func(*kcfg) *map[string]string, opt func(*options) *map[string]string) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) { *opt(o) = maps.Clone(*f(c)) },
		func(o *options, c *kcfg) { *f(c) = maps.Clone(*opt(o)) }}
}

// signalField is an eviction threshold map (evictionHard, evictionSoft):
// left out of the file, the option's default (upstream's default hard
// thresholds, no soft ones).
func signalField(field, flag string, f func(*kcfg) *map[string]string, opt func(*options) *signalMap, def func() map[string]string) configField {
	return configField{field, flag,
		func(c *kcfg, o *options) {
			if m := *f(c); m != nil {
				*opt(o) = signalMap{m: maps.Clone(m), set: true}
			} else {
				*opt(o) = signalMap{}
			}
		},
		func(o *options, c *kcfg) {
			if s := opt(o); s.set {
				*f(c) = maps.Clone(s.m)
			} else {
				*f(c) = def()
			}
		}}
}

// configFields are the KubeletConfiguration fields actorlet honours, in the
// order they apply (enableServer after port).
var configFields = []configField{
	strField("staticPodPath", "pod-manifest-path", func(c *kcfg) *string { return &c.StaticPodPath }, func(o *options) *string { return &o.PodManifestPath }),
	strField("staticPodURL", "manifest-url", func(c *kcfg) *string { return &c.StaticPodURL }, func(o *options) *string { return &o.ManifestURL }),
	durField("fileCheckFrequency", "file-check-frequency", func(c *kcfg) *metav1.Duration { return &c.FileCheckFrequency }, func(o *options) *time.Duration { return &o.FileCheckFrequency }),
	durField("httpCheckFrequency", "http-check-frequency", func(c *kcfg) *metav1.Duration { return &c.HTTPCheckFrequency }, func(o *options) *time.Duration { return &o.HTTPCheckFrequency }),
	durField("syncFrequency", "sync-frequency", func(c *kcfg) *metav1.Duration { return &c.SyncFrequency }, func(o *options) *time.Duration { return &o.SyncFrequency }),
	strField("address", "address", func(c *kcfg) *string { return &c.Address }, func(o *options) *string { return &o.Address }),
	int32Field("port", "port", func(c *kcfg) *int32 { return &c.Port }, func(o *options) *int32 { return &o.Port }),
	{field: "enableServer", flag: "port",
		toOptions: func(c *kcfg, o *options) {
			if !*c.EnableServer {
				o.Port = 0
			}
		},
		fromOptions: func(o *options, c *kcfg) {
			c.EnableServer = ptr.To(o.Port != 0)
			if o.Port == 0 {
				c.Port = 10250 // the port it would take
			}
		}},
	int32Field("readOnlyPort", "read-only-port", func(c *kcfg) *int32 { return &c.ReadOnlyPort }, func(o *options) *int32 { return &o.ReadOnlyPort }),
	int32PtrField("healthzPort", "healthz-port", func(c *kcfg) **int32 { return &c.HealthzPort }, func(o *options) *int32 { return &o.HealthzPort }),
	strField("healthzBindAddress", "healthz-bind-address", func(c *kcfg) *string { return &c.HealthzBindAddress }, func(o *options) *string { return &o.HealthzBindAddress }),
	strField("tlsCertFile", "tls-cert-file", func(c *kcfg) *string { return &c.TLSCertFile }, func(o *options) *string { return &o.TLSCertFile }),
	strField("tlsPrivateKeyFile", "tls-private-key-file", func(c *kcfg) *string { return &c.TLSPrivateKeyFile }, func(o *options) *string { return &o.TLSPrivateKeyFile }),
	boolField("rotateCertificates", "rotate-certificates", func(c *kcfg) *bool { return &c.RotateCertificates }, func(o *options) *bool { return &o.RotateCertificates }),
	boolField("serverTLSBootstrap", "rotate-server-certificates", func(c *kcfg) *bool { return &c.ServerTLSBootstrap }, func(o *options) *bool { return &o.ServerTLSBootstrap }),
	strField("authentication.x509.clientCAFile", "client-ca-file", func(c *kcfg) *string { return &c.Authentication.X509.ClientCAFile }, func(o *options) *string { return &o.ClientCAFile }),
	boolPtrField("authentication.webhook.enabled", "authentication-token-webhook", func(c *kcfg) **bool { return &c.Authentication.Webhook.Enabled }, func(o *options) *bool { return &o.AuthenticationTokenWebhook }),
	durField("authentication.webhook.cacheTTL", "authentication-token-webhook-cache-ttl", func(c *kcfg) *metav1.Duration { return &c.Authentication.Webhook.CacheTTL }, func(o *options) *time.Duration { return &o.AuthenticationTokenWebhookTTL }),
	boolPtrField("authentication.anonymous.enabled", "anonymous-auth", func(c *kcfg) **bool { return &c.Authentication.Anonymous.Enabled }, func(o *options) *bool { return &o.AnonymousAuth }),
	{field: "authorization.mode", flag: "authorization-mode",
		toOptions: func(c *kcfg, o *options) { o.AuthorizationMode = string(c.Authorization.Mode) },
		fromOptions: func(o *options, c *kcfg) {
			c.Authorization.Mode = kubeletconfig.KubeletAuthorizationMode(o.AuthorizationMode)
		}},
	durField("authorization.webhook.cacheAuthorizedTTL", "authorization-webhook-cache-authorized-ttl", func(c *kcfg) *metav1.Duration { return &c.Authorization.Webhook.CacheAuthorizedTTL }, func(o *options) *time.Duration { return &o.AuthorizationWebhookAuthorized }),
	durField("authorization.webhook.cacheUnauthorizedTTL", "authorization-webhook-cache-unauthorized-ttl", func(c *kcfg) *metav1.Duration { return &c.Authorization.Webhook.CacheUnauthorizedTTL }, func(o *options) *time.Duration { return &o.AuthorizationWebhookUnauthorized }),
	{field: "eventRecordQPS", flag: "event-qps",
		toOptions:   func(c *kcfg, o *options) { o.EventQPS = float32(*c.EventRecordQPS) },
		fromOptions: func(o *options, c *kcfg) { c.EventRecordQPS = ptr.To(int32(o.EventQPS)) }},
	int32Field("eventBurst", "event-burst", func(c *kcfg) *int32 { return &c.EventBurst }, func(o *options) *int32 { return &o.EventBurst }),
	boolField("enableContentionProfiling", "contention-profiling", func(c *kcfg) *bool { return &c.EnableContentionProfiling }, func(o *options) *bool { return &o.ContentionProfiling }),
	boolPtrField("enableDebuggingHandlers", "enable-debugging-handlers", func(c *kcfg) **bool { return &c.EnableDebuggingHandlers }, func(o *options) *bool { return &o.EnableDebuggingHandlers }),
	strField("clusterDomain", "cluster-domain", func(c *kcfg) *string { return &c.ClusterDomain }, func(o *options) *string { return &o.ClusterDomain }),
	{field: "clusterDNS", flag: "cluster-dns",
		toOptions:   func(c *kcfg, o *options) { o.ClusterDNS = slices.Clone(c.ClusterDNS) },
		fromOptions: func(o *options, c *kcfg) { c.ClusterDNS = slices.Clone(o.ClusterDNS) }},
	{field: "resolvConf", flag: "resolv-conf",
		toOptions:   func(c *kcfg, o *options) { o.ResolvConf = *c.ResolverConfig },
		fromOptions: func(o *options, c *kcfg) { c.ResolverConfig = ptr.To(o.ResolvConf) }},
	{field: "registerWithTaints", flag: "register-with-taints",
		toOptions: func(c *kcfg, o *options) {
			o.RegisterWithTaints = slices.Clone(c.RegisterWithTaints)
		},
		fromOptions: func(o *options, c *kcfg) {
			c.RegisterWithTaints = slices.Clone(o.RegisterWithTaints)
		}},
	int32PtrField("nodeStatusMaxImages", "node-status-max-images", func(c *kcfg) **int32 { return &c.NodeStatusMaxImages }, func(o *options) *int32 { return &o.NodeStatusMaxImages }),
	{field: "allowedUnsafeSysctls", flag: "allowed-unsafe-sysctls",
		toOptions:   func(c *kcfg, o *options) { o.AllowedUnsafeSysctls = slices.Clone(c.AllowedUnsafeSysctls) },
		fromOptions: func(o *options, c *kcfg) { c.AllowedUnsafeSysctls = slices.Clone(o.AllowedUnsafeSysctls) }},
	strField("cgroupDriver", "cgroup-driver", func(c *kcfg) *string { return &c.CgroupDriver }, func(o *options) *string { return &o.CgroupDriver }),
	int32Field("maxPods", "max-pods", func(c *kcfg) *int32 { return &c.MaxPods }, func(o *options) *int32 { return &o.MaxPods }),
	strField("podLogsDir", "pod-logs-dir", func(c *kcfg) *string { return &c.PodLogsDir }, func(o *options) *string { return &o.PodLogsDir }),
	durField("runtimeRequestTimeout", "runtime-request-timeout", func(c *kcfg) *metav1.Duration { return &c.RuntimeRequestTimeout }, func(o *options) *time.Duration { return &o.RuntimeRequestTimeout }),
	durField("nodeStatusUpdateFrequency", "node-status-update-frequency", func(c *kcfg) *metav1.Duration { return &c.NodeStatusUpdateFrequency }, func(o *options) *time.Duration { return &o.NodeStatusUpdateFrequency }),
	durField("nodeStatusReportFrequency", "node-status-report-frequency", func(c *kcfg) *metav1.Duration { return &c.NodeStatusReportFrequency }, func(o *options) *time.Duration { return &o.NodeStatusReportFrequency }),
	int32Field("nodeLeaseDurationSeconds", "node-lease-duration-seconds", func(c *kcfg) *int32 { return &c.NodeLeaseDurationSeconds }, func(o *options) *int32 { return &o.NodeLeaseDurationSeconds }),
	{field: "kubeAPIQPS", flag: "kube-api-qps",
		toOptions:   func(c *kcfg, o *options) { o.KubeAPIQPS = float32(*c.KubeAPIQPS) },
		fromOptions: func(o *options, c *kcfg) { c.KubeAPIQPS = ptr.To(int32(o.KubeAPIQPS)) }},
	int32Field("kubeAPIBurst", "kube-api-burst", func(c *kcfg) *int32 { return &c.KubeAPIBurst }, func(o *options) *int32 { return &o.KubeAPIBurst }),
	signalField("evictionHard", "eviction-hard", func(c *kcfg) *map[string]string { return &c.EvictionHard }, func(o *options) *signalMap { return &o.EvictionHard }, eviction.DefaultHard),
	signalField("evictionSoft", "eviction-soft", func(c *kcfg) *map[string]string { return &c.EvictionSoft }, func(o *options) *signalMap { return &o.EvictionSoft }, func() map[string]string { return nil }),
	mapField("evictionSoftGracePeriod", "eviction-soft-grace-period", func(c *kcfg) *map[string]string { return &c.EvictionSoftGracePeriod }, func(o *options) *map[string]string { return &o.EvictionSoftGracePeriod }),
	mapField("evictionMinimumReclaim", "eviction-minimum-reclaim", func(c *kcfg) *map[string]string { return &c.EvictionMinimumReclaim }, func(o *options) *map[string]string { return &o.EvictionMinimumReclaim }),
	durField("evictionPressureTransitionPeriod", "eviction-pressure-transition-period", func(c *kcfg) *metav1.Duration { return &c.EvictionPressureTransitionPeriod }, func(o *options) *time.Duration { return &o.EvictionPressureTransitionPeriod }),
	int32Field("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", func(c *kcfg) *int32 { return &c.EvictionMaxPodGracePeriod }, func(o *options) *int32 { return &o.EvictionMaxPodGracePeriod }),
	int32PtrField("imageGCHighThresholdPercent", "image-gc-high-threshold", func(c *kcfg) **int32 { return &c.ImageGCHighThresholdPercent }, func(o *options) *int32 { return &o.ImageGCHighThreshold }),
	int32PtrField("imageGCLowThresholdPercent", "image-gc-low-threshold", func(c *kcfg) **int32 { return &c.ImageGCLowThresholdPercent }, func(o *options) *int32 { return &o.ImageGCLowThreshold }),
	durField("imageMinimumGCAge", "image-minimum-gc-age", func(c *kcfg) *metav1.Duration { return &c.ImageMinimumGCAge }, func(o *options) *time.Duration { return &o.ImageMinimumGCAge }),
	durField("imageMaximumGCAge", "image-maximum-gc-age", func(c *kcfg) *metav1.Duration { return &c.ImageMaximumGCAge }, func(o *options) *time.Duration { return &o.ImageMaximumGCAge }),
	mapField("kubeReserved", "kube-reserved", func(c *kcfg) *map[string]string { return &c.KubeReserved }, func(o *options) *map[string]string { return &o.KubeReserved }),
	mapField("systemReserved", "system-reserved", func(c *kcfg) *map[string]string { return &c.SystemReserved }, func(o *options) *map[string]string { return &o.SystemReserved }),
	strField("containerRuntimeEndpoint", "container-runtime-endpoint", func(c *kcfg) *string { return &c.ContainerRuntimeEndpoint }, func(o *options) *string { return &o.ContainerRuntimeEndpoint }),
	{field: "crashLoopBackOff.maxContainerRestartPeriod", flag: "crashloop-backoff-max",
		toOptions: func(c *kcfg, o *options) {
			if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil {
				o.BackoffMax = p.Duration
			}
		},
		fromOptions: func(o *options, c *kcfg) {
			c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: o.BackoffMax}
		}},
	boolPtrField("cgroupsPerQOS", "cgroups-per-qos", func(c *kcfg) **bool { return &c.CgroupsPerQOS }, func(o *options) *bool { return &o.CgroupsPerQOS }),
	strField("cgroupRoot", "cgroup-root", func(c *kcfg) *string { return &c.CgroupRoot }, func(o *options) *string { return &o.CgroupRoot }),
	{field: "enforceNodeAllocatable", flag: "enforce-node-allocatable",
		toOptions:   func(c *kcfg, o *options) { o.EnforceNodeAllocatable = slices.Clone(c.EnforceNodeAllocatable) },
		fromOptions: func(o *options, c *kcfg) { c.EnforceNodeAllocatable = slices.Clone(o.EnforceNodeAllocatable) }},
	strField("systemReservedCgroup", "system-reserved-cgroup", func(c *kcfg) *string { return &c.SystemReservedCgroup }, func(o *options) *string { return &o.SystemReservedCgroup }),
	strField("kubeReservedCgroup", "kube-reserved-cgroup", func(c *kcfg) *string { return &c.KubeReservedCgroup }, func(o *options) *string { return &o.KubeReservedCgroup }),
	{field: "podPidsLimit", flag: "pod-max-pids",
		toOptions:   func(c *kcfg, o *options) { o.PodMaxPids = *c.PodPidsLimit },
		fromOptions: func(o *options, c *kcfg) { c.PodPidsLimit = ptr.To(o.PodMaxPids) }},
	boolPtrField("cpuCFSQuota", "cpu-cfs-quota", func(c *kcfg) **bool { return &c.CPUCFSQuota }, func(o *options) *bool { return &o.CPUCFSQuota }),
	{field: "cpuCFSQuotaPeriod", flag: "cpu-cfs-quota-period",
		toOptions:   func(c *kcfg, o *options) { o.CPUCFSQuotaPeriod = c.CPUCFSQuotaPeriod.Duration },
		fromOptions: func(o *options, c *kcfg) { c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: o.CPUCFSQuotaPeriod} }},
	boolPtrField("failCgroupV1", "fail-cgroupv1", func(c *kcfg) **bool { return &c.FailCgroupV1 }, func(o *options) *bool { return &o.FailCgroupV1 }),
	strField("logging.format", "log-format", func(c *kcfg) *string { return &c.Logging.Format }, func(o *options) *string { return &o.LogFormat }),
	{field: "logging.verbosity", flag: "v",
		toOptions:   func(c *kcfg, o *options) { o.Verbosity = int(c.Logging.Verbosity) },
		fromOptions: func(o *options, c *kcfg) { c.Logging.Verbosity = logsapi.VerbosityLevel(max(o.Verbosity, 0)) }},
}

// applyConfigFile reads --config (when given) and sets from it every option
// whose flag is not on the command line (changed reports those, as
// pflag's FlagSet.Changed). It returns the fields the file sets (to other
// than v1beta1's defaults) that actorlet does not implement, to be logged
// once at start: they are ignored, never silently.
func (o *options) applyConfigFile(changed func(flag string) bool) (ignored []string, err error) {
	if o.Config == "" {
		return nil, nil
	}
	c, err := readKubeletConfig(o.Config)
	if err != nil {
		return nil, err
	}
	if err := refuseDefaultPodSysctls(c); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Config, err)
	}
	o.fileFields = map[string]string{}
	for _, f := range configFields {
		if changed(f.flag) {
			continue
		}
		f.toOptions(c, o)
		if _, ok := o.fileFields[f.flag]; !ok { // port, not enableServer
			o.fileFields[f.flag] = f.field
		}
	}
	o.kubeletConfig = c
	return unimplementedFields(c)
}

// unimplementedFields are the fields of c (defaulted) that differ from
// v1beta1's defaults and that no configField honours, as dotted paths.
func unimplementedFields(c *kcfg) ([]string, error) {
	def := &kcfg{}
	setKubeletConfigDefaults(def)
	got, err := asJSONMap(c)
	if err != nil {
		return nil, err
	}
	want, err := asJSONMap(def)
	if err != nil {
		return nil, err
	}
	honoured := map[string]bool{"apiVersion": true, "kind": true}
	for _, f := range configFields {
		honoured[f.field] = true
	}
	var out []string
	diffPaths("", got, want, func(path string) {
		if !honoured[path] {
			out = append(out, path)
		}
	})
	slices.Sort(out)
	return out, nil
}

func asJSONMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// diffPaths calls differ with the dotted path of every leaf where a and b
// differ; objects are walked, anything else (lists included) is a leaf. A
// path whose object is honoured as a whole stops the walk there.
func diffPaths(prefix string, a, b map[string]any, differ func(string)) {
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		am, aok := a[k].(map[string]any)
		bm, bok := b[k].(map[string]any)
		switch {
		case aok && bok:
			diffPaths(path, am, bm, differ)
		case !reflect.DeepEqual(a[k], b[k]):
			differ(path)
		}
	}
}

// effectiveKubeletConfig is the configuration actorlet runs with, as a
// v1beta1 KubeletConfiguration (/configz): the file's (or v1beta1's
// defaults without one), every honoured field taken from the options, so
// that what the flags changed shows.
func (o *options) effectiveKubeletConfig() *kcfg {
	var c *kcfg
	if o.kubeletConfig != nil {
		c = o.kubeletConfig.DeepCopy()
	} else {
		c = &kcfg{}
		setKubeletConfigDefaults(c)
	}
	for _, f := range configFields {
		f.fromOptions(o, c)
	}
	return c
}

// nameFileFields rewrites a validation error so that a flag whose value
// came from the --config file is named by the file's field too, as
// upstream names them ("maxPods (--max-pods)").
func (o *options) nameFileFields(err error) error {
	if err == nil || len(o.fileFields) == 0 {
		return err
	}
	msg := err.Error()
	for _, flag := range slices.Sorted(maps.Keys(o.fileFields)) {
		re := regexp.MustCompile(`--` + regexp.QuoteMeta(flag) + `([^a-z0-9-]|$)`)
		msg = re.ReplaceAllString(msg, "\x00"+flag+"\x00${1}")
	}
	for _, flag := range slices.Sorted(maps.Keys(o.fileFields)) {
		msg = strings.ReplaceAll(msg, "\x00"+flag+"\x00",
			fmt.Sprintf("%s of %s (--%s)", o.fileFields[flag], o.Config, flag))
	}
	return errors.New(msg)
}

// eventClientQPS is the QPS the events client is built with for
// --event-qps (eventRecordQPS): since Kubernetes v1.37 0 means no limit,
// which client-go spells as a negative QPS (no token bucket at all).
func eventClientQPS(flag float32) float32 {
	if flag == 0 {
		return -1
	}
	return flag
}

// refuseDefaultPodSysctls refuses defaultPodSysctls (Kubernetes v1.37,
// alpha): upstream honours it only behind the DefaultPodSysctls feature
// gate, off by default, and refuses the field without it; actorlet has no
// feature gates and does not apply default sysctls, so it refuses the
// field as upstream does with the gate off, rather than run pods without
// the sysctls the file asks for.
func refuseDefaultPodSysctls(c *kcfg) error {
	if len(c.DefaultPodSysctls) == 0 {
		return nil
	}
	return errors.New("invalid configuration: defaultPodSysctls is not implemented by actorlet " +
		"(alpha in Kubernetes v1.37, behind the DefaultPodSysctls feature gate, off by default): " +
		"remove it, or set the sysctls in each pod's spec.securityContext.sysctls")
}
