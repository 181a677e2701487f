package manifest

import (
	"crypto/md5" //nolint:gosec // a content hash for a stable UID, as upstream
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations the upstream kubelet puts on pods from its own sources.
const (
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigSeenAnnotation   = "kubernetes.io/config.seen"
	// ConfigMirrorAnnotation marks a mirror pod in the API server.
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
)

// DefaultTerminationGracePeriodSeconds is the API server's default.
const DefaultTerminationGracePeriodSeconds int64 = 30

// now is the clock of ApplyDefaults' config.seen annotation; tests replace it.
var now = time.Now

// ApplyDefaults prepares a pod from a node-local source (file, URL, push) the
// way the upstream kubelet does (pkg/kubelet/config/common.go applyDefaults)
// plus the API server's defaulting that such pods never get.
//
// If the pod has no UID, the UID is the hex MD5 of the pod as given (JSON, so
// map order is fixed), the node name and origin (the file path or URL): the
// same manifest at the same place on the same node always gets the same UID,
// and a copy of it in another file gets another. The name becomes
// name-<lower-cased nodeName>. source is the config.source annotation value
// ("file", "http", "push"). The config.seen annotation is set after hashing
// and so never changes the UID.
func ApplyDefaults(pod *v1.Pod, source, nodeName, origin string) {
	if pod.UID == "" {
		pod.UID = types.UID(hashPod(pod, nodeName, origin))
	}
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = v1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotation] = string(pod.UID)
	pod.Annotations[ConfigSourceAnnotation] = source
	pod.Annotations[ConfigSeenAnnotation] = now().UTC().Format(time.RFC3339Nano)
	// Static pods tolerate every NoExecute taint so that node problems do not
	// evict them (upstream does this for file pods; we do it for all node-local
	// pods, which have no controller to recreate them either).
	addToleration(&pod.Spec, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	if pod.Status.Phase == "" {
		pod.Status.Phase = v1.PodPending
	}
	defaultSpec(&pod.Spec)
	defaultPodLevelResources(pod) // after the containers' requests are defaulted
}

func hashPod(pod *v1.Pod, nodeName, origin string) string {
	data, err := json.Marshal(pod)
	if err != nil {
		// A decoded pod always marshals; fall back to its printed form.
		data = []byte(fmt.Sprintf("%#v", pod))
	}
	h := md5.New() //nolint:gosec // not for security
	h.Write(data)
	fmt.Fprintf(h, "host:%s", nodeName)
	fmt.Fprintf(h, "origin:%s", origin)
	return hex.EncodeToString(h.Sum(nil))
}

func addToleration(spec *v1.PodSpec, t v1.Toleration) {
	for i := range spec.Tolerations {
		have := spec.Tolerations[i]
		if have.Key == t.Key && have.Operator == t.Operator && have.Effect == t.Effect {
			spec.Tolerations[i] = t
			return
		}
	}
	spec.Tolerations = append(spec.Tolerations, t)
}

func defaultSpec(spec *v1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := DefaultTerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &g
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		t := true
		spec.EnableServiceLinks = &t
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	// Requests default to limits for each resource that has only a limit.
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		c.Resources.Requests[name] = limit.DeepCopy()
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = v1.URISchemeHTTP
		}
	}
	if g := p.GRPC; g != nil && g.Service == nil {
		s := ""
		g.Service = &s
	}
}

// DefaultPullPolicy is the API server's default for an image: Always when the
// tag is "latest" or there is neither tag nor digest, else IfNotPresent.
func DefaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	i := strings.LastIndex(name, ":")
	if i < 0 || name[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
