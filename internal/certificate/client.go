// Package certificate gives berth its credentials the way the kubelet gets
// its own (pkg/kubelet/certificate): a node joins with a bootstrap
// kubeconfig (the API server, its CA and a bootstrap token), requests its
// client certificate with a kubernetes.io/kube-apiserver-client-kubelet
// CSR for system:node:<name>, keeps it under <root-dir>/pki in client-go's
// file store (kubelet-client-current.pem) and writes the kubeconfig that
// points at it; with rotateCertificates it renews it before it expires and
// moves the API client onto the new one; with serverTLSBootstrap the
// secure API's certificate comes from a kubernetes.io/kubelet-serving CSR.
// The requests, waits, back-off and storage are client-go's certificate
// manager; berth decides when to bootstrap, reports failures as node
// events, and rotates the API client's connections.
package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options are what the client credentials are made from.
type Options struct {
	// KubeconfigPath is --kubeconfig: used as is while its certificate is
	// good, else (re)written to point at the bootstrapped certificate.
	KubeconfigPath string
	// BootstrapPath is --bootstrap-kubeconfig; empty for none.
	BootstrapPath string
	// CertDir holds the file store (<root-dir>/pki).
	CertDir  string
	NodeName string
	// Rotate is rotateCertificates.
	Rotate bool
	Clock  clock.WithTicker
	Log    *slog.Logger
}

// Client is the API client's configuration and, when berth bootstraps or
// rotates, the certificate manager behind it. Run runs the manager and
// the connection rotation.
type Client struct {
	// Config is the API client's configuration; with a manager, its
	// transport takes the manager's current certificate.
	Config   *rest.Config
	manager  certificate.Manager // nil: the kubeconfig as it is
	rotation *rotation
	rotate   bool
	clock    clock.WithTicker
	log      *slog.Logger
	reporter *reporter
}

// NewClient decides where the client certificate comes from, as the
// kubelet's buildKubeletClientConfig does: with neither a bootstrap
// kubeconfig nor rotation, the kubeconfig as it is. Otherwise a
// certificate manager: when the kubeconfig is missing or its certificate
// cannot be used, berth bootstraps (the kubeconfig is rewritten to point
// at the file store, and the first CSR goes with the bootstrap
// credentials); a kubeconfig given without bootstrap is rotated from its
// own certificate. Nothing is sent before Run.
func NewClient(o Options) (*Client, error) {
	c := &Client{rotate: o.Rotate, clock: o.Clock, log: o.Log, reporter: &reporter{kind: "client", log: o.Log}}
	if o.BootstrapPath == "" && !o.Rotate {
		rc, err := clientcmd.BuildConfigFromFlags("", o.KubeconfigPath)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", o.KubeconfigPath, err)
		}
		c.Config = rc
		return c, nil
	}
	store, err := certificate.NewFileStoreWithLogger(c.reporter.logger(o.Log), "kubelet-client", o.CertDir, o.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("client certificate store in %s: %w", o.CertDir, err)
	}
	userConfig, certConfig, err := clientConfigs(o, store.CurrentPath())
	if err != nil {
		return nil, err
	}
	if certConfig == nil && !o.Rotate {
		c.Config = userConfig
		return c, nil
	}
	if certConfig == nil {
		certConfig = userConfig
	}
	if c.manager, err = newClientManager(o, store, certConfig, userConfig, c.reporter); err != nil {
		return nil, err
	}
	if c.Config, c.rotation, err = withRotation(userConfig, c.manager.Current, o.Log); err != nil {
		return nil, err
	}
	return c, nil
}

// clientConfigs returns the configuration berth's API client uses and,
// when the kubeconfig must be bootstrapped, the bootstrap one the first
// CSR is sent with (nil otherwise): the kubelet's LoadClientConfig.
func clientConfigs(o Options, pemPath string) (user, bootstrap *rest.Config, err error) {
	if o.BootstrapPath != "" {
		ok, why, err := kubeconfigUsable(o.KubeconfigPath, o.Clock.Now())
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			o.Log.Info("bootstrapping the client certificate: the kubeconfig cannot be used",
				"kubeconfig", o.KubeconfigPath, "why", why, "bootstrapKubeconfig", o.BootstrapPath)
			if bootstrap, err = loadBootstrap(o.BootstrapPath); err != nil {
				return nil, nil, err
			}
			user = rest.AnonymousClientConfig(bootstrap)
			user.CertFile, user.KeyFile = pemPath, pemPath
			if err := writeKubeconfig(o.KubeconfigPath, bootstrap, pemPath); err != nil {
				return nil, nil, err
			}
			return user, bootstrap, nil
		}
	}
	user, err = clientcmd.BuildConfigFromFlags("", o.KubeconfigPath)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w", o.KubeconfigPath, err)
	}
	return user, nil, nil
}

// nodeSubject is the node's identity in its certificates, the one the Node
// authorizer and NodeRestriction know.
func nodeSubject(nodeName string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}
}

// newClientManager is the kubelet's NewKubeletClientCertificateManager: a
// CSR goes with the current certificate once there is one, else with the
// bootstrap credentials (certConfig).
func newClientManager(o Options, store certificate.FileStore, certConfig, userConfig *rest.Config, r *reporter) (certificate.Manager, error) {
	ctx := klog.NewContext(context.Background(), r.logger(o.Log.With("certificate", "client")))
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			if current != nil {
				return kubernetes.NewForConfig(userConfig)
			}
			return kubernetes.NewForConfig(certConfig)
		},
		Template:   &x509.CertificateRequest{Subject: nodeSubject(o.NodeName)},
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:  certificate.DefaultKubeletClientGetUsages,
		// A kubeconfig with its certificate inline (kubeadm's on control
		// plane nodes) seeds the store, and is rotated away at once.
		BootstrapCertificatePEM: userConfig.CertData,
		BootstrapKeyPEM:         userConfig.KeyData,
		CertificateStore:        store,
		Name:                    "client",
		Ctx:                     &ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	return m, nil
}

// SetRecorder makes failures to get a certificate node events as well as
// log lines.
func (c *Client) SetRecorder(record func(eventType, reason, message string)) {
	c.reporter.record.Store(&record)
}

// Managed reports whether berth bootstraps or rotates the client
// certificate (Run then does something).
func (c *Client) Managed() bool { return c.manager != nil }

// Run requests and renews the client certificate and keeps the API
// client's connections on it until ctx ends. Without rotateCertificates
// the manager stops once it has the first certificate, as the kubelet
// never renews then.
func (c *Client) Run(ctx context.Context) {
	if c.manager == nil {
		return
	}
	c.manager.Start()
	defer c.manager.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.rotation.run(ctx, c.clock)
	}()
	if !c.rotate {
		if err := c.Wait(ctx); err == nil {
			c.manager.Stop()
			c.log.Info("client certificate bootstrapped; rotateCertificates is off, so it will not be renewed")
		}
	}
	<-ctx.Done()
	<-done
}

// waitPoll is how often Wait looks for the first certificate.
const waitPoll = 200 * time.Millisecond

// Wait returns once there is a client certificate to use, or with ctx's
// error.
func (c *Client) Wait(ctx context.Context) error {
	if c.manager == nil {
		return nil
	}
	t := c.clock.NewTicker(waitPoll)
	defer t.Stop()
	for c.manager.Current() == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
	return nil
}
