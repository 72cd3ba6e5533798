package kuberuntime

import (
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
)

// SandboxOptions are the node facts a pod's sandbox config depends on.
type SandboxOptions struct {
	// PodLogsDir is the root of container logs, e.g. /var/log/pods.
	PodLogsDir string
	// Attempt counts the sandboxes created for this pod before this one.
	Attempt uint32
	// CgroupParent is the cgroup the pod's containers go under; empty lets the
	// runtime choose.
	CgroupParent string
	// ClusterDNS and ClusterDomain are the cluster's DNS service addresses and
	// domain (clusterDNS, clusterDomain); without ClusterDNS, ClusterFirst
	// pods use the node's resolver, with a MissingClusterDNS warning.
	ClusterDNS    []string
	ClusterDomain string
	// NodeIPs are the node's configured IPs (--node-ip): with no host
	// resolver configuration, pods of the node's DNS get the local
	// resolver of each one's family.
	NodeIPs []string
	// UserNamespace is the pod's user namespace (userns.Manager), nil for
	// the node's; a pod with hostUsers: false must have one.
	UserNamespace *runtimeapi.UserNamespace
}

// SandboxConfig builds the CRI sandbox config of a pod, as the kubelet's
// generatePodSandboxConfig does. hostDNS is the node's resolver configuration
// (HostDNSConfig), nil if the node has none; it is not modified. The
// warnings are the events the kubelet records while it forms the pod's
// resolver configuration.
func SandboxConfig(pod *v1.Pod, opts SandboxOptions, hostDNS *runtimeapi.DNSConfig) (*runtimeapi.PodSandboxConfig, []DNSWarning, error) {
	if pod.UID == "" || pod.Name == "" {
		return nil, nil, fmt.Errorf("pod %s/%s: metadata.name and metadata.uid are required", pod.Namespace, pod.Name)
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   opts.Attempt,
		},
		LogDirectory: PodLogsDirectory(opts.PodLogsDir, pod),
		Labels:       sandboxLabels(pod),
		Annotations:  maps.Clone(pod.Annotations),
		PortMappings: portMappings(pod),
	}
	if cfg.Annotations == nil {
		cfg.Annotations = map[string]string{}
	}
	var warnings []DNSWarning
	cfg.DnsConfig, warnings = podDNSConfig(pod, hostDNS, opts)
	// A host-network sandbox shares the node's UTS namespace too, and
	// containerd refuses to set a hostname there: it must stay empty.
	if !pod.Spec.HostNetwork {
		hostname, domain, err := PodHostnameAndDomain(pod, opts.ClusterDomain)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if cfg.Hostname, err = kernelHostname(pod, hostname, domain); err != nil {
			return nil, nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	var err error
	if cfg.Linux, err = sandboxLinuxConfig(pod, opts); err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return cfg, warnings, nil
}

// PodLogsDirectory is the pod's log directory,
// <podLogsDir>/<namespace>_<name>_<uid>, which the kubelet's log tools expect.
func PodLogsDirectory(podLogsDir string, pod *v1.Pod) string {
	return filepath.Join(podLogsDir, strings.Join([]string{pod.Namespace, pod.Name, string(pod.UID)}, "_"))
}

// sandboxLabels are the pod's labels plus the ones berth finds its sandboxes
// by; berth's own keys win over a pod label of the same name.
func sandboxLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+4)
	maps.Copy(labels, pod.Labels)
	labels[container.LabelPodName] = pod.Name
	labels[container.LabelPodNamespace] = pod.Namespace
	labels[container.LabelPodUID] = string(pod.UID)
	labels[container.LabelManagedBy] = "true"
	return labels
}

// portMappings lists every port of every regular container (kubelet
// MakePortMappings); the runtime publishes those with a hostPort and ignores
// the rest. A port declared twice in one container (by name, or by protocol,
// address and numbers when unnamed) is listed once.
func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for i := range pod.Spec.Containers {
		seen := map[string]bool{}
		for _, p := range pod.Spec.Containers[i].Ports {
			key := p.Name
			if key == "" {
				family := "any"
				if p.HostIP != "" {
					family = "v4"
					if ip := net.ParseIP(p.HostIP); ip != nil && ip.To4() == nil {
						family = "v6"
					}
				}
				key = fmt.Sprintf("%s-%s-%s:%d:%d", family, p.Protocol, p.HostIP, p.ContainerPort, p.HostPort)
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, &runtimeapi.PortMapping{
				Protocol:      runtimeProtocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return out
}

func runtimeProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// sandboxLinuxConfig is the kubelet's generatePodSandboxLinuxConfig.
func sandboxLinuxConfig(pod *v1.Pod, opts SandboxOptions) (*runtimeapi.LinuxPodSandboxConfig, error) {
	ns, err := namespaceOptions(pod, opts.UserNamespace)
	if err != nil {
		return nil, err
	}
	lc := &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent: opts.CgroupParent,
		Sysctls:      map[string]string{},
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: ns,
			Privileged:       hasPrivilegedContainer(pod),
			// The sandbox always runs RuntimeDefault, so that a pod may give its
			// containers a tighter profile than the pause process needs.
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return lc, nil
	}
	// The runtime takes dotted names; a name in the slash form
	// ("net/ipv4/conf/eth0.100/rp_filter") is turned into it as the kubelet
	// does (ConvertPodSysctlsVariableToDotsSeparator, with NormalizeName).
	for _, s := range psc.Sysctls {
		lc.Sysctls[utilsysctl.NormalizeName(s.Name)] = s.Value
	}
	if psc.RunAsUser != nil {
		lc.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		lc.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	lc.SecurityContext.SelinuxOptions = seLinuxOption(psc.SELinuxOptions)
	groups, policy, err := supplementalGroups(psc)
	if err != nil {
		return nil, err
	}
	lc.SecurityContext.SupplementalGroups = groups
	lc.SecurityContext.SupplementalGroupsPolicy = policy
	return lc, nil
}
