package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ClientKubeconfig writes a kubeconfig for user cn (a client certificate
// of the cluster's client CA, in groups orgs) as dir/kubeconfig/<name>.kubeconfig
// and returns its path: the identity of a host-process addon.
func (c *ControlPlane) ClientKubeconfig(name, cn string, orgs ...string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", fmt.Errorf("client kubeconfig: invalid name %q", name)
	}
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	kp, err := c.clientCA.issue(filepath.Join(c.dir, "pki"), name, certSpec{commonName: cn, orgs: orgs})
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.dir, "kubeconfig", name+".kubeconfig")
	return path, c.writeKubeconfig(path, kp)
}

// waitProcess polls check until it succeeds; it fails at once if p exits,
// and after timeout (or with ctx) with check's last error and p's log.
func waitProcess(ctx context.Context, timeout time.Duration, p *process, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("waiting for %s: %w", what, p.exitError())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready within %v (last: %v): %w\n%s", what, timeout, err, ctx.Err(), p.logTail(40))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// HostAddress is the IPv4 address of the interface of the host's default
// route: where a host-process addon listens so that pods (through their
// bridge's gateway) and EndpointSlices (which refuse loopback) can name it.
func HostAddress() (net.IP, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dev, err := defaultRouteDevice(bufio.NewScanner(f))
	if err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.To4(), nil
		}
	}
	return nil, fmt.Errorf("host address: %s, the default route's interface, has no IPv4 address", dev)
}

// defaultRouteDevice returns the interface of the default route in
// /proc/net/route's table (Iface Destination Gateway ...; destination
// 00000000 is the default).
func defaultRouteDevice(sc *bufio.Scanner) (string, error) {
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[1] == "00000000" {
			return f[0], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("host address: /proc/net/route has no default route")
}

// freeHostPort is a port free on ip for TCP and for UDP at once (DNS
// needs both).
func freeHostPort(ip net.IP) (int, error) {
	for try := 0; try < 20; try++ {
		l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: ip})
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: ip, Port: port})
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free for both TCP and UDP on %s", ip)
}

// endpointSliceManager marks the EndpointSlices the harness writes, so
// that the endpointslice controllers leave them alone.
const endpointSliceManager = "berth-test-harness"

// servicePort is a port of a selector-less Service and where its one
// endpoint serves it.
type servicePort struct {
	name     string
	protocol v1.Protocol
	port     int32 // the Service's
	target   int32 // the endpoint's
}

// createHostService creates (or replaces) a selector-less Service
// namespace/name at clusterIP ("" for any) with one EndpointSlice naming
// addr, the host process that serves it.
func createHostService(ctx context.Context, cs kubernetes.Interface, namespace, name, clusterIP string, labels map[string]string, addr net.IP, ports []servicePort) error {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec:       v1.ServiceSpec{ClusterIP: clusterIP},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-host", Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: name,
			discoveryv1.LabelManagedBy:   endpointSliceManager,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{addr.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: p.name, Protocol: p.protocol, Port: p.port})
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.name), Protocol: ptr.To(p.protocol), Port: ptr.To(p.target)})
	}
	deleteHostService(ctx, cs, namespace, name)
	if _, err := cs.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Service %s/%s: %w", namespace, name, err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create EndpointSlice %s/%s: %w", namespace, slice.Name, err)
	}
	return nil
}

// deleteHostService removes what createHostService made, if it is there.
func deleteHostService(ctx context.Context, cs kubernetes.Interface, namespace, name string) {
	_ = cs.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	_ = cs.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name+"-host", metav1.DeleteOptions{})
}

// grant binds user to a ClusterRole of its own with rules, and to the
// existing ClusterRoles named in also.
func grant(ctx context.Context, cs kubernetes.Interface, user string, rules []rbacv1.PolicyRule, also ...string) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterRole %s: %w", user, err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for _, r := range append([]string{user}, also...) {
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + ":" + r},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects:   subject,
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	return nil
}
