package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/adminapi"
	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

const (
	// busyboxRef names the busybox image the harness imports.
	busyboxRef = "berth.local/busybox:bench"
	// nodeName is the berth's node name: static pods are named after it.
	nodeName = "bench"
	// The agents a comparison runs, as the report names them.
	agentBerth         = "berth"
	agentKubelet       = "kubelet"
	agentBerthExternal = "berth (external)"
)

// staticPodName is the name berth gives the pod of manifest name: the
// kubelet's, with the node's name appended.
func staticPodName(name string) string { return name + "-" + nodeName }

// NodeOptions say how to run the berth under test.
type NodeOptions struct {
	BinDir  string // holds berth and berth-pause
	Busybox string // a static busybox binary, packaged as the workload image
	MaxPods int
	// ExtraArgs go to `berth run` after the harness's own, e.g.
	// --log-level=debug or a --config to compare.
	ExtraArgs []string
	// KeepLog, when set, receives berth's log when the node is removed.
	KeepLog string
	// ExternalRuntime runs berth on a containerd the harness starts
	// (--container-runtime-endpoint) rather than on its managed one.
	ExternalRuntime bool
}

// externalCNINetwork is the CNI network of the containerd the harness
// starts for berth on an external runtime endpoint.
const externalCNINetwork = "bench-berth-ext"

// node is one berth on its own root dir, managed containerd, ports, pod
// network and cgroup root, and the harness's direct CRI connection to that
// containerd (for the floor and for the runtime's own timestamps).
type node struct {
	opts       NodeOptions
	root       string
	manifests  string
	port       int
	bridge     string
	cidr       string
	cgroupRoot string
	cmd        *exec.Cmd
	exited     chan struct{}
	logFile    *os.File
	cri        *runtime.Service
	http       *http.Client
	admin      *http.Client
	// ext is the external containerd, when opts.ExternalRuntime, and
	// runtimeMetrics where it serves its metrics (host:port).
	ext            *containerd.Managed
	runtimeMetrics string
}

// startNode starts berth and waits until its API answers and its
// containerd takes CRI calls.
func startNode(ctx context.Context, opts NodeOptions) (*node, error) {
	root, err := os.MkdirTemp("/tmp", "berth-bench-") // short: unix socket paths are limited
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &node{
		opts:       opts,
		root:       root,
		manifests:  filepath.Join(root, "manifests"),
		port:       port,
		bridge:     fmt.Sprintf("bbench%04x", rand.IntN(0xffff)),
		cidr:       fmt.Sprintf("10.%d.0.0/20", 64+rand.IntN(64)), // 4,094 pod IPs
		cgroupRoot: fmt.Sprintf("/berth-bench-%08x", rand.Uint32()),
		http:       &http.Client{Timeout: 30 * time.Second},
	}
	sock := adminapi.SocketPath(root)
	n.admin = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	if err := n.start(ctx); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func (n *node) start(ctx context.Context) error {
	for _, d := range []string{n.manifests, filepath.Join(n.root, "images")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	img, err := imagebuild.BusyboxImage(n.opts.Busybox)
	if err != nil {
		return fmt.Errorf("build the busybox image from %s: %w", n.opts.Busybox, err)
	}
	if err := imagebuild.WriteTarball(filepath.Join(n.root, "images", "busybox.tar"), busyboxRef, img); err != nil {
		return err
	}
	n.logFile, err = os.Create(filepath.Join(n.root, "berth.log"))
	if err != nil {
		return err
	}
	n.cmd = exec.Command(filepath.Join(n.opts.BinDir, "berth"), "run",
		"--root-dir", n.root,
		"--node-name", nodeName,
		"--pod-manifest-path", n.manifests,
		"--read-only-port", strconv.Itoa(n.port),
		"--pod-cidr", n.cidr,
		"--cni-bridge", n.bridge,
		"--cgroup-root", n.cgroupRoot,
		"--pause-binary", filepath.Join(n.opts.BinDir, "berth-pause"),
		"--device-plugin-dir", filepath.Join(n.root, "device-plugins"),
		"--pod-resources-dir", filepath.Join(n.root, "pod-resources"),
		"--pod-logs-dir", filepath.Join(n.root, "pod-logs"),
		"--max-pods", strconv.Itoa(n.opts.MaxPods),
		"--logging-format", "json",
	)
	endpoint := "unix://" + filepath.Join(n.root, "containerd", "containerd.sock")
	if n.opts.ExternalRuntime {
		if n.runtimeMetrics, err = localAddress(); err != nil {
			return err
		}
		if n.ext, err = n.externalRuntime().start(ctx); err != nil {
			return err
		}
		endpoint = n.ext.Endpoint()
		n.cmd.Args = append(n.cmd.Args, "--container-runtime-endpoint", endpoint)
	}
	n.cmd.Args = append(n.cmd.Args, n.opts.ExtraArgs...)
	n.cmd.Stdout, n.cmd.Stderr = n.logFile, n.logFile
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start berth: %w", err)
	}
	n.exited = make(chan struct{})
	go func() {
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	err = poll(ctx, 2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		select {
		case <-n.exited:
			return false, fmt.Errorf("berth exited during start-up:\n%s", n.logTail())
		default:
		}
		_, err := n.get(ctx, "/healthz")
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("berth's API: %w", err)
	}
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n.cri, err = runtime.Dial(dialCtx, endpoint)
	if err != nil {
		return fmt.Errorf("connect to berth's containerd: %w", err)
	}
	return nil
}

// berthPid is the berth process; containerdPid its managed containerd.
func (n *node) berthPid() int { return n.cmd.Process.Pid }

func (n *node) agent() string {
	if n.opts.ExternalRuntime {
		return agentBerthExternal
	}
	return agentBerth
}

// externalRuntime is the containerd and pod network of berth on an
// external runtime endpoint: below the node's root dir, apart from where
// berth's managed containerd would be.
func (n *node) externalRuntime() harnessRuntime {
	return harnessRuntime{
		root: filepath.Join(n.root, "external"), network: externalCNINetwork, bridge: n.bridge, cidr: n.cidr,
		binDir: n.opts.BinDir, busybox: n.opts.Busybox, metricsAddress: n.runtimeMetrics,
	}
}

func (n *node) scrapeRuntime(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	return scrapeRuntime(ctx, n.http, n.runtimeMetrics)
}

func (n *node) podName(manifest string) string { return staticPodName(manifest) }
func (n *node) agentPid() int                  { return n.berthPid() }
func (n *node) criService() *runtime.Service   { return n.cri }
func (n *node) dir() string                    { return n.root }

func (n *node) containerdPid() (int, error) {
	if n.ext != nil {
		if pid := n.ext.Pid(); pid > 1 {
			return pid, nil
		}
		return 0, errors.New("the external containerd has no pid")
	}
	data, err := os.ReadFile(filepath.Join(n.root, "containerd", "containerd.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("containerd.pid holds %q", data)
	}
	return pid, nil
}

// shimPids are the runtime shims of this node's containerd.
func (n *node) shimPids() []int {
	return pidsWithArg("containerd-shim", n.root+"/")
}

func (n *node) get(ctx context.Context, path string) ([]byte, error) {
	return getBody(ctx, n.http, fmt.Sprintf("http://127.0.0.1:%d%s", n.port, path))
}

func getBody(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// pods is berth's /pods.
func (n *node) pods(ctx context.Context) ([]v1.Pod, error) {
	body, err := n.get(ctx, "/pods")
	if err != nil {
		return nil, err
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode /pods: %w", err)
	}
	return list.Items, nil
}

// metrics is berth's /metrics.
func (n *node) metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	return n.scrape(ctx, "/metrics")
}

func (n *node) scrape(ctx context.Context, path string) (map[string]*dto.MetricFamily, error) {
	body, err := n.get(ctx, path)
	if err != nil {
		return nil, err
	}
	return parseMetrics(body)
}

// parseMetrics parses a scrape with Prometheus' own parser.
func parseMetrics(body []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(body))
}

// profile writes a CPU profile of berth over d to path, from the admin
// socket's pprof.
func (n *node) profile(ctx context.Context, d time.Duration, path string) error {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	body, err := getBody(ctx, n.admin, fmt.Sprintf("http://berth/debug/pprof/profile?seconds=%d", int(d.Seconds())))
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// heapProfile writes berth's heap profile to dir/name, if dir is set.
func (n *node) heapProfile(ctx context.Context, dir, name string) error {
	if dir == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, err := getBody(ctx, n.admin, "http://berth/debug/pprof/heap")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), body, 0o644)
}

// profileInBackground profiles berth for d into dir/name, if dir is set;
// the channel tells when it is done.
func (n *node) profileInBackground(ctx context.Context, dir string, d time.Duration, name string) <-chan error {
	if dir == "" {
		return closedDone()
	}
	done := make(chan error, 1)
	go func() { done <- n.profile(ctx, d, filepath.Join(dir, name)) }()
	return done
}

// writeManifest drops a manifest in atomically, as an editor's rename would.
func (n *node) writeManifest(name, content string) error {
	return writeManifestIn(n.root, n.manifests, name, content)
}

// writeManifestIn writes a manifest under tmpDir and renames it into dir:
// the node never reads half a file.
func writeManifestIn(tmpDir, dir, name, content string) error {
	tmp := filepath.Join(tmpDir, "."+name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// clearManifests removes every manifest and waits until berth has removed
// every sandbox of its containerd: the next phase starts on an empty node.
func (n *node) clearManifests(ctx context.Context, timeout time.Duration) error {
	return clearManifestsIn(ctx, n.manifests, n.cri, timeout)
}

// clearManifestsIn removes every manifest of dir and waits until the node
// has removed every sandbox of cri's runtime.
func clearManifestsIn(ctx context.Context, dir string, cri *runtime.Service, timeout time.Duration) error {
	if err := removeManifests(dir); err != nil {
		return err
	}
	return waitNoSandboxes(ctx, cri, timeout)
}

func removeManifests(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func waitNoSandboxes(ctx context.Context, cri *runtime.Service, timeout time.Duration) error {
	return poll(ctx, timeout, 200*time.Millisecond, func() (bool, error) {
		sbs, err := cri.ListPodSandboxes(ctx, nil)
		return err == nil && len(sbs) == 0, nil
	})
}

// close stops berth and removes everything the node made on the host:
// its sandboxes, its containerd, mounts, cgroups, bridge and root dir.
func (n *node) close() error {
	var errs []error
	// SIGKILL leaves berth's containerd running, so the sandboxes can be
	// removed through it (a graceful stop would stop containerd too).
	if n.cmd != nil && n.cmd.Process != nil && n.cmd.Process.Pid > 0 {
		_ = syscall.Kill(n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
	if n.cri != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		sbs, err := n.cri.ListPodSandboxes(ctx, nil)
		errs = append(errs, err)
		for _, sb := range sbs {
			errs = append(errs, n.cri.StopPodSandbox(ctx, sb.Id), n.cri.RemovePodSandbox(ctx, sb.Id))
		}
		cancel()
		n.cri.Close()
	}
	if n.ext != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		errs = append(errs, n.ext.Stop(ctx))
		cancel()
	} else if pid, err := n.containerdPid(); err == nil {
		hostclean.Stop(pid, 10*time.Second)
	}
	for _, pid := range pidsWithArg("", n.root+"/") {
		if pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// A process the runtime lost (a runc init of an exec probe that timed
	// out, whose shim is gone) would keep its pod's cgroup.
	if hostclean.KillCgroupProcs(n.cgroupRoot) {
		time.Sleep(200 * time.Millisecond) // the kernel empties a cgroup once its processes are reaped
	}
	errs = append(errs, hostclean.UnmountUnder(n.root), hostclean.RemoveCgroups(n.cgroupRoot))
	_ = exec.Command("ip", "link", "del", n.bridge).Run() // exists only once a bridge pod ran
	// The managed containerd caches its CNI results outside the root dir.
	rc := cnigc.ResultCache{Dir: cnigc.DefaultResultsDir, Network: "berth", IPAMDir: filepath.Join(n.root, "cni", "ipam")}
	_, err := rc.RemoveOwned()
	errs = append(errs, err)
	if n.opts.ExternalRuntime {
		errs = append(errs, n.externalRuntime().removeNetwork())
	}
	if n.logFile != nil {
		n.logFile.Close()
	}
	if n.opts.KeepLog != "" {
		if data, err := os.ReadFile(filepath.Join(n.root, "berth.log")); err == nil {
			errs = append(errs, os.WriteFile(n.opts.KeepLog, data, 0o644))
		}
	}
	errs = append(errs, os.RemoveAll(n.root))
	return errors.Join(errs...)
}

func (n *node) logTail() string {
	data, _ := os.ReadFile(filepath.Join(n.root, "berth.log"))
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// poll calls f every interval until it reports done, returns an error, or
// timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := f()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
