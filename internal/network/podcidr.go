package network

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// NodePodCIDR is the range berth's bridge takes from the Node: the first
// IPv4 CIDR of spec.podCIDRs (spec.podCIDR when the list is empty), ""
// when it has none. The kubelet hands all of them to the runtime; berth's
// bridge is IPv4 only, so an IPv6 range of a dual-stack Node is left out.
func NodePodCIDR(spec v1.NodeSpec) string {
	cidrs := spec.PodCIDRs
	if len(cidrs) == 0 && spec.PodCIDR != "" {
		cidrs = []string{spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			return p.Masked().String()
		}
	}
	return ""
}
