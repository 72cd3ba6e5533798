package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/containergc"
	"github.com/berth-dev/berth/internal/csi"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/dra"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/eviction"
	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/lifecycle"
	"github.com/berth-dev/berth/internal/noderuntime"
	"github.com/berth-dev/berth/internal/nodestatus"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/pluginmanager"
	"github.com/berth-dev/berth/internal/podobjects"
	"github.com/berth-dev/berth/internal/podresources"
	"github.com/berth-dev/berth/internal/podworker"
	"github.com/berth-dev/berth/internal/prober"
	"github.com/berth-dev/berth/internal/prober/probe"
	"github.com/berth-dev/berth/internal/resize"
	"github.com/berth-dev/berth/internal/stats"
	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/userns"
	"github.com/berth-dev/berth/internal/volume"
)

// parts are berth's long-lived parts, built by build in dependency order
// (each from those before it, never from a later one):
//
//	runtime (started by run)          <- everything that talks to containers
//	statuses, events, evicted pods    <- the prober, the pod workers, the loop
//	prober                            <- runtime, statuses
//	view (the loop's published state) <- the GCs, the APIs, the cluster
//	workerLink (questions to workers) <- the device manager, the container GC, eviction
//	device manager                    <- runtime, workerLink, statuses
//	PLEG                              <- runtime
//	image GC, container GC            <- runtime, view (container GC: workerLink)
//	eviction                          <- stats, workerLink, the GCs
//	pod workers                       <- runtime, volumes, prober, devices, eviction (admission)
//	pod sources                       <- the store claimed at start
//	cluster node                      <- view, pod workers, devices, eviction, PLEG
//	sync loop                         <- pod workers, prober, devices, view, sources, PLEG, cluster (status sync)
//	servers                           <- view, statuses, runtime, devices, GCs, eviction
//
// Each part's Run (runners) returns once the context is done and its own
// goroutines have stopped.
type parts struct {
	cfg      *config.Config
	log      *slog.Logger
	clk      clock.RealClock
	claimed  *claimed
	host     *hostFacts
	rt       *noderuntime.Runtime
	recorder *events.Recorder

	statuses *status.Manager
	terminal *status.TerminalStore
	probes   *prober.Manager
	view     *podView
	link     *workerLink
	devices  *devicemanager.Manager
	// devicesStarted is set once the device manager runs: its Wait must
	// be waited for.
	devicesStarted bool
	relist         *pleg.PLEG
	plegEvents     chan pleg.Event
	volumes        *volume.Manager
	// plugins registers the drivers of plugins_registry; dra prepares
	// the pods' ResourceClaims through draDrivers. All nil standalone.
	plugins    *pluginmanager.Manager
	dra        *dra.Manager
	draDrivers *dra.Plugins
	sliceWiper *dra.SliceWiper
	// csiVolumes sets up the pods' CSI-backed volumes through the CSI
	// drivers of plugins_registry; nil standalone.
	csiVolumes *csi.PodVolumes
	userns     *userns.Manager
	// runtimeFeatures are read from the runtime as berth starts;
	// nodeFeatures are what admission allows, with the node's user
	// namespace range taken into account.
	runtimeFeatures runtimeFeatures
	nodeFeatures    lifecycle.NodeFeatures
	imageGC         *images.Manager
	containerGC     *containergc.Manager
	summary         *stats.Provider
	evictions       *eviction.Manager
	resize          *resize.Manager      // in-place resizes' allocations
	services        *podobjects.Services // nil standalone
	workers         *podWorkers
	sources         *podSources
	loop            *syncLoop
	servers         *servers
}

// build builds every part in dependency order (see parts). Only the
// device manager starts here (its socket is claimed before any pod comes),
// and two passes reach the runtime: the PLEG's first relist, which seeds
// the loop, and the network GC's first pass, before any sandbox is made.
func (p *parts) build(ctx context.Context) error {
	for _, step := range []func(context.Context) error{
		p.buildState, p.buildDevices, p.buildPlugins, p.buildCollectors, p.buildWorkers, p.buildLoop,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	p.rt.CollectNetwork(ctx)
	var claims podresources.ClaimsProvider
	if p.dra != nil { // a nil *Manager must not become a non-nil interface
		claims = p.dra
	}
	p.servers = newServers(serversDeps{cfg: p.cfg, claimed: p.claimed, sources: p.sources, api: p.api(),
		claims: claims, registry: p.claimed.registry, log: p.log})
	return nil
}

// runners are the parts' Run, in the order they start: the loop last, once
// everything it drives runs.
func (p *parts) runners() []func(context.Context) {
	out := []func(context.Context){
		func(context.Context) { p.devices.Wait() },
		p.workers.Run,
		func(ctx context.Context) { p.rt.Run(ctx, p.relist.Trigger) },
		func(ctx context.Context) { p.relist.Run(ctx, p.plegEvents) },
		p.probes.Run,
		p.sources.Run,
	}
	if p.services != nil {
		out = append(out, p.services.Run)
	}
	if c := p.claimed.cluster; c != nil {
		out = append(out, c.Run)
	}
	if p.plugins != nil {
		out = append(out, p.runPlugins)
	}
	return append(out, p.imageGC.Run, p.containerGC.Run, p.evictions.Run, p.servers.Run, p.runLoop)
}

func (p *parts) runLoop(ctx context.Context) {
	p.log.Info("berth is running", "node", p.cfg.NodeName, "manifests", p.cfg.StaticPodPath,
		"runtime", p.rt.Endpoint, "rootDir", p.cfg.RootDir)
	p.loop.Run(ctx)
	p.log.Info("berth is stopping; pods keep running")
}

// abandon ends what build started when berth stops, or when its start-up
// failed before the parts ran: the pod workers stop, then the device
// manager. After a run it finds them stopped already.
func (p *parts) abandon(cancel context.CancelFunc) {
	if p.workers != nil {
		p.workers.Stop()
	}
	cancel()
	if p.devicesStarted {
		p.devices.Wait()
	}
}

// buildState builds the pods' status table, the record of evicted pods and
// the prober, the loop's view and the link to the pod workers.
func (p *parts) buildState(context.Context) error {
	cfg, log := p.cfg, p.log
	p.statuses = status.NewManager()
	terminal, problems, err := status.OpenTerminalStore(filepath.Join(cfg.RootDir, terminalPodsDir), p.clk.Now())
	if err != nil {
		return err
	}
	p.terminal = terminal
	for _, pr := range problems {
		log.Error("a record of an evicted pod is corrupt; set aside", "err", pr)
		p.recorder.NodeEvent(v1.EventTypeWarning, reasonTerminalRecordCorrupt, pr.Error())
	}
	p.probes, err = prober.NewManager(probe.NewRunner(p.rt.CRI, probeUserAgent), p.statuses, p.recorder, p.clk,
		p.claimed.registry, filepath.Join(cfg.RootDir, "probes", "state.json"), log)
	if err != nil {
		return fmt.Errorf("probes: %w", err)
	}
	p.view = newPodView(p.statuses, p.clk, cfg.RootDir)
	p.link = newWorkerLink()
	return nil
}

// buildDevices builds and starts the device manager. A pod holds its
// devices while it has a worker and is not terminal.
func (p *parts) buildDevices(ctx context.Context) error {
	link, statuses := p.link, p.statuses
	p.devices = devicemanager.New(devicemanager.Options{
		Dir: p.cfg.DevicePluginDir, Clock: p.clk, Log: p.log.With("component", "devicemanager"), Events: p.recorder,
		Active: func(uid types.UID) bool { return link.Has(uid) && !terminal(statuses, uid) },
		// Where the allocations are recovered from if the checkpoint is lost.
		Runtime: p.rt.CRI,
	})
	if err := p.devices.Start(ctx); err != nil {
		return fmt.Errorf("device manager: %w", err)
	}
	p.devicesStarted = true
	return nil
}

// buildCollectors builds the PLEG, the image and container GCs, the stats
// and the eviction manager.
func (p *parts) buildCollectors(context.Context) error {
	cfg, log, cri, reg := p.cfg, p.log, p.rt.CRI, p.claimed.registry
	plegMetrics, err := pleg.NewMetrics(reg)
	if err != nil {
		return err
	}
	p.relist = pleg.New(cri, cfg.RelistPeriod, p.clk, log, pleg.WithMetrics(plegMetrics))
	p.plegEvents = make(chan pleg.Event, 128)
	if err := registerRuntimeCollector(reg, p.relist.LastRelist); err != nil {
		return err
	}
	if p.imageGC, err = newImageGC(cfg, cri, p.view,
		lifecycle.RuntimeMountsImages(lifecycle.RuntimeInfo{Name: p.rt.Name, Version: p.rt.Version}),
		p.clk, p.recorder, reg, log); err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	state := podState{view: p.view, workers: p.link, statuses: p.statuses}
	if p.containerGC, err = newContainerGC(cfg, cri, state, p.clk, p.recorder, reg, log); err != nil {
		return fmt.Errorf("container GC: %w", err)
	}
	p.summary = newStatsProvider(cfg, cri, p.statuses, p.host.cgroups, p.clk, log)
	if p.csiVolumes != nil { // a nil *PodVolumes must not become a non-nil interface
		p.summary.SetMountedVolumes(p.csiVolumes)
	}
	p.evictions, err = newEvictionManager(cfg, p.summary, p.link, p.statuses, p.containerGC, p.imageGC,
		p.clk, p.recorder, reg, log)
	if err != nil {
		return fmt.Errorf("eviction manager: %w", err)
	}
	return nil
}

// buildWorkers builds the pod workers and the pod sources.
func (p *parts) buildWorkers(ctx context.Context) error {
	p.runtimeFeatures = readRuntimeFeatures(ctx, p.rt.CRI.Runtime(), lifecycle.RuntimeInfo{Name: p.rt.Name, Version: p.rt.Version}, p.rt.StateDir())
	p.userns, p.nodeFeatures = p.buildUserNamespaces(p.runtimeFeatures.admission)
	p.nodeFeatures.DynamicResources, p.nodeFeatures.DynamicResourcesWhy =
		lifecycle.DynamicResources(p.dra != nil, p.nodeFeatures.Runtime)
	p.nodeFeatures.CSIVolumes = p.csiVolumes != nil
	if !p.nodeFeatures.CSIVolumes {
		p.nodeFeatures.CSIVolumesWhy = "they need an API server (cluster mode): their claims and drivers live there"
	}
	deps, err := p.workerDeps()
	if err != nil {
		return err
	}
	// The kubelet checks the node's resolv.conf once, as its sync loop starts.
	if msg := kuberuntime.ResolvConfLimitWarning(p.cfg.DNS.ResolvConf, p.cfg.DNS.ClusterDomain); msg != "" {
		p.recorder.NodeEvent(v1.EventTypeWarning, kuberuntime.ReasonCheckLimitsForResolvConf, msg)
	}
	p.workers = newPodWorkers(ctx, deps, p.link)
	c := p.claimed.cluster
	p.sources = newPodSources(p.cfg.StaticPodPath, p.cfg.NodeName, p.cfg.FileCheckFrequency, p.claimed.store,
		c != nil, p.clk, p.log)
	return nil
}

// workerDeps are the pod workers' dependencies (podworker.Deps).
func (p *parts) workerDeps() (podworker.Deps, error) {
	cfg, log, cluster := p.cfg, p.log, p.claimed.cluster
	nodeHosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		log.Warn("reading the node's /etc/hosts failed; host-network pods get an empty one", "err", err)
	}
	metrics, err := podworker.NewMetrics(p.claimed.registry)
	if err != nil {
		return podworker.Deps{}, err
	}
	p.volumes = volume.NewManager(cfg.RootDir, volume.NewMounter(), log)
	if p.csiVolumes != nil { // a nil *PodVolumes must not become a non-nil interface
		p.volumes.SetCSI(p.csiVolumes)
	}
	deps := podworker.Deps{
		Runtime: p.rt.CRI, Relists: p.relist, Volumes: p.volumes, Status: p.statuses, Clock: p.clk, Log: log,
		NodeName: cfg.NodeName, HostIP: hostIP(cluster), PodLogsDir: cfg.PodLogsDir,
		ResolvConf: cfg.DNS.ResolvConf, ClusterDNS: cfg.DNS.ClusterDNSAddresses(), ClusterDomain: cfg.DNS.ClusterDomain,
		NodeIPs:         nodeIPs(cfg.Cluster.NodeIP),
		NodeAllocatable: p.host.allocatable, Memory: p.host.memory, NodeHosts: nodeHosts,
		RuntimeName:        p.rt.Name,
		SeccompProfileRoot: kuberuntime.SeccompProfileRoot(cfg.RootDir),
		// The status sync posts a deleted pod's final status, then forgets it.
		KeepDeletedStatuses: cluster != nil,
		Events:              p.recorder,
		Probes:              probeVerdicts{p.probes},
		Devices:             p.devices,
		UserNamespaces:      p.userns,
		DevicePluginWait:    cfg.DevicePluginWait,
		ParallelImagePulls:  cfg.Images.ParallelPulls(),
		ParallelPodStarts:   parallelPodStarts(goruntime.NumCPU()),
		Terminal:            p.terminal,
		Metrics:             metrics,
		NetworkNotReady:     networkNotReady(p.rt.CRI.Runtime(), p.rt.NetworkProblem),
	}
	if cluster != nil { // standalone pods refer to no API objects
		deps.Objects = podobjects.New(cluster.client, podobjects.Options{Clock: p.clk, Log: log.With("component", "podobjects")})
		// The services' environment variables (KUBERNETES_SERVICE_HOST...).
		p.services = podobjects.NewServices(cluster.client)
		deps.Services = p.services
	}
	if p.dra != nil { // a nil *Manager must not become a non-nil interface
		deps.DynamicResources = p.dra
	}
	if p.host.cgroups != nil { // a nil *Hierarchy must not become a non-nil interface
		deps.Cgroups = p.host.cgroups
	}
	// A checkpoint that cannot be read starts empty, as the kubelet's: the
	// running pods are then taken to run with their specs.
	if deps.Resize, err = resize.Open(filepath.Join(cfg.RootDir, resizeDir), p.clk); err != nil {
		log.Warn("the resize checkpoint could not be read; starting with none", "err", err)
	}
	p.resize = deps.Resize
	return deps, nil
}

// buildLoop builds the cluster node's parts and the sync loop, and seeds
// the loop with what the runtime already runs: it was admitted before
// berth restarted, and the loop must know it before it admits anything.
func (p *parts) buildLoop(ctx context.Context) error {
	cfg, devices, cluster, host := p.cfg, p.devices, p.claimed.cluster, p.host
	runtimeFeatures := p.runtimeFeatures.node
	var claims *claimsJanitor
	if p.dra != nil {
		claims = &claimsJanitor{dra: p.dra, log: p.log.With("component", "dra")}
	}
	var csiVolumes *csiJanitor
	if p.csiVolumes != nil {
		csiVolumes = &csiJanitor{volumes: p.csiVolumes, log: p.log.With("component", "csi")}
	}
	var changed func()
	if cluster != nil {
		p.buildCluster(ctx)
		changed = cluster.syncer.Trigger
	}
	preemptions, err := newPreemptionsMetric(p.claimed.registry)
	if err != nil {
		return err
	}
	p.loop = newSyncLoop(loopDeps{
		log: p.log, clk: p.clk, workers: p.workers, statuses: p.statuses, cgroups: host.cgroups,
		podDirs: p.volumes, userns: p.userns, probes: p.probes, devices: devices, claims: claims, csiVolumes: csiVolumes, terminal: p.terminal, events: p.recorder,
		node: func() *v1.Node {
			devCapacity, devAllocatable := admissionDeviceResources(devices.Resources())
			n := nodeObject(cfg.NodeName, host.capacity, host.allocatable, devCapacity, devAllocatable)
			// What the Node reports of its runtime: admission refuses
			// supplementalGroupsPolicy: Strict where it says no.
			n.Status.RuntimeHandlers, n.Status.Features = runtimeFeatures.Handlers, runtimeFeatures.Features
			if cluster != nil {
				n.Spec.Taints = cluster.taints()
			}
			return n
		},
		admitter: newAdmitter(lifecycle.NewPipeline(p.evictions, host.sysctls, p.nodeFeatures),
			lifecycle.Rejecter{Status: p.statuses, Events: p.recorder, Log: p.log}, p.statuses.Delete, p.resize),
		changed: changed, preemptions: preemptions, view: p.view,
		snapshots: p.sources.out, pleg: p.plegEvents,
	})
	seedCtx, cancelSeed := context.WithTimeout(ctx, apiCallTimeout)
	initial, err := p.relist.Seed(seedCtx)
	cancelSeed()
	if err != nil {
		return fmt.Errorf("listing the runtime's pods: %w", err)
	}
	p.loop.seed(initial)
	return nil
}

// buildCluster builds the cluster node's parts from what they read of the
// rest of berth.
func (p *parts) buildCluster(ctx context.Context) {
	cfg, host, rt, log := p.cfg, p.host, p.rt, p.log
	devices, evictions, relist, view, workers := p.devices, p.evictions, p.relist, p.view, p.workers
	info := nodeSystemInfo(rt.Name, rt.Version, cfg.BuildVersion) // fixed while berth runs
	runtimeFeatures := p.runtimeFeatures.node
	csiVolumes := p.csiVolumes
	p.claimed.cluster.build(p.clk, clusterDeps{
		observe: func() nodestatus.Observed {
			devCapacity, devAllocatable := devices.Capacity()
			n := nodeObject(cfg.NodeName, host.capacity, host.allocatable, devCapacity, devAllocatable)
			obs := nodestatus.Observed{
				Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable,
				Pressure: evictions.Conditions(),
				NotReady: notReady(ctx, rt.CRI.Runtime(), relist, n.Status.Capacity, rt.NetworkProblem),
				Info:     info,
				Images:   nodeImages(ctx, rt.CRI, log),
				Runtime:  runtimeFeatures,
			}
			if csiVolumes != nil {
				obs.VolumesInUse = csiVolumes.InUse()
			}
			return obs
		},
		statuses: view.pods, // rejected pods too
		changed:  p.statuses.Changed(),
		static:   view.staticPods,
		stopped:  func(uid types.UID) bool { return !workers.Has(uid) && !view.inRuntime(uid) },
		forget:   view.forgetStatus,
		podCIDR:  rt.SetPodCIDR,
	}, p.sources.fromAPI)
}

// api is what answers the local APIs.
func (p *parts) api() *apiSource {
	return &apiSource{view: p.view, statuses: p.statuses, pleg: p.relist, nodeName: p.cfg.NodeName, clk: p.clk,
		cri: p.rt.CRI, capacity: p.host.capacity, allocatable: p.host.allocatable, events: p.recorder,
		devices: p.devices, images: p.imageGC, evictions: p.evictions, stats: p.summary,
		statsMaxAge: p.cfg.Eviction.MonitoringInterval, probeMetrics: p.probes.Gatherer(),
		network: p.rt.NetworkProblem}
}

// nodeIPs are the node's configured IPs, as the kubelet's from --node-ip:
// none when it is not given.
func nodeIPs(nodeIP string) []string {
	if nodeIP == "" {
		return nil
	}
	return []string{nodeIP}
}
