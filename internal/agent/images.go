package agent

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
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

// newImageGC returns the image garbage collector of cri's images.
func newImageGC(cfg *config.Config, cri *runtime.Service, view *podView, clk clock.WithTicker,
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
		InUse:        func(ctx context.Context) ([]string, error) { return imagesInUse(ctx, cri, view) },
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
// runtime has, running or exited, of every pod berth wants (so an image is
// kept between its pull and its container's creation), and of pulls in
// flight (kubernetes#123631).
func imagesInUse(ctx context.Context, cri *runtime.Service, view *podView) ([]string, error) {
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
	return out, nil
}
