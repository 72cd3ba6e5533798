package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// ServingOptions are what the serving certificate is requested with.
type ServingOptions struct {
	// CertDir holds the file store (kubelet-server-current.pem).
	CertDir  string
	NodeName string
	// Addresses are the Node's addresses, which the certificate names.
	Addresses func() []v1.NodeAddress
	// CertFile and KeyFile (tlsCertFile, tlsPrivateKeyFile) are served
	// until the first certificate is issued, when set, as the kubelet's
	// store falls back to them.
	CertFile, KeyFile string
	Client            kubernetes.Interface
	Log               *slog.Logger
}

// Serving is the secure API's certificate from kubernetes.io/kubelet-serving
// CSRs (serverTLSBootstrap).
type Serving struct {
	manager  certificate.Manager
	reporter *reporter
}

// NewServing makes the serving certificate manager (the kubelet's
// NewKubeletServerCertificateManager). Nothing is requested before Run.
func NewServing(o ServingOptions) (*Serving, error) {
	log := o.Log.With("certificate", "serving")
	r := &reporter{kind: "serving", log: log}
	store, err := certificate.NewFileStoreWithLogger(r.logger(log), "kubelet-server", o.CertDir, o.CertDir, o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store in %s: %w", o.CertDir, err)
	}
	ctx := klog.NewContext(context.Background(), r.logger(log))
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return o.Client, nil },
		GetTemplate:      func() *x509.CertificateRequest { return servingTemplate(o.NodeName, o.Addresses()) },
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: store,
		Name:             "serving",
		Ctx:              &ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	return &Serving{manager: m, reporter: r}, nil
}

// servingTemplate is the serving CSR for the node's addresses: host names
// as DNS names, IPs as IP addresses, each once, sorted; nil (nothing to
// request yet) without an IP, as the kubelet requires one by default.
func servingTemplate(nodeName string, addresses []v1.NodeAddress) *x509.CertificateRequest {
	var dns []string
	var ips []net.IP
	addIP := func(ip net.IP) {
		if !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	}
	for _, a := range addresses {
		if a.Address == "" {
			continue
		}
		ip := net.ParseIP(a.Address)
		switch a.Type {
		case v1.NodeHostName:
			if ip != nil {
				addIP(ip)
			} else if !slices.Contains(dns, a.Address) {
				dns = append(dns, a.Address)
			}
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if ip != nil {
				addIP(ip)
			}
		case v1.NodeInternalDNS, v1.NodeExternalDNS:
			if !slices.Contains(dns, a.Address) {
				dns = append(dns, a.Address)
			}
		}
	}
	if len(ips) == 0 {
		return nil
	}
	slices.Sort(dns)
	slices.SortFunc(ips, func(a, b net.IP) int { return slices.Compare([]byte(a.String()), []byte(b.String())) })
	return &x509.CertificateRequest{Subject: nodeSubject(nodeName), DNSNames: dns, IPAddresses: ips}
}

// errNoServingCertificate is the TLS handshake's error until the first
// serving certificate is issued: the kubelet serves nothing until then.
var errNoServingCertificate = errors.New("no serving certificate available for the node yet: its kubelet-serving CSR is not approved and issued")

// GetCertificate is the secure API's tls.Config.GetCertificate.
func (s *Serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.manager.Current(); c != nil {
		return c, nil
	}
	return nil, errNoServingCertificate
}

// SetRecorder makes failures to get a certificate node events as well as
// log lines.
func (s *Serving) SetRecorder(record func(eventType, reason, message string)) {
	s.reporter.record.Store(&record)
}

// Run requests and renews the serving certificate until ctx ends.
func (s *Serving) Run(ctx context.Context) {
	s.manager.Start()
	<-ctx.Done()
	s.manager.Stop()
}
