package status

import (
	"net"
	"slices"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/utils/net"

	"github.com/berth-dev/berth/internal/container"
)

// ReasonPodSandboxNotReady is the reason of a False PodReadyToStartContainers
// condition; the message says why a new sandbox is needed, as the kubelet's
// PodSandboxChanged does.
const ReasonPodSandboxNotReady = "PodSandboxNotReady"

// sortedRuntime returns a copy of the runtime status with sandboxes and
// containers newest first (the kubelet sorts by creation time; a stable sort
// keeps the runtime's order for equal times).
func sortedRuntime(rt *container.PodStatus) *container.PodStatus {
	out := &container.PodStatus{}
	if rt == nil {
		return out
	}
	*out = *rt
	out.Sandboxes = slices.Clone(rt.Sandboxes)
	out.Containers = slices.Clone(rt.Containers)
	slices.SortStableFunc(out.Sandboxes, func(a, b container.SandboxStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	slices.SortStableFunc(out.Containers, func(a, b container.ContainerStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out
}

// activeSandboxID is the newest sandbox when it is ready: the one whose
// containers and addresses count as the pod's current ones.
func activeSandboxID(rt *container.PodStatus) string {
	if len(rt.Sandboxes) == 0 || !rt.Sandboxes[0].Ready {
		return ""
	}
	return rt.Sandboxes[0].ID
}

// anyActiveRegularContainer is the kubelet's
// HasAnyActiveRegularContainerStarted: a regular container exists in the
// active sandbox, so the pod has been initialized before.
func (g *generator) anyActiveRegularContainer() bool {
	active := activeSandboxID(g.rt)
	if active == "" {
		return false
	}
	for _, c := range g.rt.Containers {
		if c.SandboxID == active && !c.Init && specContainer(g.pod.Spec.Containers, c.Name) != nil {
			return true
		}
	}
	return false
}

// setNetwork fills hostIP(s) and podIP(s). Pod IPs come from the newest
// sandbox only, and only while it is ready; hostNetwork pods have the
// node's address.
func (g *generator) setNetwork(s *v1.PodStatus) {
	if activeSandboxID(g.rt) != "" {
		for _, ip := range sortPodIPs(sandboxIPs(g.rt.Sandboxes[0]), g.in.HostIP) {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	}
	if g.in.HostIP != "" {
		s.HostIP = g.in.HostIP
		s.HostIPs = []v1.HostIP{{IP: g.in.HostIP}}
		if g.pod.Spec.HostNetwork && len(s.PodIPs) == 0 {
			s.PodIPs = []v1.PodIP{{IP: g.in.HostIP}}
		}
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
}

// sandboxIPs lists the primary address first, then any others the runtime
// reported; an unparsable address discards them all, as the kubelet does.
func sandboxIPs(sb container.SandboxStatus) []string {
	var ips []string
	for _, ip := range append([]string{sb.IP}, sb.IPs...) {
		if ip == "" || slices.Contains(ips, ip) {
			continue
		}
		if utilnet.ParseIPSloppy(ip) == nil {
			return nil
		}
		ips = append(ips, ip)
	}
	return ips
}

// sortPodIPs keeps at most one address per family: the node's family first
// (IPv4 when the node's is unknown), as the kubelet's sortPodIPs.
func sortPodIPs(ips []string, hostIP string) []string {
	primary, secondary := utilnet.IsIPv4, utilnet.IsIPv6
	if host := utilnet.ParseIPSloppy(hostIP); host != nil && utilnet.IsIPv6(host) {
		primary, secondary = secondary, primary
	}
	var out []string
	for _, want := range []func(net.IP) bool{primary, secondary} {
		for _, s := range ips {
			if ip := utilnet.ParseIPSloppy(s); want(ip) {
				out = append(out, ip.String())
				break
			}
		}
	}
	return out
}
