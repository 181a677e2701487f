package main

import (
	"log/slog"
	"os"

	"github.com/actorlet/actorlet/actors/pod"
	"github.com/actorlet/actorlet/podspec"
)

// podDNS is the pods' resolver configuration from --cluster-dns,
// --cluster-domain and --resolv-conf (read once at start, as upstream),
// and the node's /etc/hosts for host-network pods. A --resolv-conf that
// cannot be read or parsed is logged: pods then get upstream's fallback
// (nameserver 127.0.0.1, search ".").
func podDNS(o *options, hostIP string, log *slog.Logger) *pod.DNS {
	d := &pod.DNS{
		DNS:       podspec.DNS{ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain, NodeIPs: []string{hostIP}},
		HostsFile: "/etc/hosts",
	}
	if o.ResolvConf == "" {
		return d
	}
	b, err := os.ReadFile(o.ResolvConf)
	if err != nil {
		log.Warn("--resolv-conf unreadable: pods on the node's DNS get nameserver 127.0.0.1", "path", o.ResolvConf, "err", err)
		return d
	}
	rc, err := podspec.ParseResolvConf(b)
	if err != nil {
		log.Warn("--resolv-conf", "path", o.ResolvConf, "err", err)
	}
	d.Host = &rc
	return d
}

// cgroupDriver is the pods' cgroup driver: the runtime's where it tells
// (upstream's KubeletCgroupDriverFromCRI; a different --cgroup-driver is
// logged), else --cgroup-driver.
func cgroupDriver(o *options, rt *runtimeConn, log *slog.Logger) podspec.CgroupDriver {
	d, warning, err := podspec.RuntimeCgroupDriver(podspec.CgroupDriver(o.CgroupDriver), rt.linux)
	switch {
	case err != nil:
		log.Warn("the runtime's cgroup driver: --cgroup-driver is trusted", "err", err)
		return podspec.CgroupDriver(o.CgroupDriver)
	case warning != "":
		log.Warn(warning)
	}
	return d
}
