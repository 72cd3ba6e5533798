package podworker

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/status"
)

// mountedImageVolumes returns the image volumes c mounts, each once, in the
// order of its volumeMounts.
func mountedImageVolumes(pod *v1.Pod, c *v1.Container) []*v1.Volume {
	byName := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Image != nil {
			byName[v.Name] = v
		}
	}
	var out []*v1.Volume
	seen := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		if v := byName[vm.Name]; v != nil && !seen[vm.Name] {
			seen[vm.Name] = true
			out = append(out, v)
		}
	}
	return out
}

// imageVolumePull is what pulling one image volume's image gave in this
// sync: the image to mount, or why the containers mounting it wait.
type imageVolumePull struct {
	spec    *runtimeapi.ImageSpec
	waiting *status.Waiting
	retry   time.Duration
}

// imageVolumeKey is the pull back-off's key of an image volume: the pod and
// the image, as for a container's image (the kubelet's backOffKey).
func imageVolumeKey(pod *v1.Pod, v *v1.Volume) string {
	return string(pod.UID) + "/" + v.Image.Reference
}

// imageVolumes pulls the images of the image volumes c mounts, as their
// pull policies say, each once a sync (the kubelet's getImageVolumes), and
// returns them by volume name. A volume whose pull failed keeps c from
// being created: waiting is the last failure, as the kubelet's
// toKubeContainerImageVolumes reports it, with when to retry.
func (ex *execution) imageVolumes(ctx context.Context, c *v1.Container) (map[string]*runtimeapi.ImageSpec, *status.Waiting, time.Duration) {
	vols := mountedImageVolumes(ex.pod, c)
	if len(vols) == 0 {
		return nil, nil, 0
	}
	if ex.imagePulls == nil {
		ex.imagePulls = map[string]imageVolumePull{}
	}
	out := make(map[string]*runtimeapi.ImageSpec, len(vols))
	var failed imageVolumePull
	for _, v := range vols {
		res, ok := ex.imagePulls[v.Name]
		if !ok {
			res = ex.pullImageVolume(ctx, v)
			ex.imagePulls[v.Name] = res
		}
		if res.waiting != nil {
			ex.w.event(ex.pod, v1.EventTypeWarning, "Failed", "Error: "+res.waiting.Message)
			failed = res
			continue
		}
		out[v.Name] = res.spec
	}
	if failed.waiting != nil {
		return nil, failed.waiting, failed.retry
	}
	return out, nil, 0
}

// pullImageVolume makes v's image present, honouring the pull back-off.
func (ex *execution) pullImageVolume(ctx context.Context, v *v1.Volume) imageVolumePull {
	w, pod := ex.w, ex.pod
	now := w.ws.deps.Clock.Now()
	key := imageVolumeKey(pod, v)
	if w.ws.pullBackOff.IsInBackOffSinceUpdate(key, now) {
		return imageVolumePull{retry: w.ws.pullBackOff.Get(key), waiting: &status.Waiting{
			Reason: reasonImagePullBackOff, Message: "Back-off pulling image \"" + v.Image.Reference + "\""}}
	}
	present, waiting := w.ensureImageRef(ctx, pod, v.Image.Reference, v.Image.PullPolicy, ex.sbCfg, ex.log.With("volume", v.Name))
	if waiting != nil {
		if waiting.Reason != reasonErrImagePull {
			return imageVolumePull{waiting: waiting, retry: retryAfterError}
		}
		w.ws.pullBackOff.Next(key, now)
		return imageVolumePull{waiting: waiting, retry: w.ws.pullBackOff.Get(key)}
	}
	w.ws.pullBackOff.Reset(key)
	img, err := present.status, error(nil)
	if img == nil {
		img, err = w.ws.deps.Runtime.ImageStatus(ctx, present.ref)
	}
	if err != nil || img == nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", v.Image.Reference, err)
		if err == nil {
			msg = fmt.Sprintf("Failed to inspect image %q: it is gone since its pull", v.Image.Reference)
		}
		return imageVolumePull{waiting: &status.Waiting{Reason: "ImageInspectError", Message: msg}, retry: retryAfterError}
	}
	return imageVolumePull{spec: &runtimeapi.ImageSpec{
		Image:              volumeImageName(img),
		UserSpecifiedImage: v.Image.Reference,
		Annotations:        pod.Annotations,
	}}
}

// volumeImageName is the name the image volume's mount gives the runtime:
// one of the image's own names, a digest first (it cannot move), else a
// tag, and its ID only when it has no name. The kubelet passes the ID, but
// containerd (2.4) looks the image up by that name in its image store, and
// only a pull through the CRI records an image under its ID: an image
// imported into the runtime (as berth's nodes and tests get theirs) would
// fail to mount with "not found".
func volumeImageName(img *runtimeapi.Image) string {
	if d := img.GetRepoDigests(); len(d) > 0 {
		return d[0]
	}
	if t := img.GetRepoTags(); len(t) > 0 {
		return t[0]
	}
	return img.GetId()
}
