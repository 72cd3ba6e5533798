package podworker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/cm"
	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/podobjects"
	"github.com/berth-dev/berth/internal/prober/probe"
	"github.com/berth-dev/berth/internal/resize"
	"github.com/berth-dev/berth/internal/status"
	"github.com/berth-dev/berth/internal/volume"
)

// Runtime is the slice of the CRI a pod worker drives; *runtime.Service
// implements it.
type Runtime interface {
	PodStatus(ctx context.Context, uid types.UID) (*container.PodStatus, error)
	RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (string, error)
	// SandboxStatus reads one sandbox: the one a sync just created, whose
	// IP the containers need.
	SandboxStatus(ctx context.Context, id string) (container.SandboxStatus, error)
	// ReadContainerStatus reads one container of the sandbox sandboxID:
	// one the sync just created, started or stopped.
	ReadContainerStatus(ctx context.Context, id, sandboxID string) (container.ContainerStatus, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
	ImageStatus(ctx context.Context, image string) (*runtimeapi.Image, error)
	PullImage(ctx context.Context, image string, sandbox *runtimeapi.PodSandboxConfig) (string, error)
	CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, gracePeriod int64) error
	RemoveContainer(ctx context.Context, id string) error
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error)
}

// AuthPuller is a Runtime that can pull with registry credentials (CRI
// PullImageRequest.Auth). Without it, a pull that has credentials from the
// pod's imagePullSecrets fails rather than silently going anonymous.
type AuthPuller interface {
	PullImageWithAuth(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error)
}

// Volumes prepares and removes a pod's volumes on the host.
type Volumes interface {
	Setup(ctx context.Context, pod *v1.Pod, opts volume.SetupOptions) (map[string]string, error)
	TearDown(ctx context.Context, uid types.UID) error
	ContainerDir(uid types.UID, name string) string
	PrepareSubPath(volumePath, subPath string) error
	WriteHostsFile(uid types.UID, content []byte) (string, error)
}

// UserNamespaces gives pods of hostUsers: false their ID ranges (package
// userns); nil on a node that gives none.
type UserNamespaces interface {
	PodUserNamespace(pod *v1.Pod) (*runtimeapi.UserNamespace, error)
	Release(uid types.UID)
}

// PodCgroups is the pod cgroup tree (package cm/hierarchy); nil when pods
// are not given cgroups of their own (cgroupsPerQOS false).
type PodCgroups interface {
	CgroupParent(pod *v1.Pod) string
	EnsurePod(pod *v1.Pod) (string, error)
	// RemovePod kills what is left in the pod's cgroup and removes it; it
	// returns the pids it killed.
	RemovePod(uid types.UID) (killed []int, _ error)
}

// DynamicResources prepares the devices of a pod's ResourceClaims through
// their DRA drivers (*dra.Manager is one); nil on a node without an API
// server, where admission refuses such pods.
type DynamicResources interface {
	// PrepareResources prepares the pod's claims not yet prepared; the
	// sandbox waits for it.
	PrepareResources(ctx context.Context, pod *v1.Pod) error
	// CheckResources says why the pod's claims could not be prepared now,
	// recording and calling nothing.
	CheckResources(ctx context.Context, pod *v1.Pod) error
	// UnpreparePod unprepares the claims no other pod uses once the pod's
	// containers are gone.
	UnpreparePod(ctx context.Context, uid types.UID) error
	// ContainerCDIDevices are the CDI devices of the claims c references.
	ContainerCDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error)
}

// Probes is the probe manager (package prober), seen from a pod worker.
type Probes interface {
	AddPod(pod *v1.Pod)
	StopLivenessAndStartup(pod *v1.Pod)
	RemovePod(pod *v1.Pod)
	// Ready and Started are the readiness and startup results of a
	// container that has such a probe.
	Ready(containerID string) bool
	Started(containerID string) bool
	// Failed names the probe ("liveness" or "startup") whose failure
	// condemned the container, or "".
	Failed(containerID string) string
}

// TerminalStore remembers the pods stopped for good (evicted, preempted)
// across restarts of berth; *status.TerminalStore is one.
type TerminalStore interface {
	Get(uid types.UID) (v1.PodStatus, bool)
	Put(uid types.UID, st v1.PodStatus) error
	Delete(uid types.UID) error
}

// Services are the cluster's Services, for the service environment
// variables of containers; *podobjects.Services is one.
type Services interface {
	// List returns the services of namespace, from a cache; they are
	// shared and must not be modified.
	List(namespace string) ([]*v1.Service, error)
	// HasSynced reports whether the services were all read once.
	HasSynced() bool
}

// EventRecorder records what happened to a pod, in the kubelet's words.
type EventRecorder interface {
	Event(pod *v1.Pod, eventType, reason, message string)
}

// NodeEventRecorder is an EventRecorder that also records events about the
// node (*events.Recorder is one); a recorder that is not one drops them.
type NodeEventRecorder interface {
	NodeEvent(eventType, reason, message string)
}

// Deps is what every worker shares. All of it is safe for concurrent use.
type Deps struct {
	Runtime Runtime
	// NetworkNotReady says why new pods off the host's network cannot get
	// an address (the kubelet's runtimeState.networkErrors); nil when no
	// check is wanted.
	NetworkNotReady func(ctx context.Context) error
	Volumes         Volumes
	Cgroups         PodCgroups
	Probes          Probes
	Devices         Devices
	// DynamicResources is nil on a node that prepares no ResourceClaims.
	DynamicResources DynamicResources
	UserNamespaces   UserNamespaces
	// Terminal keeps evicted pods evicted across restarts; nil keeps them
	// in memory only.
	Terminal TerminalStore
	// Objects reads the configMaps, secrets and service account tokens
	// that pods refer to (volumes, env, imagePullSecrets) from the API
	// server; nil on a standalone node, where such references are refused.
	// Leave it nil rather than set it to a nil pointer.
	Objects podobjects.Source
	// Services give containers the variables of the services their pod
	// sees (KUBERNETES_SERVICE_HOST...); nil on a standalone node, where
	// they get none. Leave it nil rather than set it to a nil pointer.
	Services   Services
	Events     EventRecorder
	Status     *status.Manager
	Clock      clock.WithTicker
	Log        *slog.Logger
	NodeName   string
	HostIP     string
	PodLogsDir string
	// ResolvConf is the node's resolver configuration file (resolvConf),
	// read for each sandbox as the kubelet does; empty means none.
	ResolvConf string
	// ClusterDNS and ClusterDomain are the cluster's DNS service addresses
	// and domain (clusterDNS, clusterDomain).
	ClusterDNS    []string
	ClusterDomain string
	// NodeIPs are the node's configured IPs (--node-ip), whose families
	// pick the local resolver of pods when ResolvConf is empty.
	NodeIPs []string
	// NodeAllocatable backs the downward API when a container sets no limit,
	// and its memory sizes the OOM score of burstable containers.
	NodeAllocatable v1.ResourceList
	// Memory is the node's memory policy (oom group, swap, huge pages).
	Memory cm.MemoryPolicy
	// NodeHosts is the node's /etc/hosts, the base of host-network pods' one.
	NodeHosts []byte
	// RuntimeName prefixes container IDs in the API status ("containerd").
	RuntimeName string
	// KeepDeletedStatuses keeps the final status of a pod the API server
	// deleted after the pod is gone from the runtime, for the status sync
	// to post before the pod's final deletion; the sync forgets it once the
	// API server no longer has the pod. Off without an API server.
	KeepDeletedStatuses bool
	// SeccompProfileRoot is where Localhost seccomp profiles are read
	// from: kuberuntime.SeccompProfileRoot of the root dir, as for the
	// kubelet. Empty refuses every Localhost profile.
	SeccompProfileRoot string
	// Resync is how often a worker syncs with no event (the kubelet's
	// syncFrequency).
	Resync time.Duration
	// Relists is the PLEG: a sync takes the status the last sync left
	// when the PLEG's last relist shows it unchanged (kept.go); nil reads
	// the runtime on every sync.
	Relists Relists
	// ParallelImagePulls bounds the image pulls in flight: 1 with
	// serializeImagePulls, else maxParallelImagePulls; 0 for no bound.
	ParallelImagePulls int
	// ParallelPodStarts bounds the pods starting at once (from creating
	// the sandbox to starting the first containers, not counting image
	// pulls); 0 for no bound. A runtime given hundreds of pods at once
	// thrashes: on 2 cores 500 at once made containerd take longer than
	// the CRI call timeout (2 min) for some; paced, the same pods are all
	// Running as soon, and each far sooner.
	ParallelPodStarts int
	// DevicePluginWait is how long a new pod waits for the plugin of a
	// device it needs before it is rejected.
	DevicePluginWait time.Duration
	// Metrics records syncs and pod starts; nil records nothing.
	Metrics *Metrics
	// Resize keeps the pods' allocated and actuated resources for
	// in-place resize; nil resizes nothing (a changed spec is ignored).
	Resize *resize.Manager
}

// Workers owns one worker per pod.
type Workers struct {
	deps        Deps
	backOff     *flowcontrol.Backoff
	pullBackOff *flowcontrol.Backoff
	// prepareBackOff paces the retries of a pod whose ResourceClaims
	// could not be prepared.
	prepareBackOff *flowcontrol.Backoff
	pullSlots      slots
	startSlots     slots
	httpHooks      *probe.Runner
	ctx            context.Context
	cancel         context.CancelFunc

	mu      sync.Mutex
	workers map[types.UID]*worker
	wg      sync.WaitGroup
}

// NewWorkers returns an empty set of workers whose goroutines live until
// Stop or until ctx is done.
func NewWorkers(ctx context.Context, deps Deps) *Workers {
	ctx, cancel := context.WithCancel(ctx)
	if deps.Resync == 0 {
		deps.Resync = time.Minute
	}
	return &Workers{
		deps:           deps,
		backOff:        NewBackOff(deps.Clock),
		pullBackOff:    NewBackOff(deps.Clock),
		prepareBackOff: flowcontrol.NewFakeBackOffWithJitter(retryAfterError, BackOffMax, deps.Clock, 0),
		pullSlots:      newSlots(deps.ParallelImagePulls),
		startSlots:     newSlots(deps.ParallelPodStarts),
		httpHooks:      probe.NewRunner(deps.Runtime, hookUserAgent),
		ctx:            ctx,
		cancel:         cancel,
		workers:        map[types.UID]*worker{},
	}
}

// Update hands the worker of pod.UID its (new) spec, starting the worker if
// there is none.
func (ws *Workers) Update(pod *v1.Pod) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.workers[pod.UID]
	if !ok {
		w = ws.startLocked(pod.UID, pod.Name, pod.Namespace)
	}
	w.setPod(pod)
}

// Kill tells the worker of uid to terminate its pod and exit. A pod with no
// worker (an orphan found in the runtime) gets one just for that.
func (ws *Workers) Kill(uid types.UID, name, namespace string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.workers[uid]
	if !ok {
		w = ws.startLocked(uid, name, namespace)
	}
	w.kill()
}

// Notify wakes the worker of uid, if any, to sync now.
func (ws *Workers) Notify(uid types.UID) {
	if w := ws.lookup(uid); w != nil {
		w.wake()
	}
}

// RuntimeChanged wakes the worker of uid, if any, for a PLEG event: a
// change in the pod's sandboxes or containers.
func (ws *Workers) RuntimeChanged(uid types.UID) {
	if w := ws.lookup(uid); w != nil {
		w.runtimeChange()
	}
}

// lookup returns the worker of uid, nil if none.
func (ws *Workers) lookup(uid types.UID) *worker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.workers[uid]
}

// Has reports whether uid has a worker.
func (ws *Workers) Has(uid types.UID) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	_, ok := ws.workers[uid]
	return ok
}

// Stop stops every worker and waits for them. Pods keep running: stopping
// berth must not stop its pods.
func (ws *Workers) Stop() {
	ws.cancel()
	ws.wg.Wait()
}

func (ws *Workers) startLocked(uid types.UID, name, namespace string) *worker {
	w := newWorker(ws, uid, name, namespace)
	ws.workers[uid] = w
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		w.run(ws.ctx)
	}()
	return w
}
