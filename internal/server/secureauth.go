package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/authn"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/pki"
)

// PKIDirName holds the self-signed serving certificate under the root dir,
// as the kubelet's --cert-dir holds its kubelet.crt.
const PKIDirName = "pki"

// SecureAuth is what the secure API needs before it can listen: its TLS
// configuration and who may call it. It is read at start-up, so a bad
// certificate or token file stops berth with an error naming the file.
type SecureAuth struct {
	TLS  *tls.Config
	Auth *authn.Gate
}

// LoadSecureAuth reads the secure API's certificate and credentials. client
// is the API server's clientset in cluster mode (for TokenReviews and
// SubjectAccessReviews), nil standalone. bootstrapped, when not nil, is
// where the serving certificate comes from (serverTLSBootstrap): it fails
// until one is issued, and the handshake with it, as the kubelet's does.
func LoadSecureAuth(cfg *config.Config, client kubernetes.Interface, bootstrapped GetCertificate,
	now time.Time, log *slog.Logger) (*SecureAuth, error) {
	s := cfg.Serving
	tlsConfig := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// exec and attach upgrade an HTTP/1.1 connection; HTTP/2 has no
		// such upgrade.
		NextProtos: []string{"http/1.1"},
	}
	if bootstrapped != nil {
		tlsConfig.GetCertificate = bootstrapped
	} else {
		cert, err := loadServing(cfg, now, log)
		if err != nil {
			return nil, err
		}
		tlsConfig.Certificates = []tls.Certificate{cert.Certificate}
	}
	var err error
	if s.ClientCAFile != "" {
		pool, err := certutil.NewPool(s.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("secure API: client CA file: %w", err)
		}
		tlsConfig.ClientCAs = pool
		// A caller may use a token instead; a certificate it does
		// present must verify, or the handshake fails.
		tlsConfig.ClientAuth = tls.VerifyClientCertIfGiven
	}
	var tokens *authn.Tokens
	if s.TokenAuthFile != "" {
		if tokens, err = authn.LoadTokens(s.TokenAuthFile); err != nil {
			return nil, fmt.Errorf("secure API: %w", err)
		}
	}
	gate, err := authn.NewGate(client, authn.Config{
		NodeName:             cfg.NodeName,
		ClientCertificates:   s.ClientCAFile != "",
		Tokens:               tokens,
		TokenWebhook:         ptr.Deref(s.WebhookAuthentication, false),
		TokenWebhookCacheTTL: s.WebhookCacheTTL,
		AuthorizationMode:    s.AuthorizationMode,
		AuthorizedTTL:        s.AuthorizedCacheTTL,
		UnauthorizedTTL:      s.UnauthorizedCacheTTL,
	}, log.With("api", "secure"))
	if err != nil {
		return nil, fmt.Errorf("secure API: %w", err)
	}
	return &SecureAuth{TLS: tlsConfig, Auth: gate}, nil
}

// GetCertificate is tls.Config's GetCertificate.
type GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)

// loadServing reads the configured serving certificate, or berth's
// self-signed one.
func loadServing(cfg *config.Config, now time.Time, log *slog.Logger) (*pki.Serving, error) {
	s := cfg.Serving
	var (
		cert *pki.Serving
		err  error
	)
	if s.TLSCertFile != "" {
		cert, err = pki.Load(s.TLSCertFile, s.TLSPrivateKeyFile)
	} else {
		cert, err = pki.SelfSigned(filepath.Join(cfg.RootDir, PKIDirName), cfg.NodeName, servingIPs(cfg.Address), now)
	}
	if err != nil {
		return nil, fmt.Errorf("secure API: %w", err)
	}
	if cert.Replaced != "" {
		log.Warn("the self-signed serving certificate could not be used; moved it aside and made a new one", "why", cert.Replaced)
	}
	if cert.SelfSigned {
		log.Info("the secure API serves a self-signed certificate: pin its fingerprint, or trust the CA in its file",
			"fingerprint", "SHA256:"+cert.Fingerprint(), "certFile", cert.CertFile)
	}
	return cert, nil
}

// servingIPs are the addresses a self-signed certificate is valid for:
// loopback, the one berth listens on, and the host's.
func servingIPs(address string) []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(address); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	if ip := net.ParseIP(network.HostIP()); ip != nil && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	return ips
}
