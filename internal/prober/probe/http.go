package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// maxRedirects is how many same-host redirects a probe follows (Go's and the
// kubelet's limit).
const maxRedirects = 10

// newTransport returns the transport shared by all HTTPS probes (plain
// HTTP goes through plainHTTP). Nothing is kept between probes:
// keep-alives are off, so each probe dials its own connection through d
// (SO_LINGER 0) and closes it when done.
func newTransport(d *dialer) *http.Transport {
	return &http.Transport{
		DialContext: d.DialContext,
		// A probe checks that the container answers, not who it is; the
		// kubelet does not verify certificates either.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		DisableKeepAlives: true,
		// No Accept-Encoding header, as the kubelet; the body is only read
		// for the event message.
		DisableCompression: true,
		// Proxy stays nil: a probe must reach the pod directly, never
		// through a proxy configured in the node's environment.
	}
}

// runHTTP sends one GET and judges the status code: 2xx succeeds, 3xx is a
// Warning (a redirect the probe did not follow), anything else fails.
func (r *Runner) runHTTP(ctx context.Context, a *v1.HTTPGetAction, c *v1.Container, podIP string, timeout time.Duration) (Result, string, error) {
	// The timeout bounds everything (dial, TLS, headers, redirects, body).
	// It is the request's context's rather than http.Client.Timeout, which
	// costs a goroutine and a timer per request with a round tripper other
	// than http.Transport.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := r.newHTTPRequest(ctx, a, c, podIP)
	if err != nil {
		return Unknown, "", err
	}
	client := &http.Client{Transport: r.transport, CheckRedirect: followSameHost}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Worded as the kubelet's events word it (its client's
			// Timeout), whatever step the deadline cut short.
			return Failure, err.Error() + " (Client.Timeout exceeded while awaiting headers)", nil
		}
		return Failure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOutput))
	if err != nil {
		return Failure, fmt.Sprintf("HTTP probe failed reading the response body: %v", err), nil
	}
	switch code := resp.StatusCode; {
	case code >= http.StatusOK && code < http.StatusMultipleChoices:
		return Success, string(body), nil
	case code >= http.StatusMultipleChoices && code < http.StatusBadRequest:
		return Warning, "Probe terminated redirects, Response body: " + string(body), nil
	default:
		// Like the kubelet, the message leaves the body out: a probe can be
		// pointed at any URL the node reaches, and events are readable far
		// more widely than that URL (kubernetes #99425).
		return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", code), nil
	}
}

// newHTTPRequest builds the kubelet's probe request for a: scheme, host
// (default: the pod IP), numeric or named port, path, and headers, with
// User-Agent and Accept defaults and a Host header setting req.Host.
func (r *Runner) newHTTPRequest(ctx context.Context, a *v1.HTTPGetAction, c *v1.Container, podIP string) (*http.Request, error) {
	scheme := strings.ToLower(string(a.Scheme))
	switch scheme {
	case "":
		scheme = "http"
	case "http", "https":
	default:
		return nil, fmt.Errorf("httpGet.scheme: %q is neither HTTP nor HTTPS", a.Scheme)
	}
	host, err := targetHost(a.Host, podIP)
	if err != nil {
		return nil, fmt.Errorf("httpGet.host: %w", err)
	}
	port, err := resolvePort(a.Port, c)
	if err != nil {
		return nil, fmt.Errorf("httpGet.port: %w", err)
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		// Too late to reject the path; send it as written, as the kubelet does.
		u = &url.URL{Path: a.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("httpGet: %w", err)
	}
	header := make(http.Header, len(a.HTTPHeaders)+2)
	for _, h := range a.HTTPHeaders {
		header.Add(h.Name, h.Value)
	}
	if _, ok := header["User-Agent"]; !ok {
		header.Set("User-Agent", r.userAgent)
	}
	if _, ok := header["Accept"]; !ok {
		header.Set("Accept", "*/*")
	} else if header.Get("Accept") == "" {
		// An explicitly empty Accept removes the header.
		header.Del("Accept")
	}
	req.Header = header
	req.Host = header.Get("Host")
	return req, nil
}

// followSameHost follows redirects to the same host only. A redirect to
// another host ends the probe with that 3xx response (a Warning): the
// kubelet will not let a pod make the node fetch arbitrary hosts.
func followSameHost(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}
