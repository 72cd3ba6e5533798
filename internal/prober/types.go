package prober

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/prober/probe"
)

// ProbeType names one of a container's three probes.
type ProbeType string

const (
	Liveness  ProbeType = "liveness"
	Readiness ProbeType = "readiness"
	Startup   ProbeType = "startup"
)

// title is the kubelet's spelling of the probe type, used in event messages
// ("Liveness probe failed: ...") and in the probe_type metric label.
func (t ProbeType) title() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return string(t)
}

// initial is the result a probe reports for a container before its
// thresholds are met: a new container is alive, not ready and not started.
func (t ProbeType) initial() Result {
	switch t {
	case Liveness:
		return Success
	case Readiness:
		return Failure
	}
	return Unknown
}

// persisted reports whether results of this type survive a berth restart.
// Liveness needs no memory: its initial value is already Success.
func (t ProbeType) persisted() bool { return t == Readiness || t == Startup }

// Result is the cached outcome of a probe for one container.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Unknown:
		return "Unknown"
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// MarshalText writes the result by name, so the state file reads plainly.
func (r Result) MarshalText() ([]byte, error) {
	switch r {
	case Unknown, Success, Failure:
		return []byte(r.String()), nil
	}
	return nil, fmt.Errorf("invalid probe result %d", int(r))
}

// UnmarshalText accepts only the three names MarshalText writes.
func (r *Result) UnmarshalText(b []byte) error {
	switch string(b) {
	case "Unknown":
		*r = Unknown
	case "Success":
		*r = Success
	case "Failure":
		*r = Failure
	default:
		return fmt.Errorf("invalid probe result %q", b)
	}
	return nil
}

// fromProbe maps a handler's verdict to a cached result the way the kubelet
// does: a warning counts as success, an unknown outcome as failure.
func fromProbe(r probe.Result) Result {
	switch r {
	case probe.Success, probe.Warning:
		return Success
	}
	return Failure
}

// Update is one change of a cached result. ContainerID is the bare runtime
// ID (the part of the published containerID after "://").
type Update struct {
	ContainerID string
	PodUID      types.UID
	Type        ProbeType
	Result      Result
}

// ProbeRunner runs one probe attempt against a container
// (probe.Runner in production). containerID is the bare runtime ID.
type ProbeRunner interface {
	Run(ctx context.Context, p *v1.Probe, pod *v1.Pod, c *v1.Container, containerID, podIP string) (probe.Result, string, error)
}

// StatusSource gives the latest published API status of a pod.
type StatusSource interface {
	Get(uid types.UID) (v1.PodStatus, bool)
}

// EventRecorder records Kubernetes-style events about a pod.
type EventRecorder interface {
	Event(pod *v1.Pod, eventType, reason, message string)
}
