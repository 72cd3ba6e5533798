package lifecycle

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// RuntimeInfo is the container runtime as its CRI Version call names it
// (RuntimeName, RuntimeVersion): "containerd" and "v2.4.2", or
// "1.6.20~ds1" from Debian's package.
type RuntimeInfo struct {
	Name    string
	Version string
}

func (r RuntimeInfo) String() string {
	if r.Name == "" && r.Version == "" {
		return "an unknown runtime"
	}
	return strings.TrimSpace(r.Name + " " + r.Version)
}

// imageVolumeRuntimes is the first version of each runtime whose CRI
// mounts an image (Mount.image, Mount.image_sub_path): containerd added it
// in 2.1, CRI-O in 1.31.
var imageVolumeRuntimes = map[string]*version.Version{
	"containerd": version.MustParseGeneric("2.1.0"),
	"cri-o":      version.MustParseGeneric("1.31.0"),
}

// RuntimeMountsImages tells whether rt can mount an image as a volume.
//
// The CRI offers no feature flag for it (RuntimeHandlerFeatures has only
// recursive read-only mounts and user namespaces), and a runtime that
// predates the field ignores it: the container would be created with an
// empty host path in place of the image, or not at all, and retried for
// ever. So berth decides by the runtime's name and version, as the CRI
// Version call reports them, against the releases that added image mounts;
// a runtime berth does not know is assumed not to. The kubelet does not
// check and leaves the failure to the runtime; berth refuses such pods at
// admission on purpose.
func RuntimeMountsImages(rt RuntimeInfo) bool {
	first, ok := imageVolumeRuntimes[strings.ToLower(rt.Name)]
	if !ok {
		return false
	}
	v, err := version.ParseGeneric(strings.TrimSpace(rt.Version))
	if err != nil {
		return false
	}
	return v.AtLeast(first)
}

// imageVolumeRefusal reports why pod cannot run on rt: it has an image
// volume and rt cannot mount images. It names the first such volume.
func imageVolumeRefusal(pod *v1.Pod, rt RuntimeInfo) (Result, bool) {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Image == nil || RuntimeMountsImages(rt) {
			continue
		}
		return Result{Reason: reasonUnsupportedVolume, Message: fmt.Sprintf(
			"volume %q: image volumes need a container runtime that mounts images (containerd 2.1 or later, CRI-O 1.31 or later); this node runs %s",
			vol.Name, rt)}, true
	}
	return Result{}, false
}

// ImageVolumeAdmitHandler refuses a pod with an image volume on a node
// whose runtime cannot mount images, rather than start it without the
// volume or retry its containers for ever.
func ImageVolumeAdmitHandler(rt RuntimeInfo) PodAdmitHandler {
	return HandlerFunc(func(attrs *PodAdmitAttributes) Result {
		if r, bad := imageVolumeRefusal(attrs.Pod.Pod, rt); bad {
			return r
		}
		return Result{Admit: true}
	})
}
