package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/certificate"
	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/eventsink"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/nodestatus"
	"github.com/berth-dev/berth/internal/podsource"
	"github.com/berth-dev/berth/internal/server"
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

// clusterNode is what berth adds to itself when it joins a control plane:
// the pod informer, the node's registration and status, its Lease, the
// pods' statuses and mirror pods, and the events. newClusterNode connects
// (nothing is sent yet); build makes its parts from the rest of berth,
// once the pod workers exist; Run runs them until ctx is done and returns
// once they have stopped.
type clusterNode struct {
	cfg     *config.Config
	log     *slog.Logger
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	pods    *podsource.APIServer
	events  *eventsink.Sink
	// certs is the client certificate (bootstrapped, rotated, or the
	// kubeconfig's as it is); serving the secure API's with
	// serverTLSBootstrap, else nil.
	certs   *certificate.Client
	serving *certificate.Serving
	// nodeIP is the Node's InternalIP.
	nodeIP string
	// Set by build: updater keeps the Node, syncer the pods' statuses,
	// heartbeat the Lease; out receives the API server's pods.
	updater   *nodestatus.Updater
	syncer    *statussync.Syncer
	heartbeat lease.Controller
	out       chan<- podsource.Snapshot
	podCIDR   func(string) error
}

// taints are the Node's, for admission: NoExecute ones refuse pods that do
// not tolerate them.
func (c *clusterNode) taints() []v1.Taint { return c.updater.Taints() }

// newClusterNode connects to the API server of the kubeconfig; nil when
// berth runs standalone. Nothing is sent before start.
func newClusterNode(cfg *config.Config, registry prometheus.Registerer, log *slog.Logger) (*clusterNode, error) {
	if !cfg.Cluster.Enabled() {
		return nil, nil
	}
	certs, err := certificate.NewClient(certificate.Options{
		KubeconfigPath: cfg.Cluster.KubeconfigPath,
		BootstrapPath:  cfg.Cluster.BootstrapKubeconfigPath,
		CertDir:        filepath.Join(cfg.RootDir, server.PKIDirName),
		NodeName:       cfg.NodeName,
		Rotate:         cfg.Cluster.RotateCertificates,
		Clock:          clock.RealClock{},
		Log:            log.With("component", "certificates"),
	})
	if err != nil {
		return nil, err
	}
	rc := certs.Config
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
	c := &clusterNode{cfg: cfg, log: log.With("component", "cluster"), client: client, factory: factory,
		pods: pods, events: eventsink.New(client, log.With("component", "events")), nodeIP: nodeIP, certs: certs}
	if cfg.Cluster.ServerTLSBootstrap {
		c.serving, err = certificate.NewServing(certificate.ServingOptions{
			CertDir:   filepath.Join(cfg.RootDir, server.PKIDirName),
			NodeName:  cfg.NodeName,
			Addresses: func() []v1.NodeAddress { return c.identity().Addresses },
			CertFile:  cfg.Serving.TLSCertFile,
			KeyFile:   cfg.Serving.TLSPrivateKeyFile,
			Client:    client,
			Log:       log.With("component", "certificates"),
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// setRecorder makes the certificates' failures node events.
func (c *clusterNode) setRecorder(record func(eventType, reason, message string)) {
	c.certs.SetRecorder(record)
	if c.serving != nil {
		c.serving.SetRecorder(record)
	}
}

// servingCertificate is the secure API's GetCertificate with
// serverTLSBootstrap, else nil.
func (c *clusterNode) servingCertificate() server.GetCertificate {
	if c == nil || c.serving == nil {
		return nil
	}
	return c.serving.GetCertificate
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
	// podCIDR takes the Node's spec.podCIDR (noderuntime's SetPodCIDR).
	podCIDR func(string) error
}

// build makes the cluster's parts from what they read of the rest of
// berth; snapshots of the API server's pods go to out.
func (c *clusterNode) build(clk fullClock, d clusterDeps, out chan<- podsource.Snapshot) {
	cfg := c.cfg
	c.syncer = statussync.New(statussync.Options{
		Client: c.client, NodeName: cfg.NodeName, Pods: c.pods.Lister(),
		Statuses: d.statuses, Changed: d.changed, Static: d.static, Stopped: d.stopped, Forget: d.forget,
		Clock: clk, Log: c.log.With("component", "statussync"),
	})
	c.pods.OnChange(c.syncer.Trigger)
	c.updater = nodestatus.NewUpdater(nodestatus.Options{
		Client:      c.client,
		ID:          c.identity(),
		Observe:     d.observe,
		Clock:       clk,
		Log:         c.log,
		UpdateEvery: cfg.Cluster.NodeStatusUpdateFrequency,
		ReportEvery: cfg.Cluster.NodeStatusReportFrequency,
		Register:    cfg.Cluster.RegisterNode,
	})
	duration := cfg.Cluster.NodeLeaseDurationSeconds
	renew := time.Duration(duration) * time.Second / 4
	c.heartbeat = lease.NewController(clk, c.client, cfg.NodeName, duration, nil, renew,
		cfg.NodeName, leaseNamespace, c.ownLease)
	c.out = out
	c.podCIDR = d.podCIDR
}

// Run runs the cluster's parts (see clusterNode); build first. Nothing is
// sent with the node's identity before it has a client certificate; the
// serving certificate is requested with it.
func (c *clusterNode) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.certs.Run(ctx) })
	if err := c.certs.Wait(ctx); err != nil {
		return
	}
	if c.serving != nil {
		wg.Go(func() { c.serving.Run(ctx) })
	}
	wg.Go(func() { c.updater.Run(ctx) })
	wg.Go(func() { c.heartbeat.Run(ctx) })
	wg.Go(func() { c.events.Run(ctx) })
	c.factory.Start(ctx.Done())
	wg.Go(func() { c.pods.Run(ctx, c.out) })
	wg.Go(func() { c.syncer.Run(ctx) })
	wg.Go(func() { watchPodCIDR(ctx, c.client, c.cfg.NodeName, c.podCIDR, c.log) })
	wg.Go(func() {
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
