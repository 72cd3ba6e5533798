package runtime

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageStatus returns the runtime's record of image, or nil when it is not
// present.
func (s *Service) ImageStatus(ctx context.Context, image string) (*runtimeapi.Image, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return nil, err
	}
	return resp.Image, nil
}

// PullImage pulls image and returns its reference. While it runs, image is
// among Pulling's answers, so the image GC leaves it alone.
func (s *Service) PullImage(ctx context.Context, image string, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	return s.PullImageWithAuth(ctx, image, nil, sandbox)
}

// PullImageWithAuth pulls with the registry credentials of auth (nil for
// none): a pod's image pull secrets.
func (s *Service) PullImageWithAuth(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	s.pulls.add(image)
	defer s.pulls.done(image)
	ctx, cancel := withTimeout(ctx, PullTimeout)
	defer cancel()
	resp, err := s.is.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: image}, Auth: auth, SandboxConfig: sandbox,
	})
	if err != nil {
		return "", err
	}
	return resp.ImageRef, nil
}

// Pulling returns the images being pulled right now.
func (s *Service) Pulling() []string { return s.pulls.list() }

// ListImages returns every image the runtime has.
func (s *Service) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Images, nil
}

// RemoveImage removes an image by ID.
func (s *Service) RemoveImage(ctx context.Context, imageID string) error {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	_, err := s.is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: imageID}})
	return err
}

// ImageFsStats returns the capacity and available bytes of the filesystem
// that holds the runtime's images: the mount point ImageFsInfo names,
// measured with statfs, as the kubelet's cadvisor does.
func (s *Service) ImageFsStats(ctx context.Context) (capacity, available uint64, err error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return 0, 0, err
	}
	if len(resp.ImageFilesystems) == 0 || resp.ImageFilesystems[0].GetFsId().GetMountpoint() == "" {
		return 0, 0, fmt.Errorf("the runtime reports no image filesystem")
	}
	mount := resp.ImageFilesystems[0].FsId.Mountpoint
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", mount, err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// pullSet counts the pulls in flight per image.
type pullSet struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *pullSet) add(image string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[image]++
}

func (p *pullSet) done(image string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[image]--; p.n[image] <= 0 {
		delete(p.n, image)
	}
}

func (p *pullSet) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.n))
	for image := range p.n {
		out = append(out, image)
	}
	return out
}
