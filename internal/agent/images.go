package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/noderuntime"
	"github.com/berth-dev/berth/internal/runtime"
)

// errSourceNotReady keeps the image GC from removing anything before berth
// knows which pods it wants: until then, every image looks unused.
var errSourceNotReady = errors.New("the manifests have not been read yet")

// newImageGC returns the image garbage collector of cri's images;
// mountsImages tells whether the runtime can mount images as volumes.
func newImageGC(cfg *config.Config, cri *runtime.Service, view *podView, mountsImages bool, clk clock.WithTicker,
	recorder *events.Recorder, registry prometheus.Registerer, log *slog.Logger) (*images.Manager, error) {
	i := cfg.Images
	return images.NewManager(images.Options{
		Policy: images.Policy{
			HighThresholdPercent: int(i.GCHighThresholdPercent),
			LowThresholdPercent:  int(i.GCLowThresholdPercent),
			MinAge:               i.MinimumGCAge,
			MaxAge:               i.MaximumGCAge,
		},
		Runtime:      cri,
		FsStats:      cri.ImageFsStats,
		InUse:        func(ctx context.Context) ([]string, error) { return imagesInUse(ctx, cri, view, mountsImages) },
		SandboxImage: noderuntime.SandboxImage,
		Pinned:       i.Pinned,
		Clock:        clk,
		Log:          log.With("component", "imagegc"),
		Events:       recorder,
		Metrics:      registry,
		GCPeriod:     i.GCPeriod,
	})
}

// imagesInUse is every image berth must keep: those of every container the
// runtime has, running or exited, of every pod berth wants, image volumes
// included (so an image is kept between its pull and its container's
// creation), of pulls in flight (kubernetes#123631), and those mounted as
// volumes by the containers the runtime runs.
func imagesInUse(ctx context.Context, cri *runtime.Service, view *podView, mountsImages bool) ([]string, error) {
	wanted, ready := view.wantedImages()
	if !ready {
		return nil, errSourceNotReady
	}
	containers, err := cri.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := append(wanted, cri.Pulling()...)
	for _, c := range containers {
		out = append(out, c.ImageRef)
		if c.Image != nil {
			out = append(out, c.Image.Image)
		}
	}
	if !mountsImages {
		return out, nil
	}
	// A pod berth no longer wants may still run (it is being stopped): its
	// image volumes are read from its containers' mounts, as the kubelet's
	// handleImageVolumes does. Only the running ones: an exited container
	// is started again only from a wanted pod, whose images are kept above.
	for _, c := range containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		st, err := cri.ContainerStatus(ctx, c.Id)
		if err != nil {
			return nil, fmt.Errorf("reading the mounts of container %s: %w", c.Id, err)
		}
		out = append(out, mountedImages(st)...)
	}
	return out, nil
}

// mountedImages returns the images a container mounts as volumes.
func mountedImages(st *runtimeapi.ContainerStatus) []string {
	var out []string
	for _, m := range st.GetMounts() {
		if img := m.GetImage(); img.GetImage() != "" {
			out = append(out, img.GetImage())
		}
	}
	return out
}
