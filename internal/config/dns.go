package config

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	netutils "k8s.io/utils/net"
)

// DNS is the resolver configuration berth gives pods, as the kubelet's
// clusterDNS, clusterDomain and resolvConf.
type DNS struct {
	// ClusterDNS are the cluster DNS service's addresses, the only
	// nameservers of ClusterFirst pods (clusterDNS, --cluster-dns); none on
	// a standalone node, where those pods fall back to Default.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain, searched by ClusterFirst
	// pods and used in pods' FQDNs (clusterDomain, --cluster-domain).
	ClusterDomain string
	// ResolvConf is the node's resolver configuration file, the base of
	// pods' (resolvConf, --resolv-conf); empty means the node has none and
	// pods of the Default policy get the local resolver.
	ResolvConf string
}

// DefaultResolvConf is the kubelet's default resolvConf.
const DefaultResolvConf = "/etc/resolv.conf"

const (
	flagClusterDNS    = "cluster-dns"
	flagClusterDomain = "cluster-domain"
	flagResolvConf    = "resolv-conf"

	nameClusterDNS    = "clusterDNS (--" + flagClusterDNS + ")"
	nameClusterDomain = "clusterDomain (--" + flagClusterDomain + ")"
	nameResolvConf    = "resolvConf (--" + flagResolvConf + ")"
)

func defaultDNS() DNS { return DNS{ResolvConf: DefaultResolvConf} }

func addDNSFlags(fs *pflag.FlagSet) {
	fs.StringSlice(flagClusterDNS, nil, "comma-separated IP addresses of the cluster DNS service, the nameservers of pods with dnsPolicy ClusterFirst")
	fs.String(flagClusterDomain, "", "the cluster's DNS domain (e.g. cluster.local), searched by ClusterFirst pods and used in pods' FQDNs")
	fs.String(flagResolvConf, DefaultResolvConf, `the node's resolver configuration, the base of pods' resolv.conf; "" for none (Default pods then use the local resolver)`)
}

// applyDNSFile copies what the file sets; resolvConf: "" counts, as it
// does for the kubelet, and means no host resolver configuration.
func applyDNSFile(d *DNS, kc *kubeletconfigv1beta1.KubeletConfiguration, set map[string]bool) {
	if set["clusterDNS"] {
		d.ClusterDNS = kc.ClusterDNS
	}
	if kc.ClusterDomain != "" {
		d.ClusterDomain = kc.ClusterDomain
	}
	if kc.ResolverConfig != nil {
		d.ResolvConf = *kc.ResolverConfig
	}
}

func applyDNSFlags(d *DNS, fs *pflag.FlagSet) []error {
	return []error{
		override(fs, flagClusterDNS, fs.GetStringSlice, &d.ClusterDNS),
		override(fs, flagClusterDomain, fs.GetString, &d.ClusterDomain),
		override(fs, flagResolvConf, fs.GetString, &d.ResolvConf),
	}
}

func writeBackDNS(kc *kubeletconfigv1beta1.KubeletConfiguration, d DNS) {
	kc.ClusterDNS = d.ClusterDNS
	kc.ClusterDomain = d.ClusterDomain
	resolvConf := d.ResolvConf
	kc.ResolverConfig = &resolvConf
}

// validate checks the addresses and the domain. The kubelet only logs and
// skips a clusterDNS entry that is not an IP; berth refuses it, as a pod
// would otherwise silently get fewer nameservers than configured.
func (d DNS) validate() []error {
	var errs []error
	for i, s := range d.ClusterDNS {
		if netutils.ParseIPSloppy(strings.TrimSpace(s)) == nil {
			errs = append(errs, fieldError(nameClusterDNS, "[%d] %q is not an IP address", i, s))
		}
	}
	if d.ClusterDomain != "" {
		if msgs := validation.IsDNS1123Subdomain(d.ClusterDomain); len(msgs) > 0 {
			errs = append(errs, fieldError(nameClusterDomain, "%q is not a valid DNS domain (RFC 1123): %s",
				d.ClusterDomain, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// ClusterDNSAddresses are the cluster DNS addresses in their canonical
// form, as the kubelet writes them (net.IP.String of each).
func (d DNS) ClusterDNSAddresses() []string {
	var out []string
	for _, s := range d.ClusterDNS {
		if ip := netutils.ParseIPSloppy(strings.TrimSpace(s)); ip != nil {
			out = append(out, ip.String())
		}
	}
	return out
}

// checkResolvConf refuses a resolvConf berth cannot read: every pod's
// sandbox would fail on it.
func (d DNS) checkResolvConf(h host) error {
	if d.ResolvConf == "" {
		return nil
	}
	if err := h.readable(d.ResolvConf); err != nil {
		return fieldError(nameResolvConf, "%v", err)
	}
	return nil
}

// readableFile opens and reads a byte of path, so that a directory or a
// file without read permission is found now.
func readableFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 1)); err != nil && err != io.EOF {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}
