// Package probe makes one attempt of a container probe — exec, httpGet,
// tcpSocket or grpc — with the kubelet's semantics and in the kubelet's words
// (pkg/probe and prober.go's runProbe). Network probes run in-process: no
// helper binary, no connection reuse, and no socket left in TIME_WAIT.
//
// Counting attempts against thresholds, retrying on errors and recording
// events belong to the caller (internal/prober).
package probe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Result is the outcome of one probe attempt.
type Result int

const (
	Unknown Result = iota
	Success
	// Warning counts as success but deserves an event, e.g. an HTTP
	// redirect to another host that the probe does not follow.
	Warning
	Failure
)

// String returns the kubelet's name for the result.
func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Warning:
		return "warning"
	case Failure:
		return "failure"
	default:
		return "unknown"
	}
}

// maxOutput bounds how much of a command's output or a response body a probe
// keeps (the kubelet's 10 KiB), so a chatty target cannot grow memory.
const maxOutput = 10 << 10

// Execer runs a command in a container (berth's *runtime.Service implements it).
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error)
}

// Runner makes probe attempts. It is safe for concurrent use by every probe
// worker of the node; it holds no per-target state.
type Runner struct {
	exec      Execer
	userAgent string
	dialer    *dialer
	transport http.RoundTripper
}

// NewRunner returns a Runner that runs exec probes through exec and sends
// userAgent (the kubelet sends "kube-probe/<major>.<minor>") with HTTP and
// gRPC probes.
func NewRunner(exec Execer, userAgent string) *Runner {
	d := newDialer()
	return &Runner{exec: exec, userAgent: userAgent, dialer: d,
		transport: &plainHTTP{dial: d.DialContext, tls: newTransport(d)}}
}

// Run makes one attempt of probe p against container c of pod, whose runtime
// ID is containerID and whose pod IP is podIP, within p.TimeoutSeconds. It
// returns the result and the output in the kubelet's words, for events. A
// target that is down, slow or misbehaving is a Failure with a reason, never
// an error; err is reserved for probes that cannot be attempted (a bad spec,
// an unknown port name, no pod IP, the runtime failing to exec), for which
// the result is Unknown, as in the kubelet.
func (r *Runner) Run(ctx context.Context, p *v1.Probe, pod *v1.Pod, c *v1.Container, containerID, podIP string) (Result, string, error) {
	if p == nil || c == nil {
		return Unknown, "", errors.New("probe: nil probe or container")
	}
	res, out, err := r.run(ctx, p, pod, c, containerID, podIP)
	if err == nil && errors.Is(ctx.Err(), context.Canceled) {
		// The caller gave up (berth is stopping, the pod is going away): the
		// container was not judged, so this must not count as a failure. A
		// caller's deadline, by contrast, is a timeout like the probe's own.
		return Unknown, "", fmt.Errorf("probe abandoned: %w", ctx.Err())
	}
	return res, out, err
}

func (r *Runner) run(ctx context.Context, p *v1.Probe, pod *v1.Pod, c *v1.Container, containerID, podIP string) (Result, string, error) {
	timeout := probeTimeout(p)
	switch {
	case p.Exec != nil:
		return r.runExec(ctx, p.Exec, c, containerID, timeout)
	case p.HTTPGet != nil:
		return r.runHTTP(ctx, p.HTTPGet, c, podIP, timeout)
	case p.TCPSocket != nil:
		return r.runTCP(ctx, p.TCPSocket, c, podIP, timeout)
	case p.GRPC != nil:
		return r.runGRPC(ctx, p.GRPC, podIP, timeout)
	}
	return Unknown, "", fmt.Errorf("probe of container %q in pod %s: no handler (exec, httpGet, tcpSocket or grpc)", c.Name, podName(pod))
}

// probeTimeout is the probe's timeoutSeconds; an unset value means the API
// default of 1s rather than no timeout at all.
func probeTimeout(p *v1.Probe) time.Duration {
	if p.TimeoutSeconds <= 0 {
		return time.Second
	}
	return time.Duration(p.TimeoutSeconds) * time.Second
}

// resolvePort turns a numeric or named port into a number, looking names up
// in the container's ports as the kubelet does.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n := -1
	switch port.Type {
	case intstr.Int:
		n = port.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == port.StrVal {
				n, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("port %q not found in the ports of container %q", port.StrVal, c.Name)
		}
	default:
		return 0, fmt.Errorf("port %v has no type", port)
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port number %d", n)
	}
	return n, nil
}

// targetHost is host, or the pod IP when host is empty: an empty address
// would silently probe the node's own loopback instead.
func targetHost(host, podIP string) (string, error) {
	if host != "" {
		return host, nil
	}
	if podIP == "" {
		return "", errors.New("the pod has no IP to probe yet")
	}
	return podIP, nil
}

func podName(pod *v1.Pod) string {
	if pod == nil {
		return "<nil>"
	}
	return pod.Namespace + "/" + pod.Name
}
