package fakecri

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// AddImages puts images in the runtime's store, replacing any of the same
// ID.
func (r *Runtime) AddImages(images ...*runtimeapi.Image) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, img := range images {
		r.images[img.Id] = img
	}
}

// ImageID is the ID PullImage gives the image it pulls for ref.
func ImageID(ref string) string {
	sum := sha256.Sum256([]byte(ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Images returns the IDs of the images in the store, sorted.
func (r *Runtime) Images() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.images))
}

// findImageLocked finds an image by ID, tag or digest, as the CRI's
// ImageStatus does (without normalizing short names).
func (r *Runtime) findImageLocked(ref string) *runtimeapi.Image {
	if img := r.images[ref]; img != nil {
		return img
	}
	for _, id := range slices.Sorted(maps.Keys(r.images)) {
		img := r.images[id]
		if slices.Contains(img.RepoTags, ref) || slices.Contains(img.RepoDigests, ref) {
			return img
		}
	}
	return nil
}

// ListImages lists the store, by ID.
func (r *Runtime) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	defer r.listed(ctx, "ListImages")
	if err := r.begin(ctx, "ListImages", ""); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Image
	for _, id := range slices.Sorted(maps.Keys(r.images)) {
		out = append(out, r.images[id])
	}
	return out, nil
}

// RemoveImage removes an image; removing one that is not there succeeds,
// as in the CRI.
func (r *Runtime) RemoveImage(ctx context.Context, imageID string) error {
	if err := r.begin(ctx, "RemoveImage", imageID); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.images, imageID)
	return nil
}

// ImageStatus returns the image ref names, nil (and no error) when the
// store has none: the CRI's answer for a missing image.
func (r *Runtime) ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error) {
	if err := r.begin(ctx, "ImageStatus", ref); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.findImageLocked(ref), nil
}

// PullImage stores an image for ref (ImageID(ref), tagged ref) unless it
// has one already, and returns its ID.
func (r *Runtime) PullImage(ctx context.Context, ref string, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.begin(ctx, "PullImage", ref); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if img := r.findImageLocked(ref); img != nil {
		return img.Id, nil
	}
	img := &runtimeapi.Image{Id: ImageID(ref), RepoTags: []string{ref}, Size: 1 << 20}
	r.images[img.Id] = img
	return img.Id, nil
}
