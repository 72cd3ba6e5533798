// Package agent wires berth together and owns its start-up and shutdown
// order: runtime first (managed containerd, images, CNI), then the pieces
// that use it (pod workers, PLEG, pod source, local API), and the sync loop
// that routes events between them.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/adminapi"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/events"
	"github.com/berth-dev/berth/internal/kuberuntime"
	"github.com/berth-dev/berth/internal/lifecycle"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/nodestatus"
	"github.com/berth-dev/berth/internal/pleg"
	"github.com/berth-dev/berth/internal/podobjects"
	"github.com/berth-dev/berth/internal/podresources"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/podworker"
	"github.com/berth-dev/berth/internal/prober"
	"github.com/berth-dev/berth/internal/prober/probe"
	"github.com/berth-dev/berth/internal/server"
	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/volume"
)

// probeUserAgent is what berth's HTTP probes send, the kubelet's form.
const probeUserAgent = "kube-probe/1.37"

// terminalPodsDir, under the root dir, records the pods berth evicted.
const terminalPodsDir = "terminal-pods"

// reasonTerminalRecordCorrupt is the node event of a record of an evicted
// pod that could not be trusted.
const reasonTerminalRecordCorrupt = "TerminalPodRecordCorrupt"

// shutdownTimeout bounds each step of an orderly shutdown.
const shutdownTimeout = 30 * time.Second

// Run runs berth until ctx is done. Pods keep running after it returns.
// A start-up that ctx's end cut short fails with an error wrapping ctx's.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	return stopping(ctx, run(ctx, cfg, log))
}

func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	// Claim the API port first: a port in use must stop berth before it
	// starts anything.
	var apiListener net.Listener
	if cfg.ReadOnlyPort != 0 {
		addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.ReadOnlyPort)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("local API: %w", err)
		}
		defer ln.Close()
		apiListener = ln
	}
	var secureListener net.Listener
	if cfg.Serving.Port != 0 {
		addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.Serving.Port)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("secure API: %w", err)
		}
		defer ln.Close()
		secureListener = ln
	}
	for _, dir := range []string{cfg.RootDir, cfg.PodLogsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cluster, err := newClusterNode(cfg, registry, log)
	if err != nil {
		return err
	}
	var secure *secureAuth
	if secureListener != nil {
		var err error
		var client kubernetes.Interface // never a typed nil
		if cluster != nil {
			client = cluster.client
		}
		if secure, err = loadSecureAuth(cfg, client, time.Now(), log); err != nil {
			return err
		}
	}
	// Claim the admin socket as early, for the same reason: one that answers
	// means another berth runs on this root dir. The applied pods are read
	// before anything starts.
	admin, err := adminapi.Listen(ctx, adminapi.SocketPath(cfg.RootDir))
	if err != nil {
		return err
	}
	defer admin.Close()
	store, err := podsource.OpenStore(filepath.Join(cfg.RootDir, podsource.StoreDirName), cfg.NodeName,
		clock.RealClock{}, log.With("component", "local-pods"))
	if err != nil {
		return err
	}
	memory, err := nodeMemory(cfg, log)
	if err != nil {
		return err
	}
	capacity, allocatable, cgroups, err := nodeResources(cfg, log)
	if err != nil {
		return err
	}
	sysctls, err := nodeSysctls(cfg.AllowedUnsafeSysctls, log)
	if err != nil {
		return err
	}
	rt, err := startRuntime(ctx, cfg, registry, log)
	if err != nil {
		return err
	}
	defer rt.stop(log)

	clk := clock.RealClock{}
	dns, err := kuberuntime.HostDNSConfig("/etc/resolv.conf")
	if err != nil {
		log.Warn("reading the host's DNS configuration failed; pods get none", "err", err)
	}
	nodeHosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		log.Warn("reading the node's /etc/hosts failed; host-network pods get an empty one", "err", err)
	}
	statuses := status.NewManager()
	recorder := events.NewRecorder(clk, "berth", cfg.NodeName)
	if cluster != nil {
		recorder.SetSink(cluster.events.Put)
	}
	terminalPods, problems, err := status.OpenTerminalStore(filepath.Join(cfg.RootDir, terminalPodsDir), clk.Now())
	if err != nil {
		return err
	}
	for _, p := range problems {
		log.Error("a record of an evicted pod is corrupt; set aside", "err", p)
		recorder.NodeEvent(v1.EventTypeWarning, reasonTerminalRecordCorrupt, p.Error())
	}
	probes, err := prober.NewManager(probe.NewRunner(rt.cri, probeUserAgent), statuses, recorder, clk, registry,
		filepath.Join(cfg.RootDir, "probes", "state.json"), log)
	if err != nil {
		return fmt.Errorf("probes: %w", err)
	}
	var bg sync.WaitGroup
	defer bg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// workers is set below, before any pod is admitted.
	var workers *podworker.Workers
	devices := devicemanager.New(devicemanager.Options{
		Dir: cfg.DevicePluginDir, Clock: clk, Log: log.With("component", "devicemanager"), Events: recorder,
		Active: func(uid types.UID) bool { return workers != nil && workers.Has(uid) && !terminal(statuses, uid) },
		// Where the allocations are recovered from if the checkpoint is lost.
		Runtime: rt.cri,
	})
	if err := devices.Start(ctx); err != nil {
		return fmt.Errorf("device manager: %w", err)
	}
	bg.Go(devices.Wait)

	workerMetrics, err := podworker.NewMetrics(registry)
	if err != nil {
		return err
	}
	volumes := volume.NewManager(cfg.RootDir, volume.NewMounter(), log)
	deps := podworker.Deps{
		Runtime:            rt.cri,
		Volumes:            volumes,
		Status:             statuses,
		Clock:              clk,
		Log:                log,
		NodeName:           cfg.NodeName,
		HostIP:             hostIP(cluster),
		PodLogsDir:         cfg.PodLogsDir,
		DNS:                dns,
		NodeAllocatable:    allocatable,
		Memory:             memory,
		NodeHosts:          nodeHosts,
		RuntimeName:        rt.name,
		SeccompProfileRoot: kuberuntime.SeccompProfileRoot(cfg.RootDir),
		// The status sync posts a deleted pod's final status, then forgets it.
		KeepDeletedStatuses: cluster != nil,
		Events:              recorder,
		Probes:              probeVerdicts{probes},
		Devices:             devices,
		DevicePluginWait:    cfg.DevicePluginWait,
		ParallelImagePulls:  cfg.Images.ParallelPulls(),
		ParallelPodStarts:   parallelPodStarts(goruntime.NumCPU()),
		Terminal:            terminalPods,
		Metrics:             workerMetrics,
	}
	if cluster != nil { // standalone pods refer to no API objects
		deps.Objects = podobjects.New(cluster.client, podobjects.Options{Clock: clk, Log: log.With("component", "podobjects")})
		// The services' environment variables (KUBERNETES_SERVICE_HOST...).
		services := podobjects.NewServices(cluster.client)
		deps.Services = services
		bg.Go(func() { services.Run(ctx) })
	}
	if cgroups != nil { // a nil *Hierarchy must not become a non-nil interface
		deps.Cgroups = cgroups
	}
	// The loop gets its workers below; the garbage collectors read it
	// only once they run.
	plegMetrics, err := pleg.NewMetrics(registry)
	if err != nil {
		return err
	}
	relist := pleg.New(rt.cri, cfg.RelistPeriod, clk, log, pleg.WithMetrics(plegMetrics))
	if err := registerRuntimeCollector(registry, relist.LastRelist); err != nil {
		return err
	}
	loop := &syncLoop{
		cfg:      cfg,
		log:      log,
		clk:      clk,
		cgroups:  cgroups,
		podDirs:  volumes,
		probes:   probes,
		statuses: statuses,
		pleg:     relist,
		devices:  devices,
		terminal: terminalPods,
		events:   recorder,
		node: func() *v1.Node {
			devCapacity, devAllocatable := admissionDeviceResources(devices.Resources())
			n := nodeObject(cfg.NodeName, capacity, allocatable, devCapacity, devAllocatable)
			if cluster != nil {
				n.Spec.Taints = cluster.taints()
			}
			return n
		},
		preempted: make(chan preemption),
		desired:   desiredSet{},
		runtime:   map[types.UID]pleg.Event{},
	}
	if loop.preemptions, err = newPreemptionsMetric(registry); err != nil {
		return err
	}
	imageGC, err := newImageGC(cfg, rt.cri, loop, clk, recorder, registry, log)
	if err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	containerGC, err := newContainerGC(cfg, rt.cri, loop, clk, recorder, registry, log)
	if err != nil {
		return fmt.Errorf("container GC: %w", err)
	}
	summary := newStatsProvider(cfg, rt.cri, statuses, cgroups, clk, log)
	evictions, err := newEvictionManager(cfg, summary, func() *podworker.Workers { return workers }, statuses,
		containerGC, imageGC, clk, recorder, registry, log)
	if err != nil {
		return fmt.Errorf("eviction manager: %w", err)
	}
	loop.admitter = newAdmitter(lifecycle.NewPipeline(evictions, sysctls),
		lifecycle.Rejecter{Status: statuses, Events: recorder, Log: log}, statuses.Delete)
	workers = podworker.NewWorkers(ctx, deps)
	defer workers.Stop()
	loop.workers = workers

	// What the runtime already runs was admitted before berth restarted:
	// the loop must know it before it admits anything.
	seedCtx, cancelSeed := context.WithTimeout(ctx, apiCallTimeout)
	initial, err := relist.Seed(seedCtx)
	cancelSeed()
	if err != nil {
		return fmt.Errorf("listing the runtime's pods: %w", err)
	}
	for _, ev := range initial {
		loop.runtime[ev.UID] = ev
	}
	networkGC, err := newNetworkGC(cfg, rt, recorder.NodeEvent, log)
	if err != nil {
		return err
	}
	if networkGC != nil {
		// No sandbox is in creation before the loop starts. A containerd
		// berth adopted may have had one of the dead berth's in flight, but
		// that call's context ended with its connection, which fails the
		// creation at its next step (CNI plugin, container, task) long before
		// this start-up got here; a creation that failed cleans up what it
		// can itself, and what it leaves (a masquerade chain whose DEL found
		// no interface) is exactly what this pass is for.
		networkGC.Collect(ctx, true)
		bg.Go(func() { networkGC.Run(ctx) })
	}
	plegEvents := make(chan pleg.Event, 128)
	bg.Go(func() { relist.Run(ctx, plegEvents) })
	if reap := rt.shimReaper(clk, log); reap != nil {
		bg.Go(func() { reap(ctx) })
	}
	startLogRotation(ctx, &bg, cfg, rt, clk, log)
	bg.Go(func() { rt.supervise(ctx, watchRestarts(networkGC, recorder.NodeEvent)) })
	bg.Go(func() { probes.Run(ctx) })
	if rt.watchEvents != nil {
		bg.Go(func() { rt.watchEvents(ctx, relist.Trigger) })
	}
	static := make(chan podsource.Snapshot, 1)
	source := podsource.NewDir(cfg.StaticPodPath, cfg.NodeName, cfg.FileCheckFrequency, clk, log)
	bg.Go(func() {
		if err := source.Run(ctx, static); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("manifest source stopped", "dir", cfg.StaticPodPath, "err", err)
		}
	})
	// The pods of `berth apply` join the static pods in the one snapshot
	// the sync loop reads, once both sources have sent theirs.
	applied := make(chan podsource.Snapshot, 1)
	bg.Go(func() { store.Run(ctx, applied) })
	merge := podsource.NewMerge(store.Dir(), log)
	snapshots := make(chan podsource.Snapshot, 1)
	if cluster == nil {
		bg.Go(func() { merge.Run(ctx, static, applied, snapshots) })
	} else {
		// The API server's pods join the node's own.
		local := make(chan podsource.Snapshot, 1)
		fromAPI := make(chan podsource.Snapshot, 1)
		bg.Go(func() { merge.Run(ctx, static, applied, local) })
		bg.Go(func() { podsource.JoinCluster(ctx, local, fromAPI, snapshots, log) })
		loop.changed = cluster.syncSoon
		info := nodeSystemInfo(rt.name, rt.version, cfg.BuildVersion) // fixed while berth runs
		cluster.start(ctx, &bg, clk, clusterDeps{
			observe: func() nodestatus.Observed {
				devCapacity, devAllocatable := devices.Capacity()
				n := nodeObject(cfg.NodeName, capacity, allocatable, devCapacity, devAllocatable)
				return nodestatus.Observed{
					Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable,
					Pressure: evictions.Conditions(),
					NotReady: notReady(ctx, rt.cri.Runtime(), loop.pleg, n.Status.Capacity),
					Info:     info,
					Images:   nodeImages(ctx, rt, log),
				}
			},
			statuses: loop.pods, // rejected pods too
			changed:  statuses.Changed(),
			static:   loop.staticPods,
			stopped:  func(uid types.UID) bool { return !workers.Has(uid) && !loop.inRuntime(uid) },
			forget:   loop.forgetStatus,
		}, fromAPI)
	}
	bg.Go(func() {
		if err := adminapi.Serve(ctx, admin, adminapi.NewHandler(store, merge, cfg.NodeName, log,
			adminapi.WithStreaming(server.NewStreamingHandler(&apiSource{loop: loop}, rt.cri, log)),
			adminapi.WithLogs(server.NewLogsHandler(&apiSource{loop: loop, cri: rt.cri}, log)),
			adminapi.WithProfiling()), log); err != nil {
			log.Error("admin API stopped", "socket", admin.Addr().String(), "err", err)
		}
	})
	bg.Go(func() { imageGC.Run(ctx) })
	bg.Go(func() { containerGC.Run(ctx) })
	bg.Go(func() { evictions.Run(ctx) })
	bg.Go(func() {
		sock := filepath.Join(cfg.PodResourcesDir, podresources.SocketName)
		srv := podresources.NewServer(activePods{statuses}, devices)
		if err := podresources.Serve(ctx, sock, srv, log); err != nil {
			log.Error("pod-resources API stopped", "socket", sock, "err", err)
		}
	})
	api := &apiSource{loop: loop, cri: rt.cri, capacity: capacity, allocatable: allocatable, events: recorder,
		devices: devices, images: imageGC, evictions: evictions, stats: summary}
	if apiListener != nil {
		srv := server.New(apiListener.Addr().String(), api, registry, log)
		bg.Go(func() {
			if err := srv.Serve(ctx, apiListener); err != nil {
				log.Error("local API stopped", "err", err)
			}
		})
	}
	if secureListener != nil {
		srv := server.NewSecure(secureListener.Addr().String(), api, registry,
			server.NewStreamingHandler(api, rt.cri, log), secure.auth, secure.tls,
			log.With("api", "secure"))
		bg.Go(func() {
			if err := srv.Serve(ctx, secureListener); err != nil {
				log.Error("secure API stopped", "err", err)
			}
		})
	}
	log.Info("berth is running", "node", cfg.NodeName, "manifests", cfg.StaticPodPath,
		"runtime", rt.endpoint, "rootDir", cfg.RootDir)
	loop.run(ctx, snapshots, plegEvents)
	log.Info("berth is stopping; pods keep running")
	return nil
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
func nodeImages(ctx context.Context, rt *runtimeHandle, log *slog.Logger) []v1.ContainerImage {
	ctx, cancel := context.WithTimeout(ctx, apiCallTimeout)
	defer cancel()
	images, err := rt.cri.ListImages(ctx)
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
