package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{Unknown: "unknown", Success: "success", Warning: "warning", Failure: "failure", Result(42): "unknown"} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", int(r), got, want)
		}
	}
}

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "zero"}}}
	for _, tc := range []struct {
		port   intstr.IntOrString
		want   int
		errHas string
	}{
		{port: intstr.FromInt32(80), want: 80},
		{port: intstr.FromInt32(65535), want: 65535},
		{port: intstr.FromString("http"), want: 8080},
		{port: intstr.FromString("grpc"), errHas: `port "grpc" not found in the ports of container "app"`},
		{port: intstr.FromString("8080"), errHas: `port "8080" not found`},
		{port: intstr.FromString("zero"), errHas: "invalid port number 0"},
		{port: intstr.FromInt32(0), errHas: "invalid port number 0"},
		{port: intstr.FromInt32(65536), errHas: "invalid port number 65536"},
		{port: intstr.IntOrString{Type: 7}, errHas: "has no type"},
	} {
		got, err := resolvePort(tc.port, c)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("resolvePort(%v) = %d, %v; want an error containing %q", tc.port, got, err, tc.errHas)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolvePort(%v) = %d, %v; want %d", tc.port, got, err, tc.want)
		}
	}
}

func TestProbeTimeout(t *testing.T) {
	for secs, want := range map[int32]time.Duration{0: time.Second, -1: time.Second, 1: time.Second, 30: 30 * time.Second} {
		if got := probeTimeout(&v1.Probe{TimeoutSeconds: secs}); got != want {
			t.Errorf("timeoutSeconds %d: %v, want %v", secs, got, want)
		}
	}
}

func TestRunWithoutHandler(t *testing.T) {
	r := NewRunner(nil, testUserAgent)
	res, _, err := r.Run(t.Context(), &v1.Probe{TimeoutSeconds: 1}, testPod, &v1.Container{Name: "app"}, "cid", "127.0.0.1")
	if res != Unknown || err == nil || !strings.Contains(err.Error(), `container "app" in pod default/web`) {
		t.Errorf("got %v, %v; want Unknown and an error naming the container", res, err)
	}
	if res, _, err := r.Run(t.Context(), nil, testPod, &v1.Container{}, "cid", ""); res != Unknown || err == nil {
		t.Errorf("nil probe: got %v, %v", res, err)
	}
}

// TestRunAbandoned: a probe cut short by its caller is Unknown, not a
// Failure that could restart the container.
func TestRunAbandoned(t *testing.T) {
	silent := silentListener(t)
	port := portOf(t, silent.Addr().String())
	r := NewRunner(&fakeExecer{err: context.Canceled}, testUserAgent)
	for name, p := range map[string]*v1.Probe{
		"exec": execProbe(5, "true"),
		"http": httpProbe(port, "/"),
		"tcp":  tcpProbe(intstr.FromInt32(int32(port))),
		"grpc": grpcProbe(port, ""),
	} {
		t.Run(name, func(t *testing.T) {
			p.TimeoutSeconds = 5
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			res, out, err := r.Run(ctx, p, testPod, &v1.Container{Name: "app"}, "cid", "127.0.0.1")
			if res != Unknown || !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, %q, %v; want Unknown and context.Canceled", res, out, err)
			}
		})
	}
}

// TestRunCallerDeadline: a deadline set by the caller that passes during the
// attempt is a timeout, not an abandoned probe.
func TestRunCallerDeadline(t *testing.T) {
	r := NewRunner(&fakeExecer{err: context.DeadlineExceeded}, testUserAgent)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	res, out, err := r.Run(ctx, execProbe(1, "sleep", "5"), testPod, &v1.Container{Name: "app"}, "cid", "")
	if res != Failure || err != nil || out != `command "sleep 5" timed out` {
		t.Errorf("got %v, %q, %v; want Failure, command \"sleep 5\" timed out", res, out, err)
	}
}
