package kuberuntime

import (
	"bytes"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Linux keeps the nodename in 64 bytes with the terminating NUL.
const (
	hostnameMaxLen = 63
	fqdnMaxLen     = 64
)

// PodHostnameAndDomain returns the pod's hostname and DNS domain (kubelet
// GeneratePodHostNameAndDomain): spec.hostnameOverride if set, else
// spec.hostname, else the pod name, cut to 63 characters without a trailing
// '-' or '.'; the domain is <subdomain>.<namespace>.svc.<clusterDomain> when
// spec.subdomain is set.
func PodHostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if errs := validation.IsDNS1123Subdomain(*o); len(errs) > 0 {
			return "", "", fmt.Errorf("spec.hostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(errs, "; "))
		}
		hostname, err = truncateHostname(pod.Name, *o)
		return hostname, "", err
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		if errs := validation.IsDNS1123Label(pod.Spec.Hostname); len(errs) > 0 {
			return "", "", fmt.Errorf("spec.hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(errs, "; "))
		}
		hostname = pod.Spec.Hostname
	}
	if hostname, err = truncateHostname(pod.Name, hostname); err != nil {
		return "", "", err
	}
	if pod.Spec.Subdomain != "" {
		if errs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(errs) > 0 {
			return "", "", fmt.Errorf("spec.subdomain %q is not a valid DNS label: %s", pod.Spec.Subdomain, strings.Join(errs, "; "))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}

func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= hostnameMaxLen {
		return hostname, nil
	}
	cut := strings.TrimRight(hostname[:hostnameMaxLen], "-.")
	if cut == "" {
		return "", fmt.Errorf("pod %q: hostname %q is invalid once cut to %d characters", podName, hostname, hostnameMaxLen)
	}
	return cut, nil
}

// kernelHostname is the nodename the sandbox gets: the FQDN when
// spec.setHostnameAsFQDN asks for it and there is a domain, else the short
// hostname (kubelet GetNodenameForKernel).
func kernelHostname(pod *v1.Pod, hostname, domain string) (string, error) {
	if domain == "" || pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > fqdnMaxLen {
		return "", fmt.Errorf("spec.setHostnameAsFQDN: FQDN %q is %d characters, at most %d fit the kernel's nodename", fqdn, len(fqdn), fqdnMaxLen)
	}
	return fqdn, nil
}

// HostsFile returns the content of the /etc/hosts file the kubelet manages for
// a pod (kubelet ensureHostsFile): for a host-network pod the node's own hosts
// file (nodeHosts) under a header, otherwise localhost entries and one line
// per pod IP naming the pod; in both cases spec.hostAliases follow.
func HostsFile(pod *v1.Pod, podIPs []string, clusterDomain string, nodeHosts []byte) ([]byte, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.Write(nodeHosts)
	} else {
		hostname, domain, err := PodHostnameAndDomain(pod, clusterDomain)
		if err != nil {
			return nil, err
		}
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range podIPs {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes(), nil
}
