package bench

import (
	"context"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/runtime"
)

// nodeUnderTest is what the scenarios need of the node agent they
// measure, berth (node) or the upstream kubelet (kubeletNode), each on a
// containerd, root dir, cgroup root and pod network of its own.
type nodeUnderTest interface {
	// agent names it in the report: "berth" or "kubelet".
	agent() string
	// podName is the name the agent gives the static pod of a manifest's
	// metadata.name (both append the node's name).
	podName(manifest string) string
	writeManifest(name, content string) error
	// clearManifests removes every manifest and waits until no sandbox is
	// left in the node's runtime.
	clearManifests(ctx context.Context, timeout time.Duration) error
	// pods is the agent's /pods.
	pods(ctx context.Context) ([]v1.Pod, error)
	// scrape reads the agent's metrics at path (/metrics, /metrics/probes)
	// on its local port: both agents serve the kubelet's series there
	// (kubelet_runtime_operations_total, prober_probe_total).
	scrape(ctx context.Context, path string) (map[string]*dto.MetricFamily, error)
	// scrapeRuntime reads the metrics of a containerd the harness started
	// (the kubelet's, berth's external one); nil for berth's managed one,
	// which serves none.
	scrapeRuntime(ctx context.Context) (map[string]*dto.MetricFamily, error)
	// agentPid, containerdPid and shimPids are the processes whose CPU and
	// memory the scenarios read.
	agentPid() int
	containerdPid() (int, error)
	shimPids() []int
	// criService is the harness's own connection to the node's runtime.
	criService() *runtime.Service
	// dir is the node's own dir, removed with it: the harness's floor
	// pods keep their logs there.
	dir() string
	// close removes everything the node made on the host.
	close() error
}

var (
	_ nodeUnderTest = (*node)(nil)
	_ nodeUnderTest = (*kubeletNode)(nil)
)

// KubeletNode is the upstream kubelet under test, for the tests outside
// this package that check the harness can run it and clean up after it.
type KubeletNode struct{ n *kubeletNode }

// StartKubeletNode starts the kubelet with a containerd of its own; Close
// removes both and everything they made.
func StartKubeletNode(ctx context.Context, opts KubeletOptions) (*KubeletNode, error) {
	n, err := startKubeletNode(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &KubeletNode{n}, nil
}

// WriteManifest drops a static pod manifest into the kubelet's dir.
func (k *KubeletNode) WriteManifest(name, content string) error {
	return k.n.writeManifest(name, content)
}

// ClearManifests removes every manifest and waits until no sandbox is left.
func (k *KubeletNode) ClearManifests(ctx context.Context, timeout time.Duration) error {
	return k.n.clearManifests(ctx, timeout)
}

// Pods is the kubelet's /pods.
func (k *KubeletNode) Pods(ctx context.Context) ([]v1.Pod, error) { return k.n.pods(ctx) }

// PodName is the kubelet's name for the static pod of a manifest's name.
func (k *KubeletNode) PodName(manifest string) string { return k.n.podName(manifest) }

// Runtime is the harness's CRI connection to the kubelet's containerd.
func (k *KubeletNode) Runtime() *runtime.Service { return k.n.criService() }

// Pids are the kubelet's and its containerd's.
func (k *KubeletNode) Pids() (kubelet, containerd int, err error) {
	containerd, err = k.n.containerdPid()
	return k.n.agentPid(), containerd, err
}

// Host is what the node made on the host, for a test to check it is gone
// after Close: its dir (the kubelet's root dir and containerd's are below
// it), its cgroup root and its bridge.
func (k *KubeletNode) Host() (dir, cgroupRoot, bridge string) {
	return k.n.root, k.n.cgroupRoot, k.n.bridge
}

// LogTail is the end of the kubelet's log.
func (k *KubeletNode) LogTail() string { return k.n.logTail() }

// Close stops the kubelet and its containerd and removes everything they
// made.
func (k *KubeletNode) Close() error { return k.n.close() }
