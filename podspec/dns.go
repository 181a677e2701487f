package podspec

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits of a pod's resolv.conf, as upstream's API validation and DNS
// configurer (ExpandedDNSConfig, GA): 3 nameservers, 32 search paths of at
// most 253 characters each, 2048 characters on the search line.
const (
	MaxDNSNameservers     = 3
	MaxDNSSearchPaths     = 32
	MaxDNSSearchListChars = 2048
	maxDNSSearchPathChars = 253 // a DNS-1123 subdomain
	maxHostnameChars      = 63  // the kernel's 64 bytes with the NUL
)

// Event reasons of the DNS configuration, upstream's.
const (
	ReasonMissingClusterDNS = "MissingClusterDNS"
	ReasonDNSConfigForming  = "DNSConfigForming"
)

// DNS is the node's name resolution for pods: the kubelet's clusterDNS,
// clusterDomain and resolvConf.
type DNS struct {
	ClusterDNS    []string // --cluster-dns: the nameservers of ClusterFirst pods
	ClusterDomain string   // --cluster-domain: "" adds no cluster search paths
	// Host is the node's resolv.conf (--resolv-conf), parsed; nil when
	// --resolv-conf is "": pods on the node's DNS then get nameserver
	// 127.0.0.1 (::1 for an IPv6 node) and search ".", as upstream.
	Host *ResolvConf
	// NodeIPs choose 127.0.0.1 or ::1 when Host is nil.
	NodeIPs []string
}

// Validate reports a cluster DNS server that is not an IP address, naming
// the flag.
func (d DNS) Validate() error {
	for _, s := range d.ClusterDNS {
		if net.ParseIP(s) == nil {
			return fmt.Errorf("--cluster-dns: %q is not an IP address", s)
		}
	}
	return nil
}

// ResolvConf is what a resolv.conf says.
type ResolvConf struct {
	Nameservers []string // every nameserver line, in order
	Searches    []string // the last search line (trailing dots dropped)
	Options     []string // the last options line
}

// ParseResolvConf parses a resolv.conf as upstream: nameserver lines
// accumulate, the last search and options lines win, comments and other
// keywords are ignored; a nameserver line without an address is an error
// naming its line.
func ParseResolvConf(b []byte) (ResolvConf, error) {
	rc := ResolvConf{Nameservers: []string{}, Searches: []string{}, Options: []string{}}
	var errs []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) < 2 {
				errs = append(errs, fmt.Sprintf("line %d: nameserver without an address", i+1))
				continue
			}
			rc.Nameservers = append(rc.Nameservers, f[1])
		case "search":
			rc.Searches = []string{}
			for _, s := range f[1:] {
				rc.Searches = append(rc.Searches, strings.TrimSuffix(s, "."))
			}
		case "options":
			rc.Options = append([]string{}, f[1:]...)
		}
	}
	if len(errs) > 0 {
		return rc, fmt.Errorf("resolv.conf: %s", strings.Join(errs, "; "))
	}
	return rc, nil
}

// CheckResolvConf returns upstream's warnings (CheckLimitsForResolvConf)
// about a node resolv.conf whose search line cannot fit in a pod's: more
// paths than the limit leaves (3 fewer with a cluster domain), a path too
// long, or a line too long. path names the file in the messages.
func CheckResolvConf(rc ResolvConf, path, clusterDomain string) []string {
	limit := MaxDNSSearchPaths
	if clusterDomain != "" {
		limit -= 3
	}
	if len(rc.Searches) > limit {
		return []string{fmt.Sprintf("Resolv.conf file '%s' contains search line consisting of more than %d domains!", path, limit)}
	}
	for _, s := range rc.Searches {
		if len(s) > maxDNSSearchPathChars {
			return []string{fmt.Sprintf("Resolv.conf file %q contains a search path which length is more than allowed %d chars!", path, maxDNSSearchPathChars)}
		}
	}
	if len(strings.Join(rc.Searches, " ")) > MaxDNSSearchListChars {
		return []string{fmt.Sprintf("Resolv.conf file '%s' contains search line which length is more than allowed %d chars!", path, MaxDNSSearchListChars)}
	}
	return nil
}

// DNSEvent is an event the DNS configuration of a pod asks for (a Warning
// on the pod, upstream's reason and message).
type DNSEvent struct {
	Reason  string
	Message string
}

// PodDNS is the pod's resolver configuration for the CRI (the sandbox's
// resolv.conf), as upstream's GetPodDNS:
//   - ClusterFirst (and ClusterFirstWithHostNet): the cluster DNS servers
//     only, search <ns>.svc.<domain> svc.<domain> <domain> then the node's
//     search paths, options ndots:5. A host-network pod with ClusterFirst
//     gets Default. Without cluster DNS servers it falls back to Default
//     with the event MissingClusterDNS.
//   - Default: the node's resolv.conf.
//   - None: nothing but the pod's dnsConfig.
//
// The pod's dnsConfig is then merged in (nameservers and searches appended
// without duplicates, options by name, the pod's winning), and the result
// cut to the limits (3 nameservers, 32 search paths, 2048 characters) with
// the event DNSConfigForming.
func PodDNS(pod *v1.Pod, d DNS) (*runtimeapi.DNSConfig, []DNSEvent) {
	var events []DNSEvent
	cfg := &runtimeapi.DNSConfig{}
	if d.Host != nil {
		cfg.Servers = append([]string{}, d.Host.Nameservers...)
		cfg.Searches = append([]string{}, d.Host.Searches...)
		cfg.Options = append([]string{}, d.Host.Options...)
	}
	switch dnsType(pod) {
	case v1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case v1.DNSClusterFirst:
		if len(d.ClusterDNS) > 0 {
			cfg.Servers = append([]string{}, d.ClusterDNS...)
			cfg.Searches = clusterSearches(cfg.Searches, pod.Namespace, d.ClusterDomain)
			cfg.Options = []string{"ndots:5"}
			break
		}
		events = append(events, DNSEvent{Reason: ReasonMissingClusterDNS, Message: fmt.Sprintf(
			"pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID), v1.DNSClusterFirst, v1.DNSDefault)})
		hostDNS(cfg, d)
	default:
		hostDNS(cfg, d)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > MaxDNSNameservers {
		cfg.Servers = cfg.Servers[:MaxDNSNameservers]
		events = append(events, DNSEvent{Reason: ReasonDNSConfigForming, Message: fmt.Sprintf(
			"Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s", strings.Join(cfg.Servers, " "))})
	}
	var cut bool
	if cfg.Searches, cut = fitSearches(cfg.Searches); cut {
		events = append(events, DNSEvent{Reason: ReasonDNSConfigForming, Message: fmt.Sprintf(
			"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: %s", strings.Join(cfg.Searches, " "))})
	}
	return cfg, events
}

// dnsType is the policy that applies: ClusterFirst (also for
// ClusterFirstWithHostNet, and for an unset policy, the API's default),
// Default (also ClusterFirst on the host network) or None.
func dnsType(pod *v1.Pod) v1.DNSPolicy {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return v1.DNSNone
	case v1.DNSClusterFirstWithHostNet:
		return v1.DNSClusterFirst
	case v1.DNSDefault:
		return v1.DNSDefault
	}
	if pod.Spec.HostNetwork {
		return v1.DNSDefault
	}
	return v1.DNSClusterFirst
}

// hostDNS makes cfg the node's DNS: as read from its resolv.conf, or, with
// no resolv.conf, the local nameserver and no search, as upstream.
func hostDNS(cfg *runtimeapi.DNSConfig, d DNS) {
	if d.Host != nil {
		return
	}
	for _, ip := range d.NodeIPs {
		if p := net.ParseIP(ip); p != nil && p.To4() == nil {
			cfg.Servers = append(cfg.Servers, "::1")
		} else {
			cfg.Servers = append(cfg.Servers, "127.0.0.1")
		}
	}
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{"127.0.0.1"}
	}
	cfg.Searches = []string{"."}
}

func clusterSearches(host []string, namespace, domain string) []string {
	if domain == "" {
		return host
	}
	s := []string{namespace + ".svc." + domain, "svc." + domain, domain}
	return omitDuplicates(append(s, host...))
}

func omitDuplicates(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeDNSOptions merges the pod's options into the base ones by name (the
// pod's value wins); the order is the base's, then the pod's new names.
func mergeDNSOptions(base []string, pod []v1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, o := range base {
		name, value, _ := strings.Cut(o, ":")
		set(name, value)
	}
	for _, o := range pod {
		value := ""
		if o.Value != nil {
			value = *o.Value
		}
		set(o.Name, value)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if v := values[n]; v != "" {
			out = append(out, n+":"+v)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// fitSearches cuts the search paths to the limits as upstream: the first
// 32, without any path over 253 characters, then the last ones until the
// line is at most 2048 characters. It reports whether anything was cut.
func fitSearches(s []string) ([]string, bool) {
	cut := false
	if len(s) > MaxDNSSearchPaths {
		s, cut = s[:MaxDNSSearchPaths], true
	}
	kept := s[:0:0]
	for _, p := range s {
		if len(p) > maxDNSSearchPathChars {
			cut = true
			continue
		}
		kept = append(kept, p)
	}
	for len(kept) > 0 && len(strings.Join(kept, " ")) > MaxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true
	}
	return kept, cut
}

// PodHostname is the pod's hostname and, with a subdomain, its domain
// (<subdomain>.<ns>.svc.<clusterDomain>), as upstream's
// GeneratePodHostNameAndDomain: spec.hostnameOverride (HostnameOverride,
// on by default since v1.35) with no domain; else spec.hostname or the
// pod's name. Cut to 63 characters without a trailing '-' or '.'.
// CheckHostname tells whether they are valid.
func PodHostname(pod *v1.Pod, clusterDomain string) (hostname, domain string) {
	if o := pod.Spec.HostnameOverride; o != nil {
		return truncateHostname(*o), ""
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if pod.Spec.Subdomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return truncateHostname(hostname), domain
}

// truncateHostname cuts a hostname to the kernel's 63 characters, without
// a trailing '-' or '.', as upstream's truncatePodHostnameIfNeeded.
func truncateHostname(h string) string {
	if len(h) <= maxHostnameChars {
		return h
	}
	return strings.TrimRight(h[:maxHostnameChars], "-.")
}

// CheckHostname refuses what upstream refuses when it makes the sandbox's
// hostname (a pod from a node-local source is not validated by an API
// server): a hostnameOverride that is not a DNS subdomain, a hostname or
// subdomain that is not a DNS label, a name that leaves nothing once cut,
// and with setHostnameAsFQDN an FQDN over 64 characters.
func CheckHostname(pod *v1.Pod, clusterDomain string) error {
	if pod.Spec.HostNetwork {
		return nil // the node's hostname
	}
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
	} else {
		if h := pod.Spec.Hostname; h != "" {
			if msgs := validation.IsDNS1123Label(h); len(msgs) != 0 {
				return fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", h, strings.Join(msgs, ";"))
			}
		}
		if sub := pod.Spec.Subdomain; sub != "" {
			if msgs := validation.IsDNS1123Label(sub); len(msgs) != 0 {
				return fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", sub, strings.Join(msgs, ";"))
			}
		}
	}
	host, domain := PodHostname(pod, clusterDomain)
	if host == "" {
		asked := pod.Name
		if o := pod.Spec.HostnameOverride; o != nil {
			asked = *o
		} else if pod.Spec.Hostname != "" {
			asked = pod.Spec.Hostname
		}
		return fmt.Errorf("hostname for pod %q was invalid: %q", pod.Name, asked)
	}
	if setFQDN(pod) && domain != "" {
		if fqdn := host + "." + domain; len(fqdn) > maxHostnameChars+1 {
			return fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, maxHostnameChars+1, len(fqdn))
		}
	}
	return nil
}

func setFQDN(pod *v1.Pod) bool {
	return pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN
}

// sandboxHostname is the hostname the sandbox is given: PodHostname's, or
// with setHostnameAsFQDN its FQDN when it fits the kernel's 64 bytes
// (CheckHostname refuses a longer one).
func sandboxHostname(pod *v1.Pod, clusterDomain string) string {
	host, domain := PodHostname(pod, clusterDomain)
	if setFQDN(pod) && domain != "" {
		if fqdn := host + "." + domain; len(fqdn) <= maxHostnameChars+1 {
			return fqdn
		}
	}
	return host
}

const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// HostsFile is the content of the pod's managed /etc/hosts, as upstream
// writes it. Off the host network: localhost entries, then podIP with the
// hostname (and its FQDN under clusterDomain where the pod has a
// subdomain); on the host network: the node's hosts file (nodeHosts). Both
// end with the pod's hostAliases.
func HostsFile(pod *v1.Pod, podIP, clusterDomain string, nodeHosts []byte) []byte {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.WriteString(managedHostsHeaderHostNetwork)
		b.Write(nodeHosts)
	} else {
		b.WriteString(managedHostsHeader)
		b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		host, domain := PodHostname(pod, clusterDomain)
		switch {
		case podIP == "":
		case domain != "":
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", podIP, host, domain, host)
		default:
			fmt.Fprintf(&b, "%s\t%s\n", podIP, host)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, ha := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}

// MountsEtcHosts reports whether the container gets the managed /etc/hosts:
// not when it mounts something of its own there, as upstream.
func MountsEtcHosts(c *v1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/hosts" {
			return false
		}
	}
	return true
}

// ValidateHostnameOverride is the API server's check of
// spec.hostnameOverride (HostnameOverride, GA in v1.37), which a pod from a
// node-local source does not get there: it may not be set with
// setHostnameAsFQDN or hostNetwork, is at most 64 characters and a DNS
// subdomain. Messages as the API server's field errors.
func ValidateHostnameOverride(spec *v1.PodSpec) error {
	o := spec.HostnameOverride
	if o == nil {
		return nil
	}
	const path = "spec.hostnameOverride"
	var errs []string
	if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
		errs = append(errs, path+": Forbidden: may not be specified when setHostnameAsFQDN is true")
	}
	if spec.HostNetwork {
		errs = append(errs, path+": Forbidden: may not be specified when hostNetwork is true")
	}
	if len(*o) > 64 {
		errs = append(errs, path+": Too long: may not be more than 64 bytes")
	}
	for _, msg := range validation.IsDNS1123Subdomain(*o) {
		errs = append(errs, fmt.Sprintf("%s: Invalid value: %q: %s", path, *o, msg))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}
