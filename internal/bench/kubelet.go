package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

// kubeletCNINetwork is the CNI network of the kubelet's containerd: berth's
// conflist (network.ConfList), under a name of its own.
const kubeletCNINetwork = "bench-kubelet"

// KubeletOptions say how to run the upstream kubelet under test.
type KubeletOptions struct {
	Kubelet string // the kubelet binary (test/cluster builds v1.36.3)
	BinDir  string // holds berth-pause, packaged as the sandbox image
	Busybox string // a static busybox binary, packaged as the workload image
	// Containerd is the containerd the harness starts for the kubelet;
	// "" is containerd from PATH, as berth's managed one. Its directory's
	// shim and runc come first in its PATH.
	Containerd string
	MaxPods    int
	// ExtraArgs go to the kubelet after the harness's own.
	ExtraArgs []string
	// KeepLog, when set, receives the kubelet's log when the node is
	// removed.
	KeepLog string
}

// kubeletNode is the upstream kubelet in standalone mode (static pods, no
// API server) on a root dir, ports, cgroup root, containerd and bridge
// network of its own: the same kind of node the harness makes of berth.
// One at a time on a host: the kubelet's device plugin socket has a fixed
// path.
type kubeletNode struct {
	opts      KubeletOptions
	root      string // the harness's dir: containerd, CNI, the kubelet's root dir and log
	manifests string
	port      int // read-only port
	// runtimeMetrics is where its containerd serves metrics (host:port).
	runtimeMetrics string
	bridge         string
	cidr           string
	cgroupRoot     string
	ctrd           *containerd.Managed
	cmd            *exec.Cmd
	exited         chan struct{}
	logFile        *os.File
	cri            *runtime.Service
	http           *http.Client
	// What the host had before the kubelet started, for close to undo
	// only what the kubelet added or changed.
	chainsBefore  map[chainKey]bool
	sysctlsBefore map[string]string
	fixed         *fixedPaths
}

// startKubeletNode starts a containerd with the pause and busybox images
// and a bridge network, then the kubelet on it, and waits until the
// kubelet's /healthz and /pods answer.
func startKubeletNode(ctx context.Context, opts KubeletOptions) (*kubeletNode, error) {
	if err := executableFile(opts.Kubelet); err != nil {
		return nil, fmt.Errorf("kubelet options: Kubelet: %w", err)
	}
	if opts.MaxPods <= 0 {
		opts.MaxPods = 110
	}
	root, err := os.MkdirTemp("/tmp", "berth-bench-kl-") // short: unix socket paths are limited
	if err != nil {
		return nil, err
	}
	n := &kubeletNode{
		opts:       opts,
		root:       root,
		manifests:  filepath.Join(root, "manifests"),
		bridge:     fmt.Sprintf("bbenchk%04x", rand.IntN(0xffff)),
		cidr:       fmt.Sprintf("10.%d.0.0/20", 128+rand.IntN(64)), // not berth's 10.64-127
		cgroupRoot: fmt.Sprintf("/berth-bench-kubelet-%08x", rand.Uint32()),
		http:       &http.Client{Timeout: 30 * time.Second},
	}
	if err := n.start(ctx); err != nil {
		return nil, errors.Join(err, n.close())
	}
	return n, nil
}

func executableFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

func (n *kubeletNode) start(ctx context.Context) error {
	var err error
	// Recorded first: close undoes only what came after.
	if n.chainsBefore, err = kubeChains(ctx); err != nil {
		return err
	}
	if n.sysctlsBefore, err = readSysctls(); err != nil {
		return err
	}
	fixed, err := recordFixedPaths()
	if err != nil {
		return err
	}
	n.fixed = &fixed
	if err := os.MkdirAll(n.manifests, 0o755); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n.cri, err = runtime.Dial(dialCtx, n.ctrd.Endpoint()); err != nil {
		return fmt.Errorf("connect to the kubelet's containerd: %w", err)
	}
	return nil
}

// startContainerd starts the kubelet's containerd, as a user would run one
// for a kubelet, with berth's bridge conflist and the images imported.
func (n *kubeletNode) startContainerd(ctx context.Context) error {
	var err error
	if n.runtimeMetrics, err = localAddress(); err != nil {
		return err
	}
	n.ctrd, err = n.runtime().start(ctx)
	return err
}

// runtime is the kubelet's containerd and pod network.
func (n *kubeletNode) runtime() harnessRuntime {
	return harnessRuntime{
		root: n.root, network: kubeletCNINetwork, bridge: n.bridge, cidr: n.cidr,
		binary: n.opts.Containerd, binDir: n.opts.BinDir, busybox: n.opts.Busybox,
		metricsAddress: n.runtimeMetrics,
	}
}

// freePorts returns k distinct free ports.
func freePorts(k int) ([]int, error) {
	var out []int
	for len(out) < k {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// startKubelet writes the kubelet's config and starts it, named after the
// harness's node, so that its static pods have berth's names.
func (n *kubeletNode) startKubelet(ctx context.Context) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	n.port = ports[0]
	cfg, err := kubeletConfig(kubeletParams{
		root: n.root, manifests: n.manifests, cgroupRoot: n.cgroupRoot, endpoint: n.ctrd.Endpoint(),
		readOnlyPort: ports[0], port: ports[1], healthzPort: ports[2], maxPods: n.opts.MaxPods,
	})
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(n.root, "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	if n.logFile, err = os.Create(filepath.Join(n.root, "kubelet.log")); err != nil {
		return err
	}
	// No --kubeconfig: standalone. Its root dir (made a shared mount of
	// its own at start) and certificates stay under the harness's dir.
	n.cmd = exec.Command(n.opts.Kubelet,
		"--config", cfgPath,
		"--root-dir", filepath.Join(n.root, "kubelet"),
		"--cert-dir", filepath.Join(n.root, "pki"),
		"--hostname-override", nodeName,
		"-v", "2",
	)
	n.cmd.Args = append(n.cmd.Args, n.opts.ExtraArgs...)
	n.cmd.Stdout, n.cmd.Stderr = n.logFile, n.logFile
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start the kubelet: %w", err)
	}
	n.exited = make(chan struct{})
	go func() {
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[2])
	err = poll(ctx, 2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		select {
		case <-n.exited:
			return false, fmt.Errorf("the kubelet exited during start-up:\n%s", n.logTail())
		default:
		}
		if _, err := getBody(ctx, n.http, healthz); err != nil {
			return false, nil
		}
		_, err := n.pods(ctx)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the kubelet's API: %w\n%s", err, n.logTail())
	}
	return nil
}

func (n *kubeletNode) agent() string                  { return agentKubelet }
func (n *kubeletNode) podName(manifest string) string { return staticPodName(manifest) }
func (n *kubeletNode) agentPid() int                  { return n.cmd.Process.Pid }
func (n *kubeletNode) criService() *runtime.Service   { return n.cri }
func (n *kubeletNode) dir() string                    { return n.root }

func (n *kubeletNode) containerdPid() (int, error) {
	if pid := n.ctrd.Pid(); pid > 1 {
		return pid, nil
	}
	return 0, errors.New("the kubelet's containerd has no pid")
}

// shimPids are the runtime shims of the kubelet's containerd.
func (n *kubeletNode) shimPids() []int {
	return pidsWithArg("containerd-shim", n.root+"/")
}

// pods is the kubelet's /pods on its read-only port.
func (n *kubeletNode) pods(ctx context.Context) ([]v1.Pod, error) {
	body, err := getBody(ctx, n.http, fmt.Sprintf("http://127.0.0.1:%d/pods", n.port))
	if err != nil {
		return nil, err
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode the kubelet's /pods: %w", err)
	}
	return list.Items, nil
}

func (n *kubeletNode) scrape(ctx context.Context, path string) (map[string]*dto.MetricFamily, error) {
	body, err := getBody(ctx, n.http, fmt.Sprintf("http://127.0.0.1:%d%s", n.port, path))
	if err != nil {
		return nil, err
	}
	return parseMetrics(body)
}

func (n *kubeletNode) scrapeRuntime(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	return scrapeRuntime(ctx, n.http, n.runtimeMetrics)
}

func (n *kubeletNode) writeManifest(name, content string) error {
	return writeManifestIn(n.root, n.manifests, name, content)
}

// clearManifests removes every manifest and waits until the kubelet has
// dropped their pods and stopped every sandbox, then removes the stopped
// sandboxes itself: the kubelet removes a gone pod's sandbox only at its
// next container GC (every minute), and the next phase must start on an
// empty runtime, as berth's does.
func (n *kubeletNode) clearManifests(ctx context.Context, timeout time.Duration) error {
	if err := removeManifests(n.manifests); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	err := poll(ctx, timeout, 200*time.Millisecond, func() (bool, error) {
		pods, err := n.pods(ctx)
		if err != nil || len(pods) > 0 {
			return false, nil
		}
		sbs, err := n.cri.ListPodSandboxes(ctx, nil)
		if err != nil {
			return false, nil
		}
		return !slices.ContainsFunc(sbs, func(sb *runtimeapi.PodSandbox) bool {
			return sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
		}), nil
	})
	if err != nil {
		return fmt.Errorf("the kubelet's pods and ready sandboxes: %w", err)
	}
	// The kubelet may be removing the same pods' containers meanwhile
	// (containerd: "container is already in removing state"), so a
	// removal that fails is tried again until none is left; the last
	// failure is the error if the deadline passes.
	var lastErr error
	err = poll(ctx, max(time.Until(deadline), 10*time.Second), 200*time.Millisecond, func() (bool, error) {
		left, err := n.removeStoppedSandboxes(ctx)
		if err != nil {
			lastErr = err
		}
		return err == nil && left == 0, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("%w: %w", err, lastErr)
	}
	return err
}

// removeStoppedSandboxes removes every sandbox of the kubelet's runtime,
// none of which may be ready, and returns how many there were. A sandbox
// that keeps a running task (containerd 1.6 with 500 pods: its CRI marked
// a container exited whose task ran on, so it neither stops nor goes) has
// its processes killed, for the next try to remove it: no pod is left on
// the node, so whatever runs in its pod cgroups is a stray.
func (n *kubeletNode) removeStoppedSandboxes(ctx context.Context) (int, error) {
	sbs, err := n.cri.ListPodSandboxes(ctx, nil)
	if err != nil {
		return 0, err
	}
	var errs []error
	stray := false
	for _, sb := range sbs {
		// NotFound: the kubelet's GC got there first.
		if err := n.cri.RemovePodSandbox(ctx, sb.Id); err != nil && status.Code(err) != codes.NotFound {
			errs = append(errs, fmt.Errorf("remove the stopped sandbox %s: %w", sb.Id, err))
			stray = stray || status.Code(err) == codes.FailedPrecondition
		}
	}
	if stray {
		hostclean.KillCgroupProcs(n.cgroupRoot)
	}
	return len(sbs), errors.Join(errs...)
}

func (n *kubeletNode) logTail() string {
	data, _ := os.ReadFile(filepath.Join(n.root, "kubelet.log"))
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// close stops the kubelet and removes everything the node made: its pods
// (through the CRI, before containerd goes), containerd, mounts, cgroups,
// the bridge and the CNI's cached results, the iptables chains the kubelet
// made, the kernel tunables it changed, its socket and log links in fixed
// host dirs, and the root dir.
func (n *kubeletNode) close() error {
	var errs []error
	if n.cmd != nil && n.cmd.Process != nil {
		// The kubelet leaves its pods running when it stops, like berth
		// killed.
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	errs = append(errs, n.removeSandboxes(ctx))
	if n.ctrd != nil {
		errs = append(errs, n.ctrd.Stop(ctx))
	}
	for _, pid := range pidsWithArg("", n.root+"/") {
		if pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if hostclean.KillCgroupProcs(n.cgroupRoot) {
		time.Sleep(200 * time.Millisecond) // the kernel empties a cgroup once its processes are reaped
	}
	// The kubelet's root dir is itself a mount (made rshared), so the
	// mounts are those under the harness's dir, which holds it.
	errs = append(errs, hostclean.UnmountUnder(n.root), hostclean.RemoveCgroups(n.cgroupRoot))
	errs = append(errs, n.runtime().removeNetwork())
	if n.chainsBefore != nil {
		errs = append(errs, removeChainsAdded(ctx, n.chainsBefore))
	}
	if n.sysctlsBefore != nil {
		errs = append(errs, restoreSysctls(n.sysctlsBefore))
	}
	if n.fixed != nil {
		errs = append(errs, n.fixed.remove(n.root))
	}
	if n.logFile != nil {
		n.logFile.Close()
	}
	if n.opts.KeepLog != "" {
		if data, err := os.ReadFile(filepath.Join(n.root, "kubelet.log")); err == nil {
			errs = append(errs, os.WriteFile(n.opts.KeepLog, data, 0o644))
		}
	}
	errs = append(errs, os.RemoveAll(n.root))
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every sandbox of the kubelet's
// containerd, which stops and removes their containers and releases their
// addresses through the CNI.
func (n *kubeletNode) removeSandboxes(ctx context.Context) error {
	if n.cri == nil {
		if n.ctrd == nil {
			return nil
		}
		dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cri, err := runtime.Dial(dialCtx, n.ctrd.Endpoint())
		cancel()
		if err != nil {
			return fmt.Errorf("connect to the kubelet's containerd to remove its pods: %w", err)
		}
		n.cri = cri
	}
	defer n.cri.Close()
	sbs, err := n.cri.ListPodSandboxes(ctx, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range sbs {
		errs = append(errs, n.cri.StopPodSandbox(ctx, sb.Id))
	}
	// Removed as clearManifests removes them, stray tasks killed: a
	// sandbox left behind would keep its network (its NAT chain) too.
	err = poll(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		left, err := n.removeStoppedSandboxes(ctx)
		if err == nil && left == 0 {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		_, lastErr := n.removeStoppedSandboxes(ctx)
		errs = append(errs, err, lastErr)
	}
	return errors.Join(errs...)
}
