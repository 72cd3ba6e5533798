package podworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/lifecycle"
	"github.com/berth-dev/berth/internal/status"
)

// devicePluginRetry is how often a pod waiting for a device plugin tries
// again.
const devicePluginRetry = time.Second

// Devices is the device manager, seen from a pod worker.
type Devices interface {
	// Admit allocates the devices of a pod about to start; a
	// *devicemanager.NotReadyError means the pod may wait.
	Admit(ctx context.Context, pod *v1.Pod) error
	// ContainerOptions is what a container's devices add to its config.
	ContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*devicemanager.DeviceRunContainerOptions, error)
}

// rejection is why a pod was not admitted: it never starts, and its status
// is Failed with the kubelet's reason.
type rejection struct{ reason, message string }

// admission is what the worker remembers of admitting its pod.
type admission struct {
	done bool
	// waitingSince is when the pod first waited for a device plugin.
	waitingSince time.Time
	rejected     *rejection
}

// admitVerdict decides what an Admit error means for a pod that has waited
// since waitingSince (zero: not yet) for at most wait: wait on (with the
// time it started waiting), or be rejected.
func admitVerdict(err error, waitingSince, now time.Time, wait time.Duration) (since time.Time, rej *rejection) {
	var notReady *devicemanager.NotReadyError
	if !errors.As(err, &notReady) {
		return time.Time{}, &rejection{devicemanager.ReasonUnexpectedAdmissionError,
			fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
	}
	if waitingSince.IsZero() {
		waitingSince = now
	}
	if waited := now.Sub(waitingSince); waited >= wait {
		return time.Time{}, &rejection{devicemanager.ReasonUnexpectedAdmissionError,
			fmt.Sprintf("Allocate failed due to %v after waiting %s for it, which is unexpected", err, wait)}
	}
	return waitingSince, nil
}

// admit runs the device admission of a pod that has not started: the
// kubelet's allocate-resources admit handler, which berth runs here rather
// than in the admission pipeline (internal/lifecycle) because it calls the
// device plugins and may wait for one to register. The pipeline's other
// handlers admitted the pod before it got a worker. It returns whether the
// pod may start; if not, when to try again.
//
// A pod the runtime already has (berth restarted under it) is never
// admitted again: it keeps what it holds. The kubelet re-admitted such
// pods and killed them when a plugin was slow to come back
// (kubernetes#118559).
func (w *worker) admit(ctx context.Context, pod *v1.Pod, st *container.PodStatus, log *slog.Logger) (bool, time.Duration) {
	d := w.ws.deps
	if w.admission.done {
		return true, 0
	}
	if d.Devices == nil || len(st.Sandboxes) > 0 || !devicemanager.NeedsDevices(pod) {
		w.admission.done = true
		return true, 0
	}
	err := d.Devices.Admit(ctx, pod)
	if err == nil {
		w.admission = admission{done: true}
		w.syncError = nil
		return true, 0
	}
	now := d.Clock.Now()
	first := w.admission.waitingSince.IsZero()
	since, rej := admitVerdict(err, w.admission.waitingSince, now, d.DevicePluginWait)
	if rej != nil {
		w.admission.rejected = rej
		lifecycle.Rejecter{Status: d.Status, Events: d.Events, Log: log}.Reject(pod, rej.reason, rej.message)
		return false, d.Resync
	}
	w.admission.waitingSince = since
	msg := fmt.Sprintf("Waiting up to %s more for the device plugin: %v", (d.DevicePluginWait - now.Sub(since)).Round(time.Second), err)
	w.syncError = &status.Waiting{Reason: devicemanager.ReasonDevicePluginNotReady, Message: msg}
	if first {
		log.Info("pod waits for a device plugin", "err", err, "wait", d.DevicePluginWait.String())
		w.event(pod, v1.EventTypeWarning, devicemanager.ReasonDevicePluginNotReady,
			fmt.Sprintf("Waiting up to %s for the device plugin: %v", d.DevicePluginWait, err))
	}
	return false, devicePluginRetry
}
