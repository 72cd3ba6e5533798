// Package agent puts berth together and owns its start-up and shutdown
// order: the listeners first, then the runtime (internal/noderuntime), then
// the parts that use it, each a value built from the parts it needs (see
// parts for the graph) and run under one errgroup; and the sync loop that
// routes pods and events between them and publishes what it decided
// (podView) for the others to read.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/admission"
	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/cm/hierarchy"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/noderuntime"
	"github.com/berth-dev/berth/internal/nodestatus"
	"github.com/berth-dev/berth/internal/runtime"
)

// probeUserAgent is what berth's HTTP probes send, the kubelet's form.
const probeUserAgent = "kube-probe/1.37"

// terminalPodsDir, under the root dir, records the pods berth evicted.
const terminalPodsDir = "terminal-pods"

// resizeDir holds the checkpoint of the pods' allocated and actuated
// resources (in-place resize).
const resizeDir = "resize"

// reasonTerminalRecordCorrupt is the node event of a record of an evicted
// pod that could not be trusted.
const reasonTerminalRecordCorrupt = "TerminalPodRecordCorrupt"

// Run runs berth until ctx is done. Pods keep running after it returns.
// A start-up that ctx's end cut short fails with an error wrapping ctx's.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	return stopping(ctx, run(ctx, cfg, log))
}

// run starts berth in its order and stops it in the reverse one. The
// listeners and the admin socket are claimed first, so that a port in use
// or another berth on this root dir stops berth before it starts anything;
// the runtime is started before every part that uses it and stopped after
// all of them. The parts are built in dependency order (build), then run
// together until ctx is done (parts.runners).
func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	claimed, err := claim(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer claimed.release()
	host, err := readHost(cfg, log)
	if err != nil {
		return err
	}
	recorder := events.NewRecorder(clock.RealClock{}, "berth", cfg.NodeName)
	if claimed.cluster != nil {
		recorder.SetSink(claimed.cluster.events.Put)
		claimed.cluster.setRecorder(recorder.NodeEvent)
	}
	rt, err := noderuntime.Start(ctx, noderuntime.Options{
		Config: cfg, Metrics: claimed.registry, Record: recorder.NodeEvent, Log: log})
	if err != nil {
		return err
	}
	defer rt.Stop()

	ctx, cancel := context.WithCancel(ctx)
	p := &parts{cfg: cfg, log: log, clk: clock.RealClock{}, claimed: claimed, host: host, rt: rt, recorder: recorder}
	defer p.abandon(cancel)
	if err := p.build(ctx); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range p.runners() {
		g.Go(func() error {
			r(gctx)
			return nil
		})
	}
	return g.Wait()
}

// hostFacts are what berth reads of the machine before it starts: the
// memory policy, capacity and allocatable, the pod cgroup tree (nil
// without cgroupsPerQOS) and the sysctls pods may set.
type hostFacts struct {
	memory                cm.MemoryPolicy
	capacity, allocatable v1.ResourceList
	cgroups               *hierarchy.Hierarchy
	sysctls               *admission.SysctlAllowlist
}

func readHost(cfg *config.Config, log *slog.Logger) (*hostFacts, error) {
	h := &hostFacts{}
	var err error
	if h.memory, err = nodeMemory(cfg, log); err != nil {
		return nil, err
	}
	if h.capacity, h.allocatable, h.cgroups, err = nodeResources(cfg, log); err != nil {
		return nil, err
	}
	if h.sysctls, err = nodeSysctls(cfg.AllowedUnsafeSysctls, log); err != nil {
		return nil, err
	}
	return h, nil
}

// hostIP is the node's address pods see as status.hostIP: the Node's
// InternalIP in a cluster.
func hostIP(cluster *clusterNode) string {
	if cluster != nil {
		return cluster.nodeIP
	}
	return network.HostIP()
}

// nodeImages are the runtime's images as the Node reports them; none when
// the runtime cannot list them this time.
func nodeImages(ctx context.Context, cri *runtime.Service, log *slog.Logger) []v1.ContainerImage {
	ctx, cancel := context.WithTimeout(ctx, apiCallTimeout)
	defer cancel()
	images, err := cri.ListImages(ctx)
	if err != nil {
		log.Warn("listing images for the node's status failed", "err", err)
		return nil
	}
	return nodestatus.Images(images, nodestatus.MaxImages)
}

// parallelPodStarts is how many pods start at once on a node with cpus
// CPUs: creating a sandbox and starting containers is CPU work for the
// runtime (runc, CNI plugins) with some waiting between. Measured with 50
// pods at once on 2 cores, 4 left the runtime idle at times (the last pod
// later than all at once), 8 kept it busy: half the median start, the
// same last one.
func parallelPodStarts(cpus int) int { return max(8, 4*cpus) }

// stopping marks an error of a start-up that ctx's end cut short (a CRI
// call cancelled by SIGTERM) as that end's consequence, so that berth
// exits as from any stop it was asked for, without an error.
func stopping(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return err
}
