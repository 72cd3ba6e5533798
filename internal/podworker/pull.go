package podworker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/status"
)

const reasonErrImageNeverPull = "ErrImageNeverPull"

// pullAction is what the pull policy asks for an image.
type pullAction int

const (
	usePresent pullAction = iota // present, and the policy does not force a pull
	pull                         // pull it
	refuse                       // missing, and the policy forbids pulling
)

// decidePull is the kubelet's image-manager rule: Always pulls every time,
// IfNotPresent only when missing, Never never.
func decidePull(policy v1.PullPolicy, present bool) pullAction {
	switch {
	case policy == v1.PullAlways:
		return pull
	case present:
		return usePresent
	case policy == v1.PullNever:
		return refuse
	}
	return pull
}

// slots bounds work in flight: image pulls (serializeImagePulls,
// maxParallelImagePulls) and pod starts; a nil channel means no bound.
type slots chan struct{}

func newSlots(parallel int) slots {
	if parallel <= 0 {
		return nil
	}
	return make(slots, parallel)
}

func (s slots) acquire(ctx context.Context) error {
	if s == nil {
		return nil
	}
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slots) release() {
	if s != nil {
		<-s
	}
}

// presentImage is an image ensureImageRef made present: its reference, and
// the runtime's record of it, which the container's config reads the
// image's user from (the kubelet asks ImageStatus again for it); nil when
// the record could not be read after a pull.
type presentImage struct {
	ref    string
	status *runtimeapi.Image
}

// ensureImage makes c's image present as its pull policy says, with the
// kubelet's events, and returns it; on failure, the container's waiting
// state instead.
func (w *worker) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sbCfg *runtimeapi.PodSandboxConfig, log *slog.Logger) (presentImage, *status.Waiting) {
	return w.ensureImageRef(ctx, pod, c.Image, c.ImagePullPolicy, sbCfg, log.With("container", c.Name))
}

// ensureImageRef makes image present as policy says, for a container or an
// image volume alike (the kubelet's EnsureImageExists serves both), with
// the same events and pod's pull secrets.
func (w *worker) ensureImageRef(ctx context.Context, pod *v1.Pod, image string, policy v1.PullPolicy,
	sbCfg *runtimeapi.PodSandboxConfig, log *slog.Logger) (presentImage, *status.Waiting) {
	d := w.ws.deps
	var present *runtimeapi.Image
	if policy != v1.PullAlways {
		img, err := d.Runtime.ImageStatus(ctx, image)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
			w.event(pod, v1.EventTypeWarning, "InspectFailed", msg)
			return presentImage{}, &status.Waiting{Reason: "ImageInspectError", Message: msg}
		}
		present = img
	}
	switch decidePull(policy, present != nil) {
	case usePresent:
		w.event(pod, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", image))
		return presentImage{ref: present.Id, status: present}, nil
	case refuse:
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		w.event(pod, v1.EventTypeWarning, reasonErrImageNeverPull, msg)
		return presentImage{}, &status.Waiting{Reason: reasonErrImageNeverPull, Message: msg}
	}

	// A pull may take minutes: it must not hold back other pods' starts.
	w.releaseStartSlot()
	start := d.Clock.Now()
	w.event(pod, v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	// Credentials are read before taking a pull slot: a slow API server
	// must not hold back other pods' pulls.
	creds, err := w.pullCredentials(ctx, pod, image, log)
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", image, err)
		w.event(pod, v1.EventTypeWarning, "Failed", msg)
		return presentImage{}, &status.Waiting{Reason: reasonErrImagePull, Message: msg}
	}
	if err := w.ws.pullSlots.acquire(ctx); err != nil {
		return presentImage{}, &status.Waiting{Reason: reasonErrImagePull, Message: err.Error()}
	}
	pulling := d.Clock.Now()
	ref, err := w.pullWithCredentials(ctx, image, creds, sbCfg)
	w.ws.pullSlots.release()
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", image, err)
		w.event(pod, v1.EventTypeWarning, "Failed", msg)
		log.Warn("pulling image failed", "image", image, "err", err)
		return presentImage{}, &status.Waiting{Reason: reasonErrImagePull, Message: msg}
	}
	now := d.Clock.Now()
	size := "unknown"
	pulled := presentImage{ref: ref}
	if img, err := d.Runtime.ImageStatus(ctx, ref); err == nil && img != nil {
		size = fmt.Sprint(img.Size)
		pulled.status = img
	}
	w.event(pod, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %s (%s including waiting). Image size: %s bytes.",
		image, now.Sub(pulling).Round(time.Millisecond), now.Sub(start).Round(time.Millisecond), size))
	return pulled, nil
}
