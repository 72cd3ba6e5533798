package podworker

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// postStartTimeout bounds a postStart hook; the kubelet has no explicit
// limit, but a hook that never returns must not hold the worker forever.
const postStartTimeout = 2 * time.Minute

// maxHookOutput is how much of a failed hook's output goes into the message.
const maxHookOutput = 1024

type execer interface {
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error)
}

// runHandler runs a lifecycle hook (exec or httpGet) for container id.
func runHandler(ctx context.Context, rt execer, h *v1.LifecycleHandler, c *v1.Container, id, podIP string, timeout time.Duration) error {
	switch {
	case h.Exec != nil:
		stdout, stderr, code, err := rt.ExecSync(ctx, id, h.Exec.Command, timeout)
		if err != nil {
			return fmt.Errorf("exec %q: %w", h.Exec.Command, err)
		}
		if code != 0 {
			out := append(stdout, stderr...)
			if len(out) > maxHookOutput {
				out = out[:maxHookOutput]
			}
			return fmt.Errorf("exec %q exited with %d: %s", h.Exec.Command, code, out)
		}
		return nil
	case h.HTTPGet != nil:
		return httpHook(ctx, h.HTTPGet, c, podIP, timeout)
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("hook has no handler")
}

func httpHook(ctx context.Context, g *v1.HTTPGetAction, c *v1.Container, podIP string, timeout time.Duration) error {
	host := g.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return err
	}
	scheme := string(g.Scheme)
	if scheme == "" {
		scheme = "http"
	}
	u := url.URL{Scheme: strings.ToLower(scheme), Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("http hook %s: %w", u.String(), err)
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	// Like the kubelet: no keep-alive (a hook must not leave sockets behind)
	// and no certificate check (the pod's certificate is not the node's to trust).
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's documented behaviour
	}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("http hook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("http hook %s: status %d", u.String(), resp.StatusCode)
	}
	return nil
}

// resolvePort turns a numeric or named port into a number, looking names up
// in the container's ports.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("port %q is not a port of container %s", p.StrVal, c.Name)
}
