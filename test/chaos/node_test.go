package chaos

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
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/devicemanager"
	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/test/deviceplugin"
)

const (
	busyboxPath = "/bin/busybox"
	busybox     = imagebuild.BusyboxImageRef
	nodeName    = "chaos-node"
)

// node is one berth under attack, with its own root dir, containerd, bridge,
// pod CIDR, cgroup root and API port. These are drawn from the global
// generator, not the run's seed: two runs of one seed side by side must
// not collide, and test/e2e (10.213.x, be2e*, /berth-e2e-*) never meets
// them either.
type node struct {
	t             testing.TB
	root          string
	manifests     string
	podLogs       string
	devicePlugins string
	podResources  string
	port          int
	bridge        string
	cidr          string
	cgroupRoot    string

	cmd     *exec.Cmd
	exited  chan struct{}
	logFile *os.File
	// logStart is the berth.log offset where the current berth's lines begin.
	logStart int64
	cri      *runtime.Service
	plugin   *deviceplugin.Plugin

	// devices caches each container's widgets (they never change), netns
	// each sandbox's network namespace, for the leak check at the end.
	devices map[string][]string
	netns   map[string]string
}

func newNode(t testing.TB) *node {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "berth-chaos-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	n := &node{
		t:             t,
		root:          root,
		manifests:     filepath.Join(root, "manifests"),
		podLogs:       filepath.Join(root, "pod-logs"),
		devicePlugins: filepath.Join(root, "device-plugins"),
		podResources:  filepath.Join(root, "pod-resources"),
		port:          freePort(t),
		bridge:        fmt.Sprintf("bchaos%04x", rand.IntN(0xffff)),
		cidr:          fmt.Sprintf("10.216.%d.0/24", rand.IntN(250)),
		cgroupRoot:    fmt.Sprintf("/berth-chaos-%08x", rand.Uint32()),
		devices:       map[string][]string{},
		netns:         map[string]string{},
	}
	t.Cleanup(n.cleanup)
	for _, d := range []string{n.manifests, n.devicePlugins, filepath.Join(root, "images")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, err := imagebuild.BusyboxImage(busyboxPath)
	if err != nil {
		t.Fatalf("build busybox image: %v", err)
	}
	if err := imagebuild.WriteTarball(filepath.Join(root, "images", "busybox.tar"), busybox, img); err != nil {
		t.Fatalf("write busybox image: %v", err)
	}
	return n
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// launch starts berth without waiting for it.
func (n *node) launch() error {
	if n.running() {
		return errors.New("berth is already running")
	}
	f, err := os.OpenFile(filepath.Join(n.root, "berth.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil {
		n.logStart = st.Size()
	}
	cmd := exec.Command(filepath.Join(bins, "berth"), "run",
		"--root-dir", n.root,
		"--pod-manifest-path", n.manifests,
		"--pod-logs-dir", n.podLogs,
		"--node-name", nodeName,
		"--read-only-port", strconv.Itoa(n.port),
		"--pod-cidr", n.cidr,
		"--cni-bridge", n.bridge,
		"--pause-binary", filepath.Join(bins, "berth-pause"),
		"--file-check-frequency", "5s",
		"--log-level", "debug",
		"--cgroup-root", n.cgroupRoot,
		"--device-plugin-dir", n.devicePlugins,
		"--pod-resources-dir", n.podResources,
	)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start berth: %w", err)
	}
	n.cmd, n.logFile = cmd, f
	exited := make(chan struct{})
	n.exited = exited
	go func() {
		_ = cmd.Wait() // reaps berth whoever stops it
		close(exited)
	}()
	return nil
}

func (n *node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// waitUp waits until berth's API answers; it fails if berth exits first.
func (n *node) waitUp(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !n.running() {
			return fmt.Errorf("berth exited during start-up: %s", n.lastError())
		}
		if _, err := n.get("/healthz"); err == nil {
			return n.dialCRI()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("berth's API did not answer within %s: %s", timeout, n.lastError())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *node) dialCRI() error {
	if n.cri != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cri, err := runtime.Dial(ctx, "unix://"+filepath.Join(n.root, "containerd", "containerd.sock"))
	if err != nil {
		return fmt.Errorf("connect to berth's containerd: %w", err)
	}
	n.cri = cri
	return nil
}

// signal sends sig to berth and waits for it to exit; SIGKILL follows
// after wait. It reports whether berth was running.
func (n *node) signal(sig syscall.Signal, wait time.Duration) bool {
	if !n.running() {
		n.closeLog()
		return false
	}
	pid := n.cmd.Process.Pid
	if pid > 1 { // never signal 0, -1 or init
		_ = syscall.Kill(pid, sig)
	}
	select {
	case <-n.exited:
	case <-time.After(wait):
		n.t.Logf("berth (pid %d) did not exit within %s of %v; killing it", pid, wait, sig)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-n.exited
	}
	n.closeLog()
	return true
}

func (n *node) kill9() { n.signal(syscall.SIGKILL, time.Minute) }

func (n *node) closeLog() {
	if n.logFile != nil {
		n.logFile.Close()
		n.logFile = nil
	}
}

// thisRunLog is the log of the current (or last) berth.
func (n *node) thisRunLog() string {
	f, err := os.Open(filepath.Join(n.root, "berth.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(n.logStart, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(f)
	return string(data)
}

// lastError is the last error-level line of the current berth's log, or
// its tail.
func (n *node) lastError() string {
	log := strings.TrimSpace(n.thisRunLog())
	lines := strings.Split(log, "\n")
	// berth's last word on a failed start is a plain line, not JSON.
	if last := lines[len(lines)-1]; last != "" && !strings.HasPrefix(last, "{") {
		return last
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], `"level":"ERROR"`) {
			return lines[i]
		}
	}
	if len(log) > 600 {
		log = log[len(log)-600:]
	}
	return log
}

// adopted reports whether the current berth adopted a running containerd.
func (n *node) adopted() bool {
	return strings.Contains(n.thisRunLog(), `"msg":"adopted running containerd"`)
}

func (n *node) containerdPid() int {
	data, err := os.ReadFile(filepath.Join(n.root, "containerd", "containerd.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return 0
	}
	return pid
}

func (n *node) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", n.port, path) }

func (n *node) get(path string) ([]byte, error) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(n.url(path))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}

func (n *node) getJSON(path string, v any) error {
	body, err := n.get(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// startPlugin runs the test device plugin with capacity widgets; it
// registers again by itself each time berth restarts.
func (n *node) startPlugin(capacity int) error {
	devs := make([]deviceplugin.Device, capacity)
	for i := range devs {
		devs[i] = deviceplugin.Device{ID: fmt.Sprintf("w%d", i)}
	}
	p, err := deviceplugin.New(deviceplugin.Config{
		Dir: n.devicePlugins, ResourceName: WidgetResource, SocketName: "widget.sock",
		Devices: devs, Logger: discardLogger(),
	})
	if err != nil {
		return err
	}
	// The plugin serves for as long as its context lives: the test's.
	if err := p.Start(n.t.Context()); err != nil {
		return fmt.Errorf("device plugin: %w", err)
	}
	n.plugin = p
	return nil
}

// putPod creates or replaces the slot's pod.
func (n *node) putPod(s Slot) error {
	if !s.Applied {
		tmp := filepath.Join(n.manifests, "."+s.FileName()+".tmp")
		if err := os.WriteFile(tmp, []byte(s.Manifest(busybox)), 0o644); err != nil {
			return err
		}
		// Renamed into place, as editors do: berth never sees half a file.
		return os.Rename(tmp, filepath.Join(n.manifests, s.FileName()))
	}
	file := filepath.Join(n.root, s.FileName())
	if err := os.WriteFile(file, []byte(s.Manifest(busybox)), 0o644); err != nil {
		return err
	}
	_, err := n.berth("apply", "-f", file)
	return err
}

// deletePod deletes the slot's pod.
func (n *node) deletePod(s Slot) error {
	if !s.Applied {
		return os.Remove(filepath.Join(n.manifests, s.FileName()))
	}
	_, err := n.berth("delete", "pod", s.Name())
	return err
}

// berth runs the berth CLI against this node.
func (n *node) berth(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "berth"), args...)
	cmd.Env = append(os.Environ(), "BERTH_SERVER="+n.url(""), "BERTH_ROOT_DIR="+n.root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("berth %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// observe reads berth's pods and device books and the runtime's
// containers and sandboxes.
func (n *node) observe() (Observation, error) {
	var obs Observation
	var list v1.PodList
	if err := n.getJSON("/pods", &list); err != nil {
		return obs, err
	}
	for _, p := range list.Items {
		obs.Pods = append(obs.Pods, podView(p))
	}
	var snap devicemanager.Snapshot
	if err := n.getJSON("/devices", &snap); err != nil {
		return obs, err
	}
	for _, a := range snap.Allocations {
		obs.Allocations = append(obs.Allocations, Allocation{PodUID: a.PodUID, Container: a.Container, Devices: a.DeviceIDs})
	}
	if err := n.observeRuntime(&obs); err != nil {
		return obs, err
	}
	return obs, nil
}

func podView(p v1.Pod) PodView {
	v := PodView{Name: p.Name, UID: string(p.UID), Phase: string(p.Status.Phase), Deleting: p.DeletionTimestamp != nil,
		Reason: p.Status.Reason, Restarts: map[string]int32{}}
	v.Gen, _ = strconv.Atoi(p.Labels["chaos-gen"])
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			v.Ready = c.Status == v1.ConditionTrue
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		v.Restarts[cs.Name] = cs.RestartCount
	}
	return v
}

func (n *node) observeRuntime(obs *Observation) error {
	if n.cri == nil {
		return errors.New("no connection to containerd yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := n.cri.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs {
		v := ContainerView{ID: c.Id, PodUID: c.Labels[container.LabelPodUID], PodName: c.Labels[container.LabelPodName],
			Name: c.Metadata.GetName(), Running: c.State == runtimeapi.ContainerState_CONTAINER_RUNNING}
		if v.Running {
			if v.Devices, err = n.containerDevices(ctx, c.Id); err != nil {
				return err
			}
		}
		obs.Containers = append(obs.Containers, v)
	}
	sbs, err := n.cri.ListPodSandboxes(ctx, nil)
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	for _, s := range sbs {
		obs.Sandboxes = append(obs.Sandboxes, SandboxView{ID: s.Id, PodUID: s.Labels[container.LabelPodUID],
			Ready: s.State == runtimeapi.PodSandboxState_SANDBOX_READY})
		if _, seen := n.netns[s.Id]; !seen && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			n.netns[s.Id] = n.sandboxNetns(ctx, s.Id)
		}
	}
	return nil
}

func (n *node) containerDevices(ctx context.Context, id string) ([]string, error) {
	if d, ok := n.devices[id]; ok {
		return d, nil
	}
	resp, err := n.cri.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return nil, fmt.Errorf("container %s status: %w", id, err)
	}
	d, err := DevicesFromInfo(resp.Info["info"], deviceplugin.EnvDevices)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, err)
	}
	n.devices[id] = d
	return d, nil
}

// sandboxNetns is the sandbox's netns path; "" when it cannot be known.
func (n *node) sandboxNetns(ctx context.Context, id string) string {
	resp, err := n.cri.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return ""
	}
	path, _ := NetnsFromInfo(resp.Info["info"])
	return path
}
