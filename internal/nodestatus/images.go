package nodestatus

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's bounds on the images a Node reports: the scheduler's image
// locality reads them, and a Node object must stay small.
const (
	// MaxImages is nodeStatusMaxImages' default.
	MaxImages = 50
	// maxNamesPerImage is MaxNamesPerImageInNodeStatus.
	maxNamesPerImage = 5
)

// Images is the Node's status.images from the runtime's images: the
// largest max first, each with its tags and digests (at most five names),
// as the kubelet's images setter reports them. max < 0 reports all.
func Images(images []*runtimeapi.Image, max int) []v1.ContainerImage {
	sorted := slices.Clone(images)
	slices.SortStableFunc(sorted, func(a, b *runtimeapi.Image) int { return cmp.Compare(b.GetSize(), a.GetSize()) })
	if max >= 0 && len(sorted) > max {
		sorted = sorted[:max]
	}
	out := make([]v1.ContainerImage, 0, len(sorted))
	for _, img := range sorted {
		names := append(slices.Clone(img.GetRepoDigests()), img.GetRepoTags()...)
		if len(names) == 0 {
			continue // nothing the scheduler could match a pod's image to
		}
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
	}
	return out
}
