// Package envvars computes the service environment variables the kubelet
// gives every container (pkg/kubelet/envvars and getServiceEnvVarMap): for
// each Service a pod may see, the variables of Docker links
// (<NAME>_PORT_443_TCP_ADDR...) and Kubernetes' own (<NAME>_SERVICE_HOST,
// <NAME>_SERVICE_PORT...). In-cluster clients find the API server through
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
//
// It is pure: the caller lists the services (Namespaces tells which) and
// passes them in.
package envvars

import (
	"cmp"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MasterServiceName is the Service of the API server, in the default
// namespace: every pod gets its variables, whatever enableServiceLinks says.
const MasterServiceName = "kubernetes"

// EnableServiceLinks reports the pod's enableServiceLinks, true when unset
// as the API server defaults it.
func EnableServiceLinks(pod *v1.Pod) bool {
	return pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
}

// Namespaces are the namespaces whose services ForPod may pick for pod:
// default (for the master service) and, with service links, the pod's own.
func Namespaces(pod *v1.Pod) []string {
	if EnableServiceLinks(pod) && pod.Namespace != metav1.NamespaceDefault {
		return []string{metav1.NamespaceDefault, pod.Namespace}
	}
	return []string{metav1.NamespaceDefault}
}

// ForPod picks among services (of any namespaces) those whose variables
// pod's containers get, as the kubelet's getServiceEnvVarMap does: the
// master service of the default namespace always, and with service links
// every service of the pod's namespace, which wins over the master service
// when it has the same name. Services without a cluster IP (headless,
// ExternalName) have no variables and are left out.
//
// The result is sorted by name so that the environment is the same at every
// start; the kubelet's order is a map's (random), and only matters when two
// services' variables collide.
func ForPod(pod *v1.Pod, services []*v1.Service) []*v1.Service {
	links := EnableServiceLinks(pod)
	picked := make(map[string]*v1.Service)
	for _, s := range services {
		if !isServiceIPSet(s) {
			continue
		}
		switch {
		case s.Namespace == metav1.NamespaceDefault && s.Name == MasterServiceName:
			if _, taken := picked[s.Name]; !taken {
				picked[s.Name] = s
			}
		case s.Namespace == pod.Namespace && links:
			picked[s.Name] = s
		}
	}
	out := make([]*v1.Service, 0, len(picked))
	for _, s := range picked {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *v1.Service) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// FromServices returns the variables of services, in their order and, for
// each, in the kubelet's: _SERVICE_HOST, _SERVICE_PORT (the first port),
// _SERVICE_PORT_<NAME> for each named port, then the Docker link variables.
// Services without a cluster IP are skipped.
func FromServices(services []*v1.Service) []v1.EnvVar {
	var out []v1.EnvVar
	for _, s := range services {
		// Validation gives every service with a cluster IP a port; one
		// without (a hand-made object) gets no variables rather than a
		// panic.
		if !isServiceIPSet(s) || len(s.Spec.Ports) == 0 {
			continue
		}
		prefix := variableName(s.Name)
		out = append(out, v1.EnvVar{Name: prefix + "_SERVICE_HOST", Value: s.Spec.ClusterIP})
		portVar := prefix + "_SERVICE_PORT"
		out = append(out, v1.EnvVar{Name: portVar, Value: strconv.Itoa(int(s.Spec.Ports[0].Port))})
		for _, p := range s.Spec.Ports {
			// Only the first port may be unnamed (validation).
			if p.Name != "" {
				out = append(out, v1.EnvVar{Name: portVar + "_" + variableName(p.Name), Value: strconv.Itoa(int(p.Port))})
			}
		}
		out = append(out, linkVariables(prefix, s)...)
	}
	return out
}

// linkVariables are the variables Docker links set, which Kubernetes kept
// for the programs written for them: <NAME>_PORT for the first port, and
// <NAME>_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR} for each.
func linkVariables(prefix string, s *v1.Service) []v1.EnvVar {
	out := make([]v1.EnvVar, 0, 1+4*len(s.Spec.Ports))
	for i, p := range s.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(v1.ProtocolTCP)
		}
		port := strconv.Itoa(int(p.Port))
		// JoinHostPort brackets an IPv6 cluster IP.
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(s.Spec.ClusterIP, port)
		if i == 0 {
			out = append(out, v1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		portPrefix := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		out = append(out,
			v1.EnvVar{Name: portPrefix, Value: url},
			v1.EnvVar{Name: portPrefix + "_PROTO", Value: strings.ToLower(proto)},
			v1.EnvVar{Name: portPrefix + "_PORT", Value: port},
			v1.EnvVar{Name: portPrefix + "_ADDR", Value: s.Spec.ClusterIP},
		)
	}
	return out
}

// variableName turns a service or port name (a DNS label) into the part of
// a variable name: upper case, '-' as '_'.
func variableName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// isServiceIPSet is the kubelet's v1helper.IsServiceIPSet: a cluster IP
// that is neither empty (ExternalName) nor None (headless).
func isServiceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone
}
