package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"github.com/actorlet/actorlet/podspec"
	"github.com/actorlet/actorlet/supervisors"
)

// options are actorlet's flags. Names and defaults follow the upstream
// kubelet where the feature exists in both.
type options struct {
	PodManifestPath          string
	ManifestURL              string
	FileCheckFrequency       time.Duration
	HTTPCheckFrequency       time.Duration
	ContainerRuntimeEndpoint string
	RootDir                  string
	PodLogsDir               string
	GPUs                     string
	ImageGCHighThreshold     int32
	EvictionHard             signalMap
	EvictionSoft             signalMap
	EvictionSoftGracePeriod  map[string]string
	EvictionMinimumReclaim   map[string]string
	// EvictionPressureTransitionPeriod: a pressure condition stays true this
	// long after its last threshold cleared.
	EvictionPressureTransitionPeriod time.Duration
	EvictionMaxPodGracePeriod        int32
	ImageGCLowThreshold              int32
	ImageMinimumGCAge                time.Duration
	ImageMaximumGCAge                time.Duration
	GPUDeviceRoot                    string
	gpuDeviceRootSet                 bool // --gpu-device-root given: no stand-ins for simulated GPUs
	DeviceMetricsPeriod              time.Duration
	gpuDRAOptions                    // gpudra.go
	HostnameOverride                 string
	NodeIP                           string
	Address                          string
	Port                             int32
	ReadOnlyPort                     int32
	HealthzPort                      int32
	HealthzBindAddress               string
	HealthzProbeTimeout              time.Duration
	MaxPods                          int32
	SyncFrequency                    time.Duration
	RuntimeRequestTimeout            time.Duration
	PLEGRelistPeriod                 time.Duration
	PLEGThreshold                    time.Duration
	BackoffInitial                   time.Duration
	BackoffMax                       time.Duration
	ImagePullBackoffInitial          time.Duration
	ImagePullBackoffMax              time.Duration
	ChaosKillRate                    float64
	ChaosSeed                        int64
	ChaosKinds                       string
	ChaosDuration                    time.Duration
	Verbosity                        int
	LogFormat                        string
	Version                          bool // --version: print it and quit
	EnableDebuggingHandlers          bool
	ContentionProfiling              bool
	MaxParallelPodStarts             int32

	// supervision (supervise in tree.go)
	ActorMaxRestarts           int32
	ActorRestartWindow         time.Duration
	ActorRespawnBackoffInitial time.Duration
	ActorRespawnBackoffMax     time.Duration

	// node API security (upstream names and defaults)
	TLSCertFile                      string
	TLSPrivateKeyFile                string
	CertDir                          string
	AnonymousAuth                    bool
	ClientCAFile                     string
	AuthenticationTokenWebhook       bool
	AuthenticationTokenWebhookTTL    time.Duration
	AuthorizationMode                string
	AuthorizationWebhookAuthorized   time.Duration
	AuthorizationWebhookUnauthorized time.Duration
	// InsecureAnonymousRemoteWrites lifts the safe default: anonymous
	// requests may write and execute from any address (README "Security
	// defaults").
	InsecureAnonymousRemoteWrites bool

	// cluster mode
	Kubeconfig                string
	NodeLabels                map[string]string
	KubeReserved              map[string]string
	SystemReserved            map[string]string
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	NodeLeaseDurationSeconds  int32
	KubeAPIQPS                float32
	KubeAPIBurst              int32
	EventQPS                  float32
	EventBurst                int32

	// issue 11: the node as a drop-in kubelet (upstream names and
	// defaults; KubeletConfiguration fields in config.go)
	ClusterDNS          []string   // --cluster-dns: nameservers of ClusterFirst pods
	ClusterDomain       string     // --cluster-domain: <ns>.svc.<domain> search paths
	ResolvConf          string     // --resolv-conf: the host's resolver configuration ("" none)
	RegisterWithTaints  []v1.Taint // --register-with-taints: the Node's taints at registration
	NodeStatusMaxImages int32      // --node-status-max-images: status.images cap (-1 none)
	CgroupDriver        string     // --cgroup-driver: cgroupfs or systemd
	BootstrapKubeconfig string     // --bootstrap-kubeconfig: token kubeconfig for the client certificate CSR
	RotateCertificates  bool       // --rotate-certificates: renew the client certificate
	ServerTLSBootstrap  bool       // --rotate-server-certificates: serving certificate from a CSR
	Config              string     // --config: a KubeletConfiguration file (config.go)
	// --allowed-unsafe-sysctls: sysctls (or patterns "kernel.msg*") pods may
	// set besides the safe ones (sysctls.go)
	AllowedUnsafeSysctls []string

	// issue 30: the pod and QoS cgroups (cgroups.go)
	cgroupOptions

	// fileFields names, for each flag whose value came from --config, the
	// file's field (config.go), so that validate names what the user wrote.
	fileFields map[string]string
	// kubeletConfig is the --config file, defaulted (nil without one).
	kubeletConfig *kubeletconfig.KubeletConfiguration
}

// Cgroup drivers of --cgroup-driver.
const (
	cgroupDriverCgroupfs = "cgroupfs"
	cgroupDriverSystemd  = "systemd"
)

func defaultOptions() *options {
	return &options{
		FileCheckFrequency:               20 * time.Second,
		HTTPCheckFrequency:               20 * time.Second,
		ContainerRuntimeEndpoint:         "unix:///run/containerd/containerd.sock",
		RootDir:                          "/var/lib/kubelet",
		PodLogsDir:                       "/var/log/pods",
		GPUs:                             gpusAuto,
		ImageGCHighThreshold:             85,
		EvictionPressureTransitionPeriod: 5 * time.Minute,
		ImageGCLowThreshold:              80,
		ImageMinimumGCAge:                2 * time.Minute,
		GPUDeviceRoot:                    "/dev",
		gpuDRAOptions:                    defaultGPUDRAOptions(),
		DeviceMetricsPeriod:              10 * time.Second,
		Address:                          "0.0.0.0",
		Port:                             10250,
		ReadOnlyPort:                     10255,
		HealthzPort:                      10248,
		HealthzBindAddress:               "127.0.0.1",
		HealthzProbeTimeout:              5 * time.Second,
		MaxPods:                          110,
		SyncFrequency:                    time.Minute,
		RuntimeRequestTimeout:            2 * time.Minute,
		PLEGRelistPeriod:                 time.Second,
		PLEGThreshold:                    3 * time.Minute,
		BackoffInitial:                   10 * time.Second,
		BackoffMax:                       300 * time.Second,
		ImagePullBackoffInitial:          10 * time.Second,
		ImagePullBackoffMax:              300 * time.Second,
		ChaosKinds:                       "pod,probe",
		LogFormat:                        "text",
		EnableDebuggingHandlers:          true,
		MaxParallelPodStarts:             0,

		ActorMaxRestarts:           int32(supervisors.DefaultMaxRestarts),
		ActorRestartWindow:         supervisors.DefaultWindow,
		ActorRespawnBackoffInitial: time.Minute,
		ActorRespawnBackoffMax:     5 * time.Minute,

		AnonymousAuth:                    true,
		AuthenticationTokenWebhookTTL:    2 * time.Minute,
		AuthorizationMode:                authzAlwaysAllow,
		AuthorizationWebhookAuthorized:   5 * time.Minute,
		AuthorizationWebhookUnauthorized: 30 * time.Second,

		NodeStatusUpdateFrequency: 10 * time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,
		NodeLeaseDurationSeconds:  40,
		KubeAPIQPS:                50,
		KubeAPIBurst:              100,
		EventQPS:                  50,
		EventBurst:                100,

		ResolvConf:          "/etc/resolv.conf",
		NodeStatusMaxImages: 50,
		CgroupDriver:        cgroupDriverCgroupfs,
		cgroupOptions:       defaultCgroupOptions(),
	}
}

// flagSections are the agent's flags, section by section: addFlags
// registers each section's flags and tags them with its name, which
// agentUsage prints them under.
var flagSections = []struct {
	name string
	add  func(*options, *pflag.FlagSet)
}{
	{"Generic", (*options).addGenericFlags},
	{"Container runtime", (*options).addRuntimeFlags},
	{"Cluster and API server", (*options).addClusterFlags},
	{"Node registration and status", (*options).addNodeFlags},
	{"Node API and auth", (*options).addNodeAPIFlags},
	{"Pod and static pod", (*options).addPodFlags},
	{"DNS", (*options).addDNSFlags},
	{"Image", (*options).addImageFlags},
	{"Resource and eviction", (*options).addResourceFlags},
	{"Cgroup and node allocatable", (*options).addCgroupFlags},
	{"Device", (*options).addDeviceFlags},
	{"Health check", (*options).addHealthFlags},
	{"Logging and debugging", (*options).addLoggingFlags},
	{"Actor supervision", (*options).addSupervisionFlags},
	{"Chaos testing", (*options).addChaosFlags},
}

// addFlags registers the agent's flags on fs, each tagged with its help
// section. A flag registered twice panics (pflag's "flag redefined").
func (o *options) addFlags(fs *pflag.FlagSet) {
	for _, s := range flagSections {
		sfs := pflag.NewFlagSet(s.name, pflag.ContinueOnError)
		s.add(o, sfs)
		sfs.VisitAll(func(f *pflag.Flag) {
			setHelpSection(f, s.name)
			fs.AddFlag(f)
		})
	}
}

// addGenericFlags registers the flags of the configuration file, the state directory, the version.
func (o *options) addGenericFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Config, "config", o.Config,
		"A KubeletConfiguration file (kubelet.config.k8s.io/v1beta1; unknown fields are an error). Its fields take the place of the matching flags' defaults, "+
			"with v1beta1's defaults for what it leaves out (anonymous auth off, webhook authentication and authorization on, no read-only port); "+
			"flags given on the command line win over the file. Relative paths in it are relative to its directory.")
	fs.StringVar(&o.RootDir, "root-dir", o.RootDir, "Directory for actorlet's files (the embedded sim runtime's socket, checkpoints).")
	fs.BoolVar(&o.Version, "version", o.Version, "Print version information and quit.")
}

// addRuntimeFlags registers the flags of the CRI runtime, its timeouts and its relists.
func (o *options) addRuntimeFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ContainerRuntimeEndpoint, "container-runtime-endpoint", o.ContainerRuntimeEndpoint, "CRI v1 endpoint (unix:///path), or sim:// for the embedded simulated runtime (options as query: sim://?start-latency=50ms&fault-rate=0.01).")
	fs.DurationVar(&o.RuntimeRequestTimeout, "runtime-request-timeout", o.RuntimeRequestTimeout, "Timeout of every runtime request (except long-running ones).")
	fs.DurationVar(&o.PLEGRelistPeriod, "pleg-relist-period", o.PLEGRelistPeriod, "How often the PLEG relists the runtime.")
	fs.DurationVar(&o.PLEGThreshold, "pleg-relist-threshold", o.PLEGThreshold, "A relist older than this makes /healthz fail.")
	fs.StringVar(&o.CgroupDriver, "cgroup-driver", o.CgroupDriver,
		"How pods' cgroups are named, as the container runtime's: cgroupfs (/kubepods/burstable/pod<uid>) or systemd (kubepods-burstable-pod<uid>.slice).")
	fs.StringVar(&o.PodLogsDir, "pod-logs-dir", o.PodLogsDir, "Root of the pods' container logs (KubeletConfiguration podLogsDir).")
}

// addClusterFlags registers the flags of joining a cluster, the node's credentials and its
// request rates towards the API server.
func (o *options) addClusterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the node's credentials: joins the cluster (cluster mode). Empty: standalone.")
	fs.StringVar(&o.BootstrapKubeconfig, "bootstrap-kubeconfig", o.BootstrapKubeconfig,
		"Kubeconfig with a bootstrap token: when --kubeconfig is missing or its client certificate is no longer valid, actorlet requests one "+
			"(a CSR the cluster approves), keeps it in --cert-dir and writes --kubeconfig to use it.")
	fs.BoolVar(&o.RotateCertificates, "rotate-certificates", o.RotateCertificates,
		"Renew the client certificate through the API server (CSR) before it expires.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS towards the API server.")
	fs.Int32Var(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst towards the API server.")
	fs.Float32Var(&o.EventQPS, "event-qps", o.EventQPS, "QPS of event writes (their own limit, not --kube-api-qps); 0 is unlimited, as upstream since v1.37.")
	fs.Int32Var(&o.EventBurst, "event-burst", o.EventBurst, "Burst of event writes.")
}

// addNodeFlags registers the flags of the Node object: name, address, labels, taints,
// status and lease.
func (o *options) addNodeFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "The node name to use instead of the hostname.")
	fs.StringVar(&o.NodeIP, "node-ip", o.NodeIP, "The node's IP address (hostIP of pods). Default: the first non-loopback IPv4 address, else 127.0.0.1.")
	fs.StringToStringVar(&o.NodeLabels, "node-labels", o.NodeLabels, "Labels to add when registering the node, key=value,...")
	fs.Var(&taintsFlag{&o.RegisterWithTaints}, "register-with-taints",
		"Taints the Node registers with, comma-separated key[=value]:Effect (Effect: NoSchedule, PreferNoSchedule or NoExecute). At registration only, as upstream.")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency", o.NodeStatusUpdateFrequency, "How often the node status is computed (and posted when it changed).")
	fs.DurationVar(&o.NodeStatusReportFrequency, "node-status-report-frequency", o.NodeStatusReportFrequency, "How often the node status is posted when nothing changed.")
	fs.Int32Var(&o.NodeStatusMaxImages, "node-status-max-images", o.NodeStatusMaxImages,
		"Most images reported in the Node's status.images (largest first); -1: no cap.")
	fs.Int32Var(&o.NodeLeaseDurationSeconds, "node-lease-duration-seconds", o.NodeLeaseDurationSeconds, "Duration of the node's Lease (renewed every quarter of it).")
}

// addNodeAPIFlags registers the flags of the node API on --port: listeners, TLS,
// authentication and authorization.
func (o *options) addNodeAPIFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "address", o.Address, "IP address to serve the node API on.")
	fs.Int32Var(&o.Port, "port", o.Port, "Port of the node API (0 disables).")
	fs.Int32Var(&o.ReadOnlyPort, "read-only-port", o.ReadOnlyPort, "Read-only port of the node API, no authentication (0 disables).")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile,
		"x509 certificate of the node API on --port (intermediates after it). Without it and --tls-private-key-file, a self-signed kubelet.crt/kubelet.key in --cert-dir is made once and reused.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "Private key of --tls-cert-file.")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir,
		"Directory of the self-signed serving certificate (ignored with --tls-cert-file). Default <root-dir>/pki, which is upstream's /var/lib/kubelet/pki with the default --root-dir.")
	fs.BoolVar(&o.ServerTLSBootstrap, "rotate-server-certificates", o.ServerTLSBootstrap,
		"Serve --port with a certificate the cluster signs (a kubernetes.io/kubelet-serving CSR, approved by an admin or an approver), renewed before it expires "+
			"(KubeletConfiguration serverTLSBootstrap).")
	fs.BoolVar(&o.AnonymousAuth, "anonymous-auth", o.AnonymousAuth,
		"Requests to --port that no other method authenticates pass as system:anonymous (group system:unauthenticated); false: they get 401.")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile,
		"CA bundle that verifies client certificates on --port: user = the certificate's CN, groups = its O.")
	fs.BoolVar(&o.AuthenticationTokenWebhook, "authentication-token-webhook", o.AuthenticationTokenWebhook,
		"Authenticate bearer tokens on --port with the TokenReview API (needs --kubeconfig).")
	fs.DurationVar(&o.AuthenticationTokenWebhookTTL, "authentication-token-webhook-cache-ttl", o.AuthenticationTokenWebhookTTL,
		"How long token reviews are cached.")
	fs.StringVar(&o.AuthorizationMode, "authorization-mode", o.AuthorizationMode,
		"Authorization of requests to --port: AlwaysAllow, or Webhook (SubjectAccessReview on nodes/<subresource>, needs --kubeconfig).")
	fs.DurationVar(&o.AuthorizationWebhookAuthorized, "authorization-webhook-cache-authorized-ttl", o.AuthorizationWebhookAuthorized,
		"How long an allowed answer of the authorization webhook is cached.")
	fs.DurationVar(&o.AuthorizationWebhookUnauthorized, "authorization-webhook-cache-unauthorized-ttl", o.AuthorizationWebhookUnauthorized,
		"How long a denied answer of the authorization webhook is cached.")
	fs.BoolVar(&o.InsecureAnonymousRemoteWrites, "insecure-anonymous-remote-writes", o.InsecureAnonymousRemoteWrites,
		"DANGEROUS. With --anonymous-auth and --authorization-mode=AlwaysAllow, let requests without credentials from any address, "+
			"not only loopback, push and delete pods, exec, attach, port-forward and use /debug/ on --port: anyone who reaches it can run a privileged pod. "+
			"Off by default (reads stay open to anonymous requests from anywhere, as upstream).")
}

// addPodFlags registers the flags of where pods come from, how many run and start at
// once, container restarts, sysctls.
func (o *options) addPodFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PodManifestPath, "pod-manifest-path", o.PodManifestPath, "Directory of static pod manifests (YAML or JSON, one or many pods per file).")
	fs.StringVar(&o.ManifestURL, "manifest-url", o.ManifestURL, "URL of pod manifests to run.")
	fs.DurationVar(&o.FileCheckFrequency, "file-check-frequency", o.FileCheckFrequency, "How often to check the manifest directory.")
	fs.DurationVar(&o.HTTPCheckFrequency, "http-check-frequency", o.HTTPCheckFrequency, "How often to fetch the manifest URL.")
	fs.Int32Var(&o.MaxPods, "max-pods", o.MaxPods, "Number of pods that can run on this node.")
	fs.Int32Var(&o.MaxParallelPodStarts, "max-parallel-pod-starts", o.MaxParallelPodStarts,
		"Pods starting at once (sandbox and first container); the others queue in arrival order. 0 (default): no bound, as upstream (see docs/BENCHMARKS.md for measurements).")
	fs.DurationVar(&o.SyncFrequency, "sync-frequency", o.SyncFrequency, "Max period between re-inspections of each running pod.")
	fs.DurationVar(&o.BackoffInitial, "crashloop-backoff-initial", o.BackoffInitial, "First delay before restarting a crashed container (doubles up to --crashloop-backoff-max).")
	fs.DurationVar(&o.BackoffMax, "crashloop-backoff-max", o.BackoffMax, "Cap of the container restart back-off.")
	fs.StringSliceVar(&o.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", o.AllowedUnsafeSysctls,
		"Comma-separated unsafe sysctls or sysctl patterns (ending in *) pods may set besides the safe ones; a pod asking for any other is rejected (SysctlForbidden). Use at your own risk.")
}

// addDNSFlags registers the flags of the pods' resolver configuration.
func (o *options) addDNSFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.ClusterDNS, "cluster-dns", o.ClusterDNS,
		"Comma-separated IP addresses of the cluster's DNS servers, the nameservers of pods with dnsPolicy ClusterFirst (all must serve the same records).")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain,
		"The cluster's domain: with it, pods search <namespace>.svc.<domain>, svc.<domain> and <domain> besides the host's search paths.")
	fs.StringVar(&o.ResolvConf, "resolv-conf", o.ResolvConf,
		"The host's resolver configuration, the base of the pods' DNS configuration (dnsPolicy Default, and the search paths of ClusterFirst). Empty: none.")
}

// addImageFlags registers the flags of image pull back-off and image garbage collection.
func (o *options) addImageFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ImageGCHighThreshold, "image-gc-high-threshold", o.ImageGCHighThreshold,
		"Percent of the image filesystem's capacity used at which image garbage collection runs (0-100; 100 turns it off).")
	fs.Int32Var(&o.ImageGCLowThreshold, "image-gc-low-threshold", o.ImageGCLowThreshold,
		"Percent of the image filesystem's capacity image garbage collection frees down to (below the high threshold).")
	fs.DurationVar(&o.ImageMinimumGCAge, "image-minimum-gc-age", o.ImageMinimumGCAge, "Minimum age of an unused image before it may be garbage collected.")
	fs.DurationVar(&o.ImageMaximumGCAge, "image-maximum-gc-age", o.ImageMaximumGCAge, "An image unused this long is garbage collected whatever the disk usage (0: off).")
	fs.DurationVar(&o.ImagePullBackoffInitial, "image-pull-backoff-initial", o.ImagePullBackoffInitial, "First delay after a failed image pull (doubles up to --image-pull-backoff-max).")
	fs.DurationVar(&o.ImagePullBackoffMax, "image-pull-backoff-max", o.ImagePullBackoffMax, "Cap of the image pull back-off.")
}

// addResourceFlags registers the flags of reservations and eviction thresholds.
func (o *options) addResourceFlags(fs *pflag.FlagSet) {
	fs.StringToStringVar(&o.KubeReserved, "kube-reserved", o.KubeReserved, "Resources reserved for Kubernetes components, e.g. cpu=100m,memory=256Mi (subtracted from allocatable).")
	fs.StringToStringVar(&o.SystemReserved, "system-reserved", o.SystemReserved, "Resources reserved for the system, e.g. cpu=100m,memory=256Mi (subtracted from allocatable).")
	fs.Var(&o.EvictionHard, "eviction-hard", "Hard eviction thresholds, signal<value,... (default memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%; empty: none).")
	fs.Var(&o.EvictionSoft, "eviction-soft", "Soft eviction thresholds, signal<value,... (each needs --eviction-soft-grace-period).")
	fs.StringToStringVar(&o.EvictionSoftGracePeriod, "eviction-soft-grace-period", o.EvictionSoftGracePeriod, "Grace periods of the soft thresholds, signal=duration,...")
	fs.StringToStringVar(&o.EvictionMinimumReclaim, "eviction-minimum-reclaim", o.EvictionMinimumReclaim, "What an eviction reclaims beyond the threshold, signal=quantity,...")
	fs.DurationVar(&o.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", o.EvictionPressureTransitionPeriod,
		"How long a pressure condition stays true after its last threshold cleared.")
	fs.Int32Var(&o.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", o.EvictionMaxPodGracePeriod,
		"Grace period (seconds) cap of pods evicted for a soft threshold (0: kill at once, as upstream's default; negative: the pod's own).")
}

// addDeviceFlags registers the flags of the built-in GPUs.
func (o *options) addDeviceFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.GPUs, "gpus", o.GPUs, "Built-in GPUs (nvidia.com/gpu): auto (NVML when the NVIDIA driver is there), nvml, none, "+
		"or simulated ones on go-nvml's mock servers, mock:MACHINE[?count=N&xid-every=D] with MACHINE "+
		"dgxa100, dgxh100, dgxh200 or dgxb200.")
	fs.StringVar(&o.GPUDeviceRoot, "gpu-device-root", o.GPUDeviceRoot, "Host directory of the GPUs' device nodes (nvidia0, nvidiactl, ...) given to containers.")
	fs.DurationVar(&o.DeviceMetricsPeriod, "device-metrics-period", o.DeviceMetricsPeriod, "How often the GPUs' utilization, memory, temperature and power are sampled (DCGM_FI_* gauges).")
	o.addGPUDRAFlags(fs)
}

// addHealthFlags registers the flags of the /healthz endpoint.
func (o *options) addHealthFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.HealthzPort, "healthz-port", o.HealthzPort, "Port of the healthz endpoint (0 disables).")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "IP address of the healthz endpoint.")
	fs.DurationVar(&o.HealthzProbeTimeout, "healthz-probe-timeout", o.HealthzProbeTimeout,
		"/healthz fails when a singleton actor (node, status, pleg, ...) does not answer a probe within this.")
}

// addLoggingFlags registers the flags of logs, the /debug/ handlers, profiling.
func (o *options) addLoggingFlags(fs *pflag.FlagSet) {
	fs.IntVarP(&o.Verbosity, "v", "v", o.Verbosity, "Log verbosity (0 info, 4 and up debug).")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "Log format: text or json.")
	fs.BoolVar(&o.EnableDebuggingHandlers, "enable-debugging-handlers", o.EnableDebuggingHandlers,
		"Serve /debug/actors (the live supervision tree, HTML and ?format=json) and /debug/pprof/ on --port.")
	fs.BoolVar(&o.ContentionProfiling, "contention-profiling", o.ContentionProfiling,
		"Sample lock contention and blocking for /debug/pprof/mutex and /debug/pprof/block, if the debugging handlers are enabled (costs some CPU on a busy node).")
}

// addSupervisionFlags registers the flags of restarts of failing actors.
func (o *options) addSupervisionFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ActorMaxRestarts, "actor-max-restarts", o.ActorMaxRestarts,
		"Restarts an actor may have within --actor-restart-window; one more failure stops a pod or probe actor (spawned again after --actor-respawn-backoff-initial) "+
			"and escalates any other to its parent; when the root fails too often actorlet exits with status 1.")
	fs.DurationVar(&o.ActorRestartWindow, "actor-restart-window", o.ActorRestartWindow, "Sliding window in which --actor-max-restarts is counted.")
	fs.DurationVar(&o.ActorRespawnBackoffInitial, "actor-respawn-backoff-initial", o.ActorRespawnBackoffInitial,
		"First delay before a pod or probe actor stopped for failing too often is spawned again (doubles up to --actor-respawn-backoff-max); its containers keep running meanwhile.")
	fs.DurationVar(&o.ActorRespawnBackoffMax, "actor-respawn-backoff-max", o.ActorRespawnBackoffMax, "Cap of the actor respawn back-off.")
}

// addChaosFlags registers the flags of panics injected into live actors.
func (o *options) addChaosFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&o.ChaosKillRate, "chaos-kill-rate", o.ChaosKillRate, "Chaos: panics injected per second into random live actors (0 disables).")
	fs.Int64Var(&o.ChaosSeed, "chaos-seed", o.ChaosSeed, "Chaos: random seed (0 = time-based).")
	fs.StringVar(&o.ChaosKinds, "chaos-kinds", o.ChaosKinds, "Chaos: actor kinds to crash, comma separated (pod,probe,pleg,image,status,node,source).")
	fs.DurationVar(&o.ChaosDuration, "chaos-duration", o.ChaosDuration, "Chaos: stop injecting after this long (0 = until actorlet stops).")
}

// validate checks the flags together; every problem is reported at once.
func (o *options) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"file-check-frequency", o.FileCheckFrequency}, {"http-check-frequency", o.HTTPCheckFrequency},
		{"sync-frequency", o.SyncFrequency}, {"runtime-request-timeout", o.RuntimeRequestTimeout},
		{"pleg-relist-period", o.PLEGRelistPeriod}, {"pleg-relist-threshold", o.PLEGThreshold},
		{"healthz-probe-timeout", o.HealthzProbeTimeout},
		{"crashloop-backoff-initial", o.BackoffInitial}, {"crashloop-backoff-max", o.BackoffMax},
		{"image-pull-backoff-initial", o.ImagePullBackoffInitial}, {"image-pull-backoff-max", o.ImagePullBackoffMax},
		{"actor-restart-window", o.ActorRestartWindow},
		{"actor-respawn-backoff-initial", o.ActorRespawnBackoffInitial}, {"actor-respawn-backoff-max", o.ActorRespawnBackoffMax},
	} {
		if d.v <= 0 {
			bad("--%s must be positive, got %s", d.name, d.v)
		}
	}
	if _, err := o.thresholds(); err != nil {
		bad("%v", err)
	}
	if o.EvictionPressureTransitionPeriod < 0 {
		bad("--eviction-pressure-transition-period must not be negative, got %s", o.EvictionPressureTransitionPeriod)
	}
	if err := imageConfig(o).Validate(); err != nil {
		bad("%v", err)
	}
	if err := validGPUs(o.GPUs); err != nil {
		bad("%v", err)
	}
	if err := o.validateGPUDRA(); err != nil {
		bad("%v", err)
	}
	if o.DeviceMetricsPeriod <= 0 {
		bad("--device-metrics-period must be positive, got %s", o.DeviceMetricsPeriod)
	}
	if o.ActorMaxRestarts < 1 {
		bad("--actor-max-restarts must be at least 1, got %d", o.ActorMaxRestarts)
	}
	if o.ActorRespawnBackoffMax < o.ActorRespawnBackoffInitial {
		bad("--actor-respawn-backoff-max (%s) is below --actor-respawn-backoff-initial (%s)", o.ActorRespawnBackoffMax, o.ActorRespawnBackoffInitial)
	}
	if o.BackoffMax < o.BackoffInitial {
		bad("--crashloop-backoff-max (%s) is below --crashloop-backoff-initial (%s)", o.BackoffMax, o.BackoffInitial)
	}
	for _, p := range []struct {
		name string
		v    int32
	}{{"port", o.Port}, {"read-only-port", o.ReadOnlyPort}, {"healthz-port", o.HealthzPort}} {
		if p.v < 0 || p.v > 65535 {
			bad("--%s must be 0-65535, got %d", p.name, p.v)
		}
	}
	if o.MaxParallelPodStarts < 0 {
		bad("--max-parallel-pod-starts must not be negative, got %d", o.MaxParallelPodStarts)
	}
	if o.MaxPods < 0 {
		bad("--max-pods must not be negative, got %d", o.MaxPods)
	}
	if net.ParseIP(o.Address) == nil {
		bad("--address %q is not an IP address", o.Address)
	}
	if net.ParseIP(o.HealthzBindAddress) == nil {
		bad("--healthz-bind-address %q is not an IP address", o.HealthzBindAddress)
	}
	if o.NodeIP != "" && net.ParseIP(o.NodeIP) == nil {
		bad("--node-ip %q is not an IP address", o.NodeIP)
	}
	if _, _, err := parseEndpoint(o.ContainerRuntimeEndpoint); err != nil {
		bad("--container-runtime-endpoint: %v", err)
	}
	if o.ManifestURL != "" {
		u, err := url.Parse(o.ManifestURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("--manifest-url %q is not an http(s) URL", o.ManifestURL)
		}
	}
	if o.PodManifestPath != "" {
		if st, err := os.Stat(o.PodManifestPath); err == nil && !st.IsDir() {
			bad("--pod-manifest-path %q is not a directory", o.PodManifestPath)
		}
	}
	if o.ChaosDuration < 0 {
		bad("--chaos-duration must not be negative, got %s", o.ChaosDuration)
	}
	if o.ChaosKillRate < 0 {
		bad("--chaos-kill-rate must not be negative, got %g", o.ChaosKillRate)
	}
	if _, err := supervisors.ParseKinds(o.ChaosKinds); err != nil {
		bad("--chaos-kinds: %v", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"node-status-update-frequency", o.NodeStatusUpdateFrequency}, {"node-status-report-frequency", o.NodeStatusReportFrequency}} {
		if d.v <= 0 {
			bad("--%s must be positive, got %s", d.name, d.v)
		}
	}
	if o.NodeLeaseDurationSeconds < 4 {
		bad("--node-lease-duration-seconds must be at least 4, got %d", o.NodeLeaseDurationSeconds)
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		bad("--kube-api-qps and --kube-api-burst must be positive")
	}
	if o.EventQPS < 0 || o.EventBurst < 0 {
		bad("--event-qps and --event-burst must not be negative (--event-qps 0 is unlimited)")
	}
	for name, m := range map[string]map[string]string{"kube-reserved": o.KubeReserved, "system-reserved": o.SystemReserved} {
		if _, err := parseResources(m); err != nil {
			bad("--%s: %v", name, err)
		}
	}
	for k, v := range o.NodeLabels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			bad("--node-labels: key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			bad("--node-labels: value %q: %s", v, strings.Join(errs, "; "))
		}
	}
	errs = append(errs, o.validateAuth()...)
	errs = append(errs, o.validateNode()...)
	errs = append(errs, o.validateCgroups()...)
	if o.LogFormat != "text" && o.LogFormat != "json" {
		bad("--log-format must be text or json, got %q", o.LogFormat)
	}
	return o.nameFileFields(errors.Join(errs...))
}

// validateNode checks the flags of the node as a drop-in kubelet (issue
// 11): cluster DNS, taints, images, cgroup driver, certificates.
func (o *options) validateNode() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, ip := range o.ClusterDNS {
		if net.ParseIP(strings.TrimSpace(ip)) == nil {
			bad("--cluster-dns: %q is not an IP address", ip)
		}
	}
	if o.ClusterDomain != "" {
		if errs := validation.IsDNS1123Subdomain(strings.TrimSuffix(o.ClusterDomain, ".")); len(errs) > 0 {
			bad("--cluster-domain %q: %s", o.ClusterDomain, strings.Join(errs, "; "))
		}
	}
	if _, err := podspec.NewSysctlAllowlist(o.AllowedUnsafeSysctls); err != nil {
		bad("--allowed-unsafe-sysctls: %v", err)
	}
	if o.ResolvConf != "" {
		if st, err := os.Stat(o.ResolvConf); err == nil && st.IsDir() {
			bad("--resolv-conf %q is a directory", o.ResolvConf)
		}
	}
	if err := validTaints(o.RegisterWithTaints); err != nil {
		bad("--register-with-taints: %v", err)
	}
	if o.NodeStatusMaxImages < -1 {
		bad("--node-status-max-images must be -1 (no cap) or more, got %d", o.NodeStatusMaxImages)
	}
	switch o.CgroupDriver {
	case cgroupDriverCgroupfs, cgroupDriverSystemd:
	default:
		bad("--cgroup-driver must be cgroupfs or systemd, got %q", o.CgroupDriver)
	}
	if o.BootstrapKubeconfig != "" && o.Kubeconfig == "" {
		bad("--bootstrap-kubeconfig needs --kubeconfig (the path the node's own kubeconfig is written to)")
	}
	if o.ServerTLSBootstrap && o.Kubeconfig == "" {
		bad("--rotate-server-certificates needs --kubeconfig (the serving certificate is requested from the API server)")
	}
	return errs
}

// taintsFlag is --register-with-taints: key[=value]:Effect,... as
// upstream's; each use of the flag adds to the list.
type taintsFlag struct{ taints *[]v1.Taint }

func (f *taintsFlag) String() string {
	if f.taints == nil {
		return ""
	}
	parts := make([]string, 0, len(*f.taints))
	for _, t := range *f.taints {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}

func (f *taintsFlag) Set(v string) error {
	var out []v1.Taint
	for _, spec := range strings.Split(v, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		t, err := parseTaint(spec)
		if err != nil {
			return err
		}
		out = append(out, t)
	}
	all := append(append([]v1.Taint(nil), *f.taints...), out...)
	if err := validTaints(all); err != nil {
		return err
	}
	*f.taints = all
	return nil
}

func (f *taintsFlag) Type() string { return "key=value:Effect,..." }

// parseTaint parses key[=value]:Effect.
func parseTaint(spec string) (v1.Taint, error) {
	kv, effect, ok := strings.Cut(spec, ":")
	if !ok || effect == "" {
		return v1.Taint{}, fmt.Errorf("%q: want key[=value]:Effect, e.g. dedicated=gpu:NoSchedule", spec)
	}
	key, value, _ := strings.Cut(kv, "=")
	t := v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)}
	if err := validTaints([]v1.Taint{t}); err != nil {
		return v1.Taint{}, err
	}
	return t, nil
}

// validTaints checks each taint's key, value and effect, and that no key
// and effect come twice.
func validTaints(ts []v1.Taint) error {
	var errs []error
	seen := map[string]bool{}
	for _, t := range ts {
		if es := validation.IsQualifiedName(t.Key); len(es) > 0 {
			errs = append(errs, fmt.Errorf("taint key %q: %s", t.Key, strings.Join(es, "; ")))
		}
		if es := validation.IsValidLabelValue(t.Value); len(es) > 0 {
			errs = append(errs, fmt.Errorf("taint %q: value %q: %s", t.Key, t.Value, strings.Join(es, "; ")))
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			errs = append(errs, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect))
		}
		k := t.Key + ":" + string(t.Effect)
		if seen[k] {
			errs = append(errs, fmt.Errorf("taint %q with effect %s given twice", t.Key, t.Effect))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}

// Authorization modes of --authorization-mode.
const (
	authzAlwaysAllow = "AlwaysAllow"
	authzWebhook     = "Webhook"
)

// validateAuth checks the node API's TLS, authentication and authorization
// flags.
func (o *options) validateAuth() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		bad("--tls-cert-file and --tls-private-key-file go together (got only one)")
	}
	for _, f := range []struct{ name, path string }{
		{"tls-cert-file", o.TLSCertFile}, {"tls-private-key-file", o.TLSPrivateKeyFile}, {"client-ca-file", o.ClientCAFile},
	} {
		if f.path == "" {
			continue
		}
		if st, err := os.Stat(f.path); err != nil {
			bad("--%s: %v", f.name, err)
		} else if st.IsDir() {
			bad("--%s %q is a directory", f.name, f.path)
		}
	}
	switch o.AuthorizationMode {
	case authzAlwaysAllow:
	case authzWebhook:
		if o.Kubeconfig == "" {
			bad("--authorization-mode=Webhook needs --kubeconfig (SubjectAccessReviews go to the API server)")
		}
	default:
		bad("--authorization-mode must be AlwaysAllow or Webhook, got %q", o.AuthorizationMode)
	}
	if o.AuthenticationTokenWebhook && o.Kubeconfig == "" {
		bad("--authentication-token-webhook needs --kubeconfig (TokenReviews go to the API server)")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"authentication-token-webhook-cache-ttl", o.AuthenticationTokenWebhookTTL},
		{"authorization-webhook-cache-authorized-ttl", o.AuthorizationWebhookAuthorized},
		{"authorization-webhook-cache-unauthorized-ttl", o.AuthorizationWebhookUnauthorized},
	} {
		if d.v < 0 {
			bad("--%s must not be negative, got %s", d.name, d.v)
		}
	}
	return errs
}

// certDir is --cert-dir, else <root-dir>/pki.
func (o *options) certDir() string {
	if o.CertDir != "" {
		return o.CertDir
	}
	return filepath.Join(o.RootDir, "pki")
}

// parseResources turns resource=quantity pairs into a ResourceList.
func parseResources(m map[string]string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for k, v := range m {
		switch v1.ResourceName(k) {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods, podspec.ResourcePIDs:
		default:
			return nil, fmt.Errorf("unknown resource %q (cpu, memory, ephemeral-storage, pods, pid)", k)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		out[v1.ResourceName(k)] = q
	}
	return out, nil
}

// parseEndpoint splits a runtime endpoint into its kind ("unix" or "sim")
// and the rest (a socket path, or the sim options).
func parseEndpoint(ep string) (kind string, rest string, err error) {
	switch {
	case strings.HasPrefix(ep, "sim://"):
		return "sim", strings.TrimPrefix(ep, "sim://"), nil
	case strings.HasPrefix(ep, "unix://"):
		p := strings.TrimPrefix(ep, "unix://")
		if !strings.HasPrefix(p, "/") {
			return "", "", fmt.Errorf("%q: the socket path must be absolute (unix:///path)", ep)
		}
		return "unix", p, nil
	case strings.HasPrefix(ep, "/"):
		return "unix", ep, nil
	}
	return "", "", fmt.Errorf("%q: want unix:///path/to/socket or sim://", ep)
}

// nodeAPIExposure says who may do what on --port without credentials, as
// the flags set it: one log line at start, at Warn when anonymous requests
// may write and execute from other machines (--insecure-anonymous-remote-
// writes), naming what is open and to whom. Nothing when --port is off.
func (o *options) nodeAPIExposure() (level slog.Level, msg string, attrs []any, ok bool) {
	if o.Port == 0 {
		return 0, "", nil, false
	}
	listen := net.JoinHostPort(o.Address, strconv.Itoa(int(o.Port)))
	reach := "any machine that reaches " + listen
	if ip := net.ParseIP(o.Address); ip != nil && ip.IsLoopback() {
		reach = "this machine only (--address " + o.Address + ")"
	}
	switch {
	case !o.AnonymousAuth:
		return slog.LevelInfo, "node API: requests without credentials are refused (--anonymous-auth=false)",
			[]any{"address", listen}, true
	case o.AuthorizationMode == authzWebhook:
		return slog.LevelInfo, "node API: requests without credentials are authorized by the API server as system:anonymous (--authorization-mode=Webhook)",
			[]any{"address", listen}, true
	case o.InsecureAnonymousRemoteWrites:
		return slog.LevelWarn, "NODE API OPEN WITHOUT CREDENTIALS: anyone may push and delete pods (privileged, hostPath / included), exec, attach, port-forward and use /debug/",
			[]any{"open", "POST /pods, PUT and DELETE /pods/{namespace}/{name}, /exec/, /attach/, /portForward/, /run/, /debug/ as system:anonymous",
				"to", reach, "because", "--insecure-anonymous-remote-writes with --anonymous-auth=true and --authorization-mode=AlwaysAllow",
				"fix", "drop --insecure-anonymous-remote-writes, or set --anonymous-auth=false, or --authorization-mode=Webhook"}, true
	default:
		return slog.LevelInfo, "node API: requests without credentials may read from any address; push, exec, attach, port-forward and /debug/ only from loopback",
			[]any{"address", listen, "reads", reach, "writes", "this machine only (loopback peers)",
				"because", "--anonymous-auth=true and --authorization-mode=AlwaysAllow (upstream's flag defaults); --insecure-anonymous-remote-writes is off"}, true
	}
}
