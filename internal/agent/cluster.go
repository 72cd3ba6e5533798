package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/eventsink"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/nodestatus"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/statussync"
)

// The kubelet's client settings: enough for bursts of pod starts without
// being throttled by client-go's defaults (5 QPS).
const (
	clusterQPS   = 50
	clusterBurst = 100
	// leaseNamespace holds the nodes' heartbeat Leases.
	leaseNamespace = "kube-node-lease"
)

// clusterNode is what berth adds to itself when it joins a control plane.
type clusterNode struct {
	cfg     *config.Config
	log     *slog.Logger
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	pods    *podsource.APIServer
	events  *eventsink.Sink
	// nodeIP is the Node's InternalIP.
	nodeIP string
	// updater keeps the Node, syncer the pods' statuses; set by start.
	updater atomic.Pointer[nodestatus.Updater]
	syncer  atomic.Pointer[statussync.Syncer]
}

// syncSoon asks for a pass of the pods' statuses.
func (c *clusterNode) syncSoon() {
	if s := c.syncer.Load(); s != nil {
		s.Trigger()
	}
}

// taints are the Node's, for admission: NoExecute ones refuse pods that do
// not tolerate them.
func (c *clusterNode) taints() []v1.Taint {
	if u := c.updater.Load(); u != nil {
		return u.Taints()
	}
	return c.cfg.Cluster.RegisterWithTaints
}

// newClusterNode connects to the API server of the kubeconfig; nil when
// berth runs standalone. Nothing is sent before start.
func newClusterNode(cfg *config.Config, registry prometheus.Registerer, log *slog.Logger) (*clusterNode, error) {
	if !cfg.Cluster.Enabled() {
		return nil, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Cluster.KubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", cfg.Cluster.KubeconfigPath, err)
	}
	rc.QPS, rc.Burst = clusterQPS, clusterBurst
	rc.UserAgent = "berth/" + cfg.BuildVersion + " (" + goruntime.GOOS + "/" + goruntime.GOARCH + ")"
	requests, err := newAPIRequests(registry)
	if err != nil {
		return nil, err
	}
	rc.Wrap(requests.wrap)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", cfg.Cluster.KubeconfigPath, err)
	}
	// Only this node's pods: the Node authorizer allows nothing wider.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	pods, err := podsource.NewAPIServer(factory.Core().V1().Pods().Informer())
	if err != nil {
		return nil, err
	}
	nodeIP := cfg.Cluster.NodeIP
	if nodeIP == "" {
		nodeIP = network.HostIP()
	}
	return &clusterNode{cfg: cfg, log: log.With("component", "cluster"), client: client, factory: factory,
		pods: pods, events: eventsink.New(client, log.With("component", "events")), nodeIP: nodeIP}, nil
}

// fullClock is what the lease controller (clock.Clock) and the tickers
// (clock.WithTicker) both need: clock.RealClock, or a fake one.
type fullClock interface {
	clock.Clock
	clock.WithTicker
}

// clusterDeps is what the cluster node reads of the rest of berth.
type clusterDeps struct {
	observe  func() nodestatus.Observed
	statuses func() []v1.Pod
	changed  <-chan struct{}
	static   func() ([]*v1.Pod, bool)
	stopped  func(types.UID) bool
	forget   func(types.UID)
}

// start runs the pod informer, the node's registration and status, its
// Lease, the pods' statuses and mirror pods, and the events, each on bg
// until ctx is done. Snapshots of the API server's pods go to out.
func (c *clusterNode) start(ctx context.Context, bg *sync.WaitGroup, clk fullClock, d clusterDeps,
	out chan<- podsource.Snapshot) {
	cfg := c.cfg
	syncer := statussync.New(statussync.Options{
		Client: c.client, NodeName: cfg.NodeName, Pods: c.pods.Lister(),
		Statuses: d.statuses, Changed: d.changed, Static: d.static, Stopped: d.stopped, Forget: d.forget,
		Clock: clk, Log: c.log.With("component", "statussync"),
	})
	c.pods.OnChange(syncer.Trigger)
	c.syncer.Store(syncer)
	updater := nodestatus.NewUpdater(nodestatus.Options{
		Client:      c.client,
		ID:          c.identity(),
		Observe:     d.observe,
		Clock:       clk,
		Log:         c.log,
		UpdateEvery: cfg.Cluster.NodeStatusUpdateFrequency,
		ReportEvery: cfg.Cluster.NodeStatusReportFrequency,
		Register:    cfg.Cluster.RegisterNode,
	})
	c.updater.Store(updater)
	bg.Go(func() { updater.Run(ctx) })

	duration := cfg.Cluster.NodeLeaseDurationSeconds
	renew := time.Duration(duration) * time.Second / 4
	heartbeat := lease.NewController(clk, c.client, cfg.NodeName, duration, nil, renew,
		cfg.NodeName, leaseNamespace, c.ownLease)
	bg.Go(func() { heartbeat.Run(ctx) })

	bg.Go(func() { c.events.Run(ctx) })
	c.factory.Start(ctx.Done())
	bg.Go(func() { c.pods.Run(ctx, out) })
	bg.Go(func() { syncer.Run(ctx) })
	bg.Go(func() {
		<-ctx.Done()
		c.factory.Shutdown()
	})
}

// ownLease makes the Node the owner of its Lease, so that deleting the
// Node removes it (the kubelet's setNodeOwnerFunc).
func (c *clusterNode) ownLease(l *coordinationv1.Lease) error {
	if len(l.OwnerReferences) > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiCallTimeout)
	defer cancel()
	node, err := c.client.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		// Not registered yet: the next renewal tries again.
		return nil
	}
	l.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
	}}
	return nil
}

// identity is the Node's fixed part.
func (c *clusterNode) identity() nodestatus.Identity {
	cfg := c.cfg
	return nodestatus.Identity{
		Name:       cfg.NodeName,
		Labels:     cfg.Cluster.NodeLabels,
		Taints:     cfg.Cluster.RegisterWithTaints,
		ProviderID: cfg.Cluster.ProviderID,
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: c.nodeIP},
			{Type: v1.NodeHostName, Address: cfg.NodeName},
		},
		Port: cfg.Serving.Port,
	}
}

// nodeSystemInfo is the Node's nodeInfo: the machine's identity and
// versions, with berth's version in the kubelet's form.
func nodeSystemInfo(runtimeName, runtimeVersion, buildVersion string) v1.NodeSystemInfo {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return v1.NodeSystemInfo{
		MachineID:               read("/etc/machine-id"),
		SystemUUID:              read("/sys/class/dmi/id/product_uuid"),
		BootID:                  read("/proc/sys/kernel/random/boot_id"),
		KernelVersion:           read("/proc/sys/kernel/osrelease"),
		OSImage:                 osImage(read("/etc/os-release")),
		ContainerRuntimeVersion: runtimeName + "://" + runtimeVersion,
		KubeletVersion:          kubeletVersion(buildVersion),
		OperatingSystem:         goruntime.GOOS,
		Architecture:            goruntime.GOARCH,
	}
}

// kubeletVersion is the API version berth implements, marked as berth's
// build: kubectl shows it in the VERSION column.
func kubeletVersion(build string) string {
	if build == "" {
		build = "dev"
	}
	return "v1.37.0-berth+" + strings.NewReplacer("-", ".", "_", ".").Replace(build)
}

// osImage is PRETTY_NAME of /etc/os-release.
func osImage(osRelease string) string {
	for line := range strings.Lines(osRelease) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}
