package certificate

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/utils/clock"
)

// The kubelet's UpdateTransport checks for a new certificate every 10s,
// and every second while it has none yet.
const (
	rotationCheckPeriod = 10 * time.Second
	firstCertPeriod     = time.Second
)

// rotation is what keeps an API client on the certificate manager's
// current certificate: TLS handshakes take whatever is current, and once
// it changes, every connection made with the old one is closed so that
// the next request handshakes again (long watches included). Its check
// runs in run, whose caller owns it.
type rotation struct {
	current func() *tls.Certificate
	dialer  *connrotation.Dialer
	log     *slog.Logger
	// last is the certificate the open connections were made with; only
	// run changes it.
	last atomic.Pointer[tls.Certificate]
}

// withRotation returns a copy of rc (which must carry no transport or
// dialer of its own) that authenticates with current's certificate, the
// kubelet's UpdateTransport. Its CA and server name are rc's.
func withRotation(rc *rest.Config, current func() *tls.Certificate, log *slog.Logger) (*rest.Config, *rotation, error) {
	if rc.Transport != nil || rc.Dial != nil {
		return nil, nil, fmt.Errorf("the API client already has a transport or dialer")
	}
	anon := rest.AnonymousClientConfig(rc)
	tlsConfig, err := rest.TLSConfigFor(anon)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS configuration of the API client: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	r := &rotation{
		current: current,
		dialer:  connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		log:     log,
	}
	r.last.Store(current())
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := r.current(); c != nil {
			return c, nil
		}
		// No certificate yet: the handshake goes on without one and the
		// API server answers 401, which the caller retries.
		return &tls.Certificate{}, nil
	}
	anon.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         r.dialer.DialContext,
	})
	// The transport carries the TLS settings now; rest refuses both.
	anon.TLSClientConfig = rest.TLSClientConfig{}
	return anon, r, nil
}

// rotated decides whether the connections must be closed: a new
// certificate replaced the one they were made with. No certificate (none
// yet, or the current one expired) is not a reason: closing would not help.
func rotated(last, curr *tls.Certificate) bool {
	return curr != nil && curr != last
}

// check closes every connection once the certificate changed.
func (r *rotation) check() {
	curr := r.current()
	if !rotated(r.last.Load(), curr) {
		return
	}
	r.log.Info("client certificate rotated: closing the API connections made with the old one",
		"notAfter", curr.Leaf.NotAfter.UTC().Format(time.RFC3339))
	r.dialer.CloseAll()
	// Recorded once the old connections are closed, so that whoever sees
	// the new certificate as the last one knows they are gone.
	r.last.Store(curr)
}

// run checks for a new certificate until ctx ends: every second until the
// first one, then every rotationCheckPeriod. Berth differs from the
// kubelet on purpose here: it never exits when the certificate expired
// (the kubelet does after 5 minutes, for its supervisor to bootstrap it
// again); the certificate manager keeps requesting a new one, with the
// bootstrap credentials once the old one is gone.
func (r *rotation) run(ctx context.Context, clk clock.WithTicker) {
	fast := r.last.Load() == nil
	period := rotationCheckPeriod
	if fast {
		period = firstCertPeriod
	}
	t := clk.NewTicker(period)
	defer func() { t.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		r.check()
		if fast && r.last.Load() != nil {
			fast = false
			t.Stop()
			t = clk.NewTicker(rotationCheckPeriod)
		}
	}
}
