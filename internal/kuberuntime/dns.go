package kuberuntime

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
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
)

// HostDNSConfig reads the node's resolver configuration from a resolv.conf
// file, for pods that use the node's DNS. An empty path means the node has no
// resolver configuration, and yields nil.
func HostDNSConfig(resolvConfPath string) (*runtimeapi.DNSConfig, error) {
	if resolvConfPath == "" {
		return nil, nil
	}
	data, err := os.ReadFile(resolvConfPath)
	if err != nil {
		return nil, fmt.Errorf("reading the node's resolver configuration: %w", err)
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
// option replacing an earlier one of the same name.
func parseResolvConf(data []byte) (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		fields := strings.Fields(line)
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return nil, fmt.Errorf("line %d: nameserver without an address", n)
			}
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search", "domain":
			// "domain" is the obsolete single-domain form of "search";
			// whichever comes last wins, as in the C resolver.
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
	if err := sc.Err(); err != nil {
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

// podDNSConfig is the resolver configuration of the pod's sandbox (kubelet
// GetPodDNS):
//   - dnsPolicy None: only spec.dnsConfig;
//   - ClusterFirst (or ClusterFirstWithHostNet on the host network) with
//     cluster DNS servers configured: those servers, the cluster search path
//     and ndots:5;
//   - Default, ClusterFirst on the host network, or ClusterFirst without
//     cluster DNS (a standalone node): the node's own configuration; with no
//     node configuration at all, the local resolver (127.0.0.1).
//
// spec.dnsConfig is then merged in for every policy, and the result cut to
// the resolver's limits.
func podDNSConfig(pod *v1.Pod, host *runtimeapi.DNSConfig, clusterDNS []string, clusterDomain string) (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	cluster := false
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
	case v1.DNSClusterFirstWithHostNet:
		cluster = true
	case v1.DNSClusterFirst, "":
		cluster = !pod.Spec.HostNetwork
	case v1.DNSDefault:
	default:
		return nil, fmt.Errorf("spec.dnsPolicy: unsupported value %q", pod.Spec.DNSPolicy)
	}
	if pod.Spec.DNSPolicy != v1.DNSNone {
		switch {
		case cluster && len(clusterDNS) > 0:
			cfg.Servers = append(cfg.Servers, clusterDNS...)
			cfg.Searches = clusterSearches(pod.Namespace, clusterDomain, host)
			cfg.Options = []string{"ndots:5"}
		case host != nil:
			cfg.Servers = append(cfg.Servers, host.Servers...)
			cfg.Searches = append(cfg.Searches, host.Searches...)
			cfg.Options = append(cfg.Options, host.Options...)
		default:
			cfg.Servers = []string{"127.0.0.1"}
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
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
	}
	cfg.Searches = fitSearches(cfg.Searches)
	return cfg, nil
}

// clusterSearches puts the cluster's domains before the node's.
func clusterSearches(namespace, clusterDomain string, host *runtimeapi.DNSConfig) []string {
	var s []string
	if clusterDomain != "" {
		s = []string{namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
	}
	if host != nil {
		s = append(s, host.Searches...)
	}
	return omitDuplicates(s)
}

// fitSearches drops search domains beyond the count limit, any single domain
// too long for the resolver, and then trailing domains until the search line
// fits its length limit.
func fitSearches(searches []string) []string {
	if len(searches) > maxDNSSearchPaths {
		searches = searches[:maxDNSSearchPaths]
	}
	kept := searches[:0:0]
	for _, s := range searches {
		if len(s) <= maxDNSSearchPathLen {
			kept = append(kept, s)
		}
	}
	for len(kept) > 0 && len(strings.Join(kept, " ")) > maxDNSSearchListChars {
		kept = kept[:len(kept)-1]
	}
	return kept
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
