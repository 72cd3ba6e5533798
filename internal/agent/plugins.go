package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/berth-dev/berth/internal/csi"
	"github.com/berth-dev/berth/internal/dra"
	"github.com/berth-dev/berth/internal/pluginmanager"
	"github.com/berth-dev/berth/internal/volume"
)

// draStateDir holds the DRA manager's checkpoint of prepared claims, under
// the root dir.
const draStateDir = "dra"

// draDialTimeout bounds the wait for a registering DRA driver's socket
// (the kubelet's).
const draDialTimeout = 10 * time.Second

// buildPlugins builds the plugin manager (the registration sockets of
// plugins_registry) and the DRA manager it hands DRA drivers to. Only a
// node of a cluster has them: ResourceClaims live in the API server, and
// a standalone manifest that names one is refused by its validation.
func (p *parts) buildPlugins(context.Context) error {
	cluster := p.claimed.cluster
	if cluster == nil {
		return nil
	}
	log := p.log.With("component", "dra")
	drivers := dra.NewPlugins(log, draDialTimeout)
	m, err := dra.New(dra.Options{Dir: filepath.Join(p.cfg.RootDir, draStateDir),
		Claims: dra.APIClaims{Client: cluster.client}, Plugins: drivers, Log: log})
	if err != nil {
		return fmt.Errorf("DRA: %w", err)
	}
	// Created here, so that a directory berth cannot make stops the start
	// with its reason rather than leave the node without drivers.
	if err := os.MkdirAll(p.cfg.PluginRegistrationDir, 0o755); err != nil {
		return fmt.Errorf("plugin registration directory %s: %w", p.cfg.PluginRegistrationDir, err)
	}
	pm, err := pluginmanager.New(pluginmanager.Options{Dir: p.cfg.PluginRegistrationDir, Clock: p.clk, Log: p.log})
	if err != nil {
		return err
	}
	// The node's ResourceSlices of drivers not registered go, as the
	// kubelet deletes them: no pod must be scheduled here for devices no
	// driver can prepare.
	wiper := dra.NewSliceWiper(cluster.client, p.cfg.NodeName, p.clk, log)
	if err := pm.AddHandler(registerapi.DRAPlugin, wiper.Handler(drivers)); err != nil {
		return err
	}
	csiVolumes, err := p.buildCSI(pm)
	if err != nil {
		return err
	}
	p.dra, p.plugins, p.draDrivers, p.sliceWiper, p.csiVolumes = m, pm, drivers, wiper, csiVolumes
	return nil
}

// buildCSI builds the CSI side of the node, as the kubelet's CSI volume
// plugin: the drivers that register with pm (recorded in the node's
// CSINode object), and the set-up of the pods' CSI-backed volumes under
// the root dir, the kubelet's paths.
func (p *parts) buildCSI(pm *pluginmanager.Manager) (*csi.PodVolumes, error) {
	cluster, log := p.claimed.cluster, p.log.With("component", "csi")
	m, err := csi.New(csi.Options{Root: p.cfg.RootDir, NodeName: p.cfg.NodeName, Log: log,
		Sink: &csi.APINodeInfo{Client: cluster.client, NodeName: p.cfg.NodeName}})
	if err != nil {
		return nil, fmt.Errorf("CSI: %w", err)
	}
	if err := pm.AddHandler(registerapi.CSIPlugin, m.Handler()); err != nil {
		return nil, err
	}
	if shared, err := csi.RootShared(p.cfg.RootDir); err != nil || !shared {
		log.Warn("the root dir is not on a shared mount: the mounts of CSI drivers that run in containers will not reach the pods "+
			"(the kubelet makes it rshared; run mount --bind DIR DIR && mount --make-rshared DIR)", "dir", p.cfg.RootDir, "err", err)
	}
	return csi.NewPodVolumes(csi.PodVolumesOptions{Manager: m, Client: cluster.client, NodeName: p.cfg.NodeName,
		Ownership: volume.SetVolumeOwnership, Log: log})
}

// runPlugins is the plugin manager's Run; the drivers' connections close
// once it returns.
func (p *parts) runPlugins(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.sliceWiper.Run(ctx) })
	if err := p.plugins.Run(ctx); err != nil {
		p.log.Error("the plugin manager stopped; no DRA or CSI driver can register", "err", err)
	}
	<-ctx.Done()
	p.draDrivers.Close()
}

// claimsJanitor unprepares the claims of pods that are gone: those berth
// was killed before it could unprepare, once it starts again, and those a
// failed unprepare left behind. The kubelet's DRA manager has the same
// reconcile loop. It runs in the loop's housekeeping, each pass off the
// loop's goroutine (a driver call may take its timeout), one at a time.
type claimsJanitor struct {
	dra  preparedClaims
	log  *slog.Logger
	busy atomic.Bool
}

// preparedClaims is the DRA manager seen from the janitor.
type preparedClaims interface {
	PodUIDs() []types.UID
	UnpreparePod(ctx context.Context, uid types.UID) error
}

// collect starts a pass over the pods that hold claims unless one runs:
// those keep does not keep are unprepared. jobs owns the pass.
func (j *claimsJanitor) collect(ctx context.Context, jobs *sync.WaitGroup, keep func(types.UID) bool) {
	if !j.busy.CompareAndSwap(false, true) {
		return
	}
	var gone []types.UID
	for _, uid := range j.dra.PodUIDs() {
		if !keep(uid) {
			gone = append(gone, uid)
		}
	}
	if len(gone) == 0 {
		j.busy.Store(false)
		return
	}
	jobs.Go(func() {
		defer j.busy.Store(false)
		for _, uid := range gone {
			if err := j.dra.UnpreparePod(ctx, uid); err != nil {
				j.log.Warn("unpreparing the claims of a pod that is gone failed; will retry", "uid", uid, "err", err)
				continue
			}
			j.log.Info("unprepared the claims of a pod that is gone", "uid", uid)
		}
	})
}

// csiJanitor unpublishes and unstages the CSI volumes of pods that are
// gone (berth killed before their teardown, or a teardown that failed) and
// the staged volumes no pod publishes, as the kubelet's volume reconciler
// does after a restart. It runs in the loop's housekeeping, each pass off
// the loop's goroutine (a driver call may take its timeout), one at a time.
type csiJanitor struct {
	volumes *csi.PodVolumes
	log     *slog.Logger
	busy    atomic.Bool
}

func (j *csiJanitor) collect(ctx context.Context, jobs *sync.WaitGroup, keep func(types.UID) bool) {
	if !j.busy.CompareAndSwap(false, true) {
		return
	}
	jobs.Go(func() {
		defer j.busy.Store(false)
		if err := j.volumes.Housekeep(ctx, keep); err != nil {
			j.log.Warn("tearing down the CSI volumes of pods that are gone failed; will retry", "err", err)
		}
	})
}
