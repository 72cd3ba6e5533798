package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The cluster DNS every test cluster gets: the kube-dns Service at a fixed
// address of the service CIDR, as kubeadm's clusters have it (the tenth).
const (
	ClusterDNSIP  = "10.0.0.10"
	ClusterDomain = "cluster.local"
)

// CoreDNS is CoreDNS run as a host process, serving cluster.local from the
// API and forwarding the rest to the host's resolvers, behind the kube-dns
// Service.
type CoreDNS struct {
	proc *process
	c    *ControlPlane
	// Addr is where it serves DNS (UDP and TCP): the host's address, not
	// loopback, so that pods reach it through their gateway.
	Addr *net.UDPAddr
}

// StartCoreDNS starts CoreDNS, its files under c.Dir()/coredns, and the
// kube-dns Service in kube-system (selector-less, at ClusterDNSIP, port 53
// over UDP and TCP, one EndpointSlice naming Addr), and returns once
// CoreDNS has synced with the API (its ready endpoint answers 200). Pods
// reach it through the Service only where kube-proxy runs. ctx bounds the
// start only.
func (c *ControlPlane) StartCoreDNS(ctx context.Context, bin string) (*CoreDNS, error) {
	d := &CoreDNS{c: c}
	if err := d.start(ctx, bin); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

func (d *CoreDNS) start(ctx context.Context, bin string) error {
	c := d.c
	dir := filepath.Join(c.dir, "coredns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	// The read-only access of kubeadm's system:coredns role.
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}
	if err := grant(ctx, cs, "system:coredns", rules); err != nil {
		return err
	}
	kubeconfig, err := c.ClientKubeconfig("coredns", "system:coredns")
	if err != nil {
		return err
	}
	ip, err := HostAddress()
	if err != nil {
		return err
	}
	port, err := freeHostPort(ip)
	if err != nil {
		return err
	}
	ready, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	d.Addr = &net.UDPAddr{IP: ip, Port: port}
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(corefileFor(d.Addr, kubeconfig, ready, health)), 0o644); err != nil {
		return err
	}
	if d.proc, err = startProcess("coredns", filepath.Join(c.dir, "logs", "coredns.log"), bin, "-conf", corefile); err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	err = waitProcess(ctx, time.Minute, d.proc, "coredns", func(ctx context.Context) error {
		_, err := get(ctx, client, fmt.Sprintf("http://127.0.0.1:%d/ready", ready), "")
		return err
	})
	if err != nil {
		return err
	}
	return createHostService(ctx, cs, "kube-system", "kube-dns", ClusterDNSIP,
		map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}, ip, []servicePort{
			{"dns", v1.ProtocolUDP, 53, int32(port)},
			{"dns-tcp", v1.ProtocolTCP, 53, int32(port)},
		})
}

// corefileFor is a Corefile like kubeadm's: cluster.local and the reverse
// zones from the API (pods insecure, as kubeadm has it), everything else
// forwarded to the host's resolvers. Its health and ready endpoints are on
// loopback ports of their own: the plugins' defaults (:8080, :8181) would
// collide with anything else on the machine.
func corefileFor(addr *net.UDPAddr, kubeconfig string, ready, health int) string {
	return fmt.Sprintf(`.:%d {
    bind %s
    errors
    health 127.0.0.1:%d
    ready 127.0.0.1:%d
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s berth-test
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    forward . /etc/resolv.conf
    cache 30
    loadbalance
}
`, addr.Port, addr.IP, health, ready, ClusterDomain, kubeconfig)
}

// Stop stops CoreDNS and removes the kube-dns Service and its
// EndpointSlice. Safe to call twice.
func (d *CoreDNS) Stop() error {
	if d.proc == nil {
		return nil
	}
	var errs []error
	errs = append(errs, d.proc.stop(stopGrace))
	if cs, err := d.c.Client(); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		deleteHostService(ctx, cs, "kube-system", "kube-dns")
	}
	return errors.Join(errs...)
}

// Log is the path of CoreDNS's log.
func (d *CoreDNS) Log() string { return d.proc.Log }
