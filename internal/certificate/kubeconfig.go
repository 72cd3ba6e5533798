package certificate

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"

	"github.com/berth-dev/berth/internal/atomicfile"
)

// certsUsable decides whether a kubeconfig's client certificates may still
// be used at now: the kubelet's isClientConfigStillValid, which only looks
// at expiry, plus not-yet-valid certificates, which the API server would
// refuse just the same. The reason says why not.
func certsUsable(certs []*x509.Certificate, now time.Time) (bool, string) {
	if len(certs) == 0 {
		return false, "it has no client certificate"
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return false, fmt.Sprintf("its client certificate %q expired at %s", c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
		}
		if now.Before(c.NotBefore) {
			return false, fmt.Sprintf("its client certificate %q is not valid before %s", c.Subject.CommonName, c.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	return true, ""
}

// kubeconfigUsable reads the kubeconfig at path and says whether its client
// certificate can be used now; when not, why. Only a file that exists but
// cannot be read is an error: anything else is a reason to bootstrap again.
func kubeconfigUsable(path string, now time.Time) (bool, string, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, "it does not exist", nil
		}
		return false, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return false, fmt.Sprintf("it does not load: %v", err), nil
	}
	tc, err := rc.TransportConfig()
	if err != nil {
		return false, fmt.Sprintf("its TLS settings do not load: %v", err), nil
	}
	// Loads the certificate files into tc.TLS.CertData as a side effect.
	if _, err := transport.TLSConfigFor(tc); err != nil {
		return false, fmt.Sprintf("its TLS settings do not load: %v", err), nil
	}
	certs, err := certutil.ParseCertsPEM(tc.TLS.CertData)
	if err != nil {
		return false, fmt.Sprintf("its client certificate does not parse: %v", err), nil
	}
	ok, why := certsUsable(certs, now)
	return ok, why, nil
}

// checkBootstrap checks what a bootstrap kubeconfig must give, as kubeadm
// writes one: an API server, a way to trust it and a credential, in the
// current context. Each problem names the field.
func checkBootstrap(cfg *clientcmdapi.Config) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if cfg.CurrentContext == "" {
		bad("current-context", "not set")
		return errors.Join(errs...)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		bad("current-context", "names context %q, which contexts does not hold", cfg.CurrentContext)
		return errors.Join(errs...)
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	switch {
	case !ok:
		bad(fmt.Sprintf("contexts[%s].cluster", cfg.CurrentContext), "names cluster %q, which clusters does not hold", ctx.Cluster)
	case cluster.Server == "":
		bad(fmt.Sprintf("clusters[%s].server", ctx.Cluster), "not set: the API server's address is required")
	case cluster.CertificateAuthority == "" && len(cluster.CertificateAuthorityData) == 0 && !cluster.InsecureSkipTLSVerify:
		bad(fmt.Sprintf("clusters[%s].certificate-authority-data", ctx.Cluster), "not set: the API server's CA is required to trust it")
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	switch {
	case !ok:
		bad(fmt.Sprintf("contexts[%s].user", cfg.CurrentContext), "names user %q, which users does not hold", ctx.AuthInfo)
	case user.Token == "" && user.TokenFile == "" && len(user.ClientCertificateData) == 0 && user.ClientCertificate == "":
		bad(fmt.Sprintf("users[%s].token", ctx.AuthInfo), "not set: a bootstrap token (or a client certificate) is required")
	}
	return errors.Join(errs...)
}

// loadBootstrap reads and checks the bootstrap kubeconfig at path.
func loadBootstrap(path string) (*rest.Config, error) {
	wrap := func(err error) error { return fmt.Errorf("bootstrap kubeconfig %s: %w", path, err) }
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, wrap(err)
	}
	if err := checkBootstrap(raw); err != nil {
		return nil, wrap(err)
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, wrap(err)
	}
	return rc, nil
}

// writeKubeconfig writes, atomically, the kubeconfig berth uses once it has
// a certificate: the bootstrap kubeconfig's API server and CA, and the
// certificate and key in the file store's current file (pemPath), as the
// kubelet's writeKubeconfigFromBootstrapping does.
func writeKubeconfig(path string, bootstrap *rest.Config, pemPath string) error {
	cluster := &clientcmdapi.Cluster{
		Server:                bootstrap.Host,
		InsecureSkipTLSVerify: bootstrap.Insecure,
		CertificateAuthority:  bootstrap.CAFile,
	}
	if bootstrap.CAFile == "" {
		cluster.CertificateAuthorityData = bootstrap.CAData
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default-cluster"] = cluster
	cfg.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: pemPath, ClientKey: pemPath}
	cfg.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}
	cfg.CurrentContext = "default-context"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}
