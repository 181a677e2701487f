package podspec

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// masterServices are the services of the default namespace every pod gets
// the variables of, whatever its enableServiceLinks, as upstream.
var masterServices = map[string]bool{"kubernetes": true}

// ServiceEnv is the environment the services give a container of a pod in
// namespace ns, as the upstream kubelet's getServiceEnvVarMap: the master
// services of the default namespace always, the services of ns when
// enableServiceLinks; only services with a cluster IP. The variables are
// the Docker-link ones of envvars.FromServices (FOO_SERVICE_HOST,
// FOO_SERVICE_PORT, FOO_SERVICE_PORT_<NAME>, FOO_PORT,
// FOO_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}).
func ServiceEnv(services []*v1.Service, ns string, enableServiceLinks bool) map[string]string {
	picked := map[string]*v1.Service{}
	for _, s := range services {
		if s == nil || !serviceIPSet(s) || len(s.Spec.Ports) == 0 {
			continue
		}
		switch {
		case s.Namespace == "default" && masterServices[s.Name]:
			if _, ok := picked[s.Name]; !ok {
				picked[s.Name] = s
			}
		case s.Namespace == ns && enableServiceLinks:
			picked[s.Name] = s
		}
	}
	names := make([]string, 0, len(picked))
	for name := range picked {
		names = append(names, name)
	}
	sort.Strings(names)
	env := map[string]string{}
	for _, name := range names {
		serviceVars(picked[name], env)
	}
	return env
}

// serviceIPSet: the service has a cluster IP (not headless).
func serviceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != v1.ClusterIPNone && s.Spec.ClusterIP != ""
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

func serviceVars(s *v1.Service, env map[string]string) {
	prefix := envName(s.Name)
	env[prefix+"_SERVICE_HOST"] = s.Spec.ClusterIP
	env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			env[prefix+"_SERVICE_PORT_"+envName(p.Name)] = strconv.Itoa(int(p.Port))
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(v1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		url := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(p.Port))))
		if i == 0 {
			env[prefix+"_PORT"] = url // Docker special-cases the first port
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		env[pp] = url
		env[pp+"_PROTO"] = strings.ToLower(proto)
		env[pp+"_PORT"] = strconv.Itoa(int(p.Port))
		env[pp+"_ADDR"] = s.Spec.ClusterIP
	}
}
