package runtime

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What containerd 1.6.20 answers here, measured on this project's hosts:
//
//   - ListContainerStats gives running containers Cpu (cumulative usage;
//     UsageNanoCores is 0 on the first call, as containerd computes it from
//     the previous call) and Memory (WorkingSetBytes = usage − inactive file,
//     UsageBytes, RssBytes, page faults; AvailableBytes 0 when unlimited).
//     Stopped containers have neither, only WritableLayer.
//   - WritableLayer.UsedBytes and InodesUsed are 0 until containerd's
//     snapshot syncer has measured the layer (every 10 s by default), and its
//     FsId.Mountpoint is the snapshotter's root directory.
//   - ImageFsInfo names that same snapshotter root; its usage is likewise 0
//     until the first sync.
//   - ListPodSandboxStats is implemented on Linux in 1.6.20, but berth does
//     not depend on it: it reads its own pod cgroups, which every runtime
//     shares.

// ListContainerStats returns the resource usage of the containers matching
// the filter (nil: all).
func (s *Service) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.rs.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: f})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	return resp.Stats, nil
}

// ImageFsInfo returns what the runtime uses on the filesystems that hold its
// images and, if the runtime keeps them apart, its containers' writable
// layers.
func (s *Service) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := withTimeout(ctx, ListTimeout)
	defer cancel()
	resp, err := s.is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("image filesystem info: %w", err)
	}
	return resp, nil
}
