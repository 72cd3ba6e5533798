package runtime

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageRef returns the runtime's ID of image, or "" when it is not present.
func (s *Service) ImageRef(ctx context.Context, image string) (string, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return "", err
	}
	if resp.Image == nil {
		return "", nil
	}
	return resp.Image.Id, nil
}

// PullImage pulls image and returns its reference.
func (s *Service) PullImage(ctx context.Context, image string, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := withTimeout(ctx, PullTimeout)
	defer cancel()
	resp, err := s.is.PullImage(ctx, &runtimeapi.PullImageRequest{
		Image: &runtimeapi.ImageSpec{Image: image}, SandboxConfig: sandbox,
	})
	if err != nil {
		return "", err
	}
	return resp.ImageRef, nil
}

// ErrImageNeverPull is returned when an image is missing and the pull policy
// forbids pulling it.
var ErrImageNeverPull = errors.New("image is not present and imagePullPolicy is Never")

// EnsureImage makes image present according to the pull policy, the way the
// kubelet's image manager does, and returns its reference.
func (s *Service) EnsureImage(ctx context.Context, image string, policy v1.PullPolicy, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	if policy != v1.PullAlways {
		ref, err := s.ImageRef(ctx, image)
		if err != nil {
			return "", fmt.Errorf("image status %s: %w", image, err)
		}
		if ref != "" {
			return ref, nil
		}
		if policy == v1.PullNever {
			return "", fmt.Errorf("%s: %w", image, ErrImageNeverPull)
		}
	}
	ref, err := s.PullImage(ctx, image, sandbox)
	if err != nil {
		return "", fmt.Errorf("pull %s: %w", image, err)
	}
	return ref, nil
}
