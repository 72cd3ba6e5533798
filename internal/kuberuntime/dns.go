package kuberuntime

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits of the resolver, as Kubernetes validates and the kubelet enforces
// them (pkg/apis/core/validation).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchPathLen   = 253 // glibc aborts on longer search domains
	// maxResolvConfSize is the most the kubelet reads of a resolv.conf.
	maxResolvConfSize = 10 << 20
)

// The reasons of the warnings the kubelet records while it forms a pod's
// resolver configuration.
const (
	ReasonMissingClusterDNS = "MissingClusterDNS"
	ReasonDNSConfigForming  = "DNSConfigForming"
)

// DNSWarning is a Warning event to record about the forming of a pod's
// resolver configuration: about the pod, or, with OnNode, about the node.
type DNSWarning struct {
	OnNode  bool
	Reason  string
	Message string
}

// HostDNSConfig reads the node's resolver configuration from a resolv.conf
// file (the kubelet's --resolv-conf), for pods that use the node's DNS. An
// empty path means the node has no resolver configuration, and yields nil.
func HostDNSConfig(resolvConfPath string) (*runtimeapi.DNSConfig, error) {
	if resolvConfPath == "" {
		return nil, nil
	}
	f, err := os.Open(resolvConfPath)
	if err != nil {
		return nil, fmt.Errorf("reading the node's resolver configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxResolvConfSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading the node's resolver configuration: %w", err)
	}
	if len(data) > maxResolvConfSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", resolvConfPath, maxResolvConfSize)
	}
	cfg, err := parseResolvConf(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", resolvConfPath, err)
	}
	return cfg, nil
}

// parseResolvConf reads resolv.conf(5) the way the kubelet does: nameserver
// lines accumulate, the last search line wins (domains without their trailing
// dot, the root domain "." dropped), and options accumulate with a later
// option replacing an earlier one of the same name. Like the kubelet, it
// ignores "domain" lines. The kubelet keeps options in a map, so their order
// is random there; berth keeps the order they first appear in.
func parseResolvConf(data []byte) (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	var errs []error
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				errs = append(errs, fmt.Errorf("line %d: nameserver without an address", n+1))
				continue
			}
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search":
			cfg.Searches = nil
			for _, d := range fields[1:] {
				if d != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(d, "."))
				}
			}
		case "options":
			cfg.Options = mergeOptions(cfg.Options, fields[1:])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// mergeOptions adds resolver options ("ndots:5", "rotate") to a list; an
// option whose name is already there replaces it in place.
func mergeOptions(options, add []string) []string {
	for _, opt := range add {
		name, _, _ := strings.Cut(opt, ":")
		replaced := false
		for i, old := range options {
			if oldName, _, _ := strings.Cut(old, ":"); oldName == name {
				options[i], replaced = opt, true
				break
			}
		}
		if !replaced {
			options = append(options, opt)
		}
	}
	return options
}

type podDNSType int

const (
	podDNSCluster podDNSType = iota
	podDNSHost
	podDNSNone
)

// dnsType is the kubelet's getPodDNSType: ClusterFirst on the host network
// is Default; a policy the API server would have refused counts as
// ClusterFirst, as the kubelet falls back to it.
func dnsType(pod *v1.Pod) podDNSType {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return podDNSNone
	case v1.DNSClusterFirst:
		if pod.Spec.HostNetwork {
			return podDNSHost
		}
	case v1.DNSDefault:
		return podDNSHost
	}
	return podDNSCluster
}

// podDNSConfig is the resolver configuration of the pod's sandbox, as the
// kubelet's GetPodDNS forms it, with the warnings it records:
//   - None: only spec.dnsConfig;
//   - ClusterFirst (ClusterFirstWithHostNet on the host network): the
//     cluster DNS servers, the cluster's search domains before the node's,
//     and ndots:5; without cluster DNS servers, a MissingClusterDNS warning
//     and Default;
//   - Default (and ClusterFirst on the host network): the node's
//     configuration, host; a node without one (host nil, --resolv-conf "")
//     gets the local resolver of each node IP's family and the root domain.
//
// spec.dnsConfig is then merged in, and the result cut to the resolver's
// limits with a DNSConfigForming warning. host is not modified.
func podDNSConfig(pod *v1.Pod, host *runtimeapi.DNSConfig, opts SandboxOptions) (*runtimeapi.DNSConfig, []DNSWarning) {
	cfg := &runtimeapi.DNSConfig{}
	if host != nil {
		cfg.Servers, cfg.Searches, cfg.Options = slices.Clone(host.Servers), slices.Clone(host.Searches), slices.Clone(host.Options)
	}
	var warnings []DNSWarning
	typ := dnsType(pod)
	if typ == podDNSCluster && len(opts.ClusterDNS) == 0 {
		warnings = missingClusterDNS(pod)
		typ = podDNSHost
	}
	switch typ {
	case podDNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case podDNSCluster:
		// The cluster DNS servers forward what they cannot answer: they are
		// the pod's only servers.
		cfg.Servers = slices.Clone(opts.ClusterDNS)
		cfg.Searches = clusterSearches(pod.Namespace, opts.ClusterDomain, cfg.Searches)
		cfg.Options = []string{"ndots:5"}
	case podDNSHost:
		if host == nil {
			cfg.Servers = localResolvers(opts.NodeIPs)
			cfg.Searches = []string{"."}
		}
	}
	if d := pod.Spec.DNSConfig; d != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, d.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, d.Searches...))
		for _, o := range d.Options {
			opt := o.Name
			if o.Value != nil && *o.Value != "" {
				opt += ":" + *o.Value
			}
			cfg.Options = mergeOptions(cfg.Options, []string{opt})
		}
	}
	var w *DNSWarning
	if cfg.Servers, w = fitNameservers(cfg.Servers); w != nil {
		warnings = append(warnings, *w)
	}
	if cfg.Searches, w = fitSearches(cfg.Searches); w != nil {
		warnings = append(warnings, *w)
	}
	return cfg, warnings
}

// missingClusterDNS are the kubelet's two warnings, word for word, for a
// ClusterFirst pod on a node without cluster DNS servers.
func missingClusterDNS(pod *v1.Pod) []DNSWarning {
	msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
		v1.DNSClusterFirst, v1.DNSDefault)
	podDesc := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	return []DNSWarning{
		{OnNode: true, Reason: ReasonMissingClusterDNS, Message: msg},
		{Reason: ReasonMissingClusterDNS, Message: fmt.Sprintf("pod: %q. %s", podDesc, msg)},
	}
}

// localResolvers is the local resolver of each node IP's family, or of
// IPv4 when no node IP is configured.
func localResolvers(nodeIPs []string) []string {
	var out []string
	for _, s := range nodeIPs {
		if ip := net.ParseIP(s); ip != nil && ip.To4() == nil {
			out = append(out, "::1")
		} else {
			out = append(out, "127.0.0.1")
		}
	}
	if len(out) == 0 {
		out = []string{"127.0.0.1"}
	}
	return out
}

// clusterSearches puts the cluster's domains before the node's; without a
// cluster domain there are only the node's.
func clusterSearches(namespace, clusterDomain string, hostSearches []string) []string {
	if clusterDomain == "" {
		return hostSearches
	}
	s := []string{namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
	return omitDuplicates(append(s, hostSearches...))
}

// fitNameservers keeps the first servers the resolver reads.
func fitNameservers(servers []string) ([]string, *DNSWarning) {
	if len(servers) <= maxDNSNameservers {
		return servers, nil
	}
	servers = servers[:maxDNSNameservers]
	return servers, &DNSWarning{Reason: ReasonDNSConfigForming, Message: "Nameserver limits were exceeded, " +
		"some nameservers have been omitted, the applied nameserver line is: " + strings.Join(servers, " ")}
}

// fitSearches drops search domains beyond the count limit, any single domain
// too long for the resolver, and then trailing domains until the search line
// fits its length limit.
func fitSearches(searches []string) ([]string, *DNSWarning) {
	cut := false
	if len(searches) > maxDNSSearchPaths {
		searches, cut = searches[:maxDNSSearchPaths], true
	}
	kept := searches[:0:0]
	for _, s := range searches {
		if len(s) <= maxDNSSearchPathLen {
			kept = append(kept, s)
		} else {
			cut = true
		}
	}
	for len(kept) > 0 && len(strings.Join(kept, " ")) > maxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true
	}
	if !cut {
		return kept, nil
	}
	return kept, &DNSWarning{Reason: ReasonDNSConfigForming, Message: "Search Line limits were exceeded, " +
		"some search paths have been omitted, the applied search line is: " + strings.Join(kept, " ")}
}

func omitDuplicates(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
