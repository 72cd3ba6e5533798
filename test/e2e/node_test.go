package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/container"
	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/imagebuild"
	"github.com/berth-dev/berth/internal/runtime"
)

const (
	busyboxPath = "/bin/busybox"
	busybox     = imagebuild.BusyboxImageRef
	nodeName    = "e2e-node"
)

// node is one berth under test, with its own root dir, containerd, bridge,
// pod CIDR and API port. Cleanup removes everything it created.
type node struct {
	t         testing.TB
	root      string
	manifests string
	podLogs   string
	// devicePlugins and podResources stand in for /var/lib/kubelet's
	// device-plugins and pod-resources directories.
	devicePlugins string
	podResources  string
	port          int
	bridge        string
	cidr          string
	// cgroupRoot holds this node's kubepods, so tests never touch the
	// host's own /kubepods.
	cgroupRoot string
	extraArgs  []string
	// runtimeDir, when set, holds the containerd (with its shim and runc)
	// that berth manages: it comes first in berth's PATH.
	runtimeDir string
	// tmpfs is set when root is a tmpfs of its own (startNodeOnTmpfs).
	tmpfs   bool
	pid     int // berth's; 0 when not running
	exited  chan struct{}
	logFile *os.File
	cri     *runtime.Service
}

// startNode starts berth on a fresh root dir and waits until its API
// answers. extraArgs are added to berth run's flags.
func startNode(t testing.TB, extraArgs ...string) *node {
	t.Helper()
	return startNodeIn(t, "", extraArgs...)
}

// startNodeOnTmpfs starts berth with its root dir (so the node filesystem,
// and the managed containerd's image filesystem) on a tmpfs of the given
// size, e.g. "512m": disk pressure is then under the test's control.
func startNodeOnTmpfs(t testing.TB, size string, extraArgs ...string) *node {
	t.Helper()
	return startNodeIn(t, size, extraArgs...)
}

// podCIDRFromNode, among startNode's extra arguments, starts berth with no
// --pod-cidr: in cluster mode its pods then wait for the Node's spec.podCIDR.
// It is the harness's, never passed to berth.
const podCIDRFromNode = "(e2e: pod CIDR from the Node)"

func startNodeIn(t testing.TB, tmpfsSize string, extraArgs ...string) *node {
	t.Helper()
	return startNodeWithRuntime(t, tmpfsSize, suiteRuntimeDir, extraArgs...)
}

// startNodeWithRuntime starts berth managing the containerd of runtimeDir
// ("" for the host's, from PATH).
func startNodeWithRuntime(t testing.TB, tmpfsSize, runtimeDir string, extraArgs ...string) *node {
	t.Helper()
	cidr := fmt.Sprintf("10.213.%d.0/24", rand.IntN(250))
	if i := slices.Index(extraArgs, podCIDRFromNode); i >= 0 {
		extraArgs = slices.Delete(slices.Clone(extraArgs), i, i+1)
		cidr = "" // the test sets it to the Node's, for the clean-up
	}
	if tmpfsSize == "" && !setsDiskPolicy(extraArgs) {
		extraArgs = append(slices.Clone(extraArgs), quietDisk...)
	}
	root, err := os.MkdirTemp("/tmp", "berth-e2e-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	// Searchable, as berth makes a root dir of its own: a pod in a user
	// namespace reaches its root filesystem under it.
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatal(err)
	}
	if tmpfsSize != "" {
		if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size="+tmpfsSize+",mode=0755"); err != nil {
			os.Remove(root)
			t.Fatalf("mount a tmpfs on %s: %v", root, err)
		}
	}
	n := &node{
		t:             t,
		root:          root,
		manifests:     filepath.Join(root, "manifests"),
		podLogs:       filepath.Join(root, "pod-logs"),
		devicePlugins: filepath.Join(root, "device-plugins"),
		podResources:  filepath.Join(root, "pod-resources"),
		port:          freePort(t),
		bridge:        fmt.Sprintf("be2e%04x", rand.IntN(0xffff)),
		cidr:          cidr,
		cgroupRoot:    fmt.Sprintf("/berth-e2e-%08x", rand.Uint32()),
		extraArgs:     extraArgs,
		tmpfs:         tmpfsSize != "",
		runtimeDir:    runtimeDir,
	}
	t.Cleanup(n.cleanup)
	for _, d := range []string{n.manifests, filepath.Join(root, "images")} {
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
	n.start()
	return n
}

// setsDiskPolicy tells whether a test sets image GC or eviction itself.
// Every other node runs with quietDisk: its node and image filesystems are
// the test machine's disk, whose use is the machine's business (CI shares
// it with caches of many GiB), and the default thresholds (image GC from
// 85% used, eviction below 15% free) would remove busybox or evict pods in
// tests that check neither. The tests of image GC and eviction set their
// own thresholds, most on a tmpfs root of their own.
func setsDiskPolicy(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		for _, f := range []string{"--config", "--eviction-hard", "--image-gc-high-threshold"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				return true
			}
		}
		return false
	})
}

func (n *node) start() {
	t := n.t
	t.Helper()
	n.startQuiet()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-n.exited:
			n.pid = 0
			t.Fatalf("berth exited during start-up\n%s", n.logTail())
		default:
		}
		if _, err := n.get("/healthz"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("berth's API did not answer within 90s\n%s", n.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n.cri == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cri, err := runtime.Dial(ctx, n.criEndpoint())
		if err != nil {
			t.Fatalf("connect to berth's containerd: %v", err)
		}
		n.cri = cri
	}
}

// startQuiet launches berth with the node's flags and returns at once:
// start waits for its API, a test of start-up watches it itself. env is
// added to berth's environment. The command's ProcessState is set once
// n.exited is closed.
func (n *node) startQuiet(env ...string) *exec.Cmd {
	t := n.t
	t.Helper()
	f, err := os.OpenFile(filepath.Join(n.root, "berth.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n.logFile = f
	cmd := exec.Command(filepath.Join(bins, "berth"), "run",
		"--root-dir", n.root,
		"--pod-manifest-path", n.manifests,
		"--pod-logs-dir", n.podLogs,
		"--node-name", nodeName,
		"--read-only-port", strconv.Itoa(n.port),
		"--cni-bridge", n.bridge,
		"--pause-binary", filepath.Join(bins, "berth-pause"),
		"--file-check-frequency", "5s",
		"--log-level", "debug",
		"--cgroup-root", n.cgroupRoot,
		"--device-plugin-dir", n.devicePlugins,
		"--pod-resources-dir", n.podResources,
		// Its own, never the host's plugins_registry: a test that runs a
		// plugin gives its own directory (a later flag wins).
		"--plugin-registration-dir", filepath.Join(n.root, "plugins_registry"),
	)
	if n.cidr != "" {
		cmd.Args = append(cmd.Args, "--pod-cidr", n.cidr)
	}
	cmd.Args = append(cmd.Args, n.extraArgs...)
	cmd.Env = append(os.Environ(), env...)
	if n.runtimeDir != "" {
		cmd.Env = append(cmd.Env, "PATH="+n.runtimeDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start berth: %v", err)
	}
	n.pid = cmd.Process.Pid
	exited := make(chan struct{})
	n.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return cmd
}

// stop stops berth gracefully; pods keep running.
func (n *node) stop() {
	n.signal(syscall.SIGTERM)
}

// kill9 kills berth with SIGKILL, as a crash would.
func (n *node) kill9() {
	n.signal(syscall.SIGKILL)
}

func (n *node) signal(sig syscall.Signal) {
	if n.pid <= 0 { // never signal pid 0 or -1: that is a process group or everyone
		return
	}
	_ = syscall.Kill(n.pid, sig)
	select {
	case <-n.exited:
	case <-time.After(time.Minute):
		n.t.Errorf("berth (pid %d) did not exit within a minute of %v", n.pid, sig)
		_ = syscall.Kill(n.pid, syscall.SIGKILL)
		<-n.exited
	}
	n.pid = 0
	if n.logFile != nil {
		n.logFile.Close()
		n.logFile = nil
	}
}

// cleanup stops berth, removes every sandbox of this node's containerd,
// stops that containerd and removes what is left on the host: mounts, the
// bridge and the root dir.
func (n *node) cleanup() {
	t := n.t
	if t.Failed() {
		t.Logf("berth log (tail):\n%s", n.logTail())
	}
	// SIGKILL leaves berth's containerd running, so the sandboxes can be
	// removed through it (a graceful stop would stop containerd too).
	n.kill9()
	if n.cri != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sbs, err := n.cri.ListPodSandboxes(ctx, nil)
		if err != nil {
			t.Errorf("cleanup: list sandboxes: %v", err)
		}
		for _, sb := range sbs {
			// containerd 1.6 may answer "ttrpc: closed" for a container whose
			// shim connection is going down as it exits (a crash loop):
			// asked again, it finds the task gone.
			// NotFound: a removal berth had begun before it was killed
			// finished after the list; the sandbox is gone, as wanted.
			err := n.cri.StopPodSandbox(ctx, sb.Id)
			for try := 0; err != nil && !runtime.IsNotFound(err) && try < 3 && ctx.Err() == nil; try++ {
				time.Sleep(time.Second)
				err = n.cri.StopPodSandbox(ctx, sb.Id)
			}
			if runtime.IsNotFound(err) {
				continue
			}
			if err != nil {
				t.Errorf("cleanup: stop sandbox %s: %v", sb.Id, err)
			}
			if err := n.cri.RemovePodSandbox(ctx, sb.Id); err != nil && !runtime.IsNotFound(err) {
				t.Errorf("cleanup: remove sandbox %s: %v", sb.Id, err)
			}
		}
		cancel()
		n.cri.Close()
	}
	n.stopContainerd()
	killLeftovers(t, n.root)
	// A shim killed above leaves its container processes behind, in the
	// node's cgroups: they are leftovers too, and the host must lose them.
	if hostclean.KillCgroupProcs(n.cgroupRoot) {
		t.Errorf("cleanup: processes were still running in %s", n.cgroupRoot)
		time.Sleep(200 * time.Millisecond) // for the kernel to empty the cgroups
	}
	unmountUnder(t, n.root)
	removeCgroups(t, n.cgroupRoot)
	if err := exec.Command("ip", "link", "del", n.bridge).Run(); err != nil {
		// The bridge exists only once a non-host-network pod ran.
		t.Logf("cleanup: no bridge %s to delete", n.bridge)
	}
	// The managed containerd caches its CNI results outside the root dir;
	// a sandbox it never tore down (killed with it) leaves them.
	rc := cnigc.ResultCache{Dir: cnigc.DefaultResultsDir, Network: "berth", IPAMDir: filepath.Join(n.root, "cni", "ipam")}
	if removed, err := rc.RemoveOwned(); err != nil || removed > 0 {
		t.Logf("cleanup: removed %d cached CNI results of the node's sandboxes: %v", removed, err)
	}
	if n.cidr != "" {
		removeNATOf(t, n.cidr)
		removeMasqChain(t, n.cidr) // made with --cluster-cidr
	}
	if n.tmpfs {
		if err := syscall.Unmount(n.root, 0); err != nil {
			t.Errorf("cleanup: unmount the tmpfs at %s: %v", n.root, err)
		}
	}
	if err := os.RemoveAll(n.root); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// criEndpoint is the runtime berth runs pods on: the external one given
// with --container-runtime-endpoint, else berth's managed containerd.
func (n *node) criEndpoint() string {
	for i, a := range n.extraArgs {
		if v, ok := strings.CutPrefix(a, "--container-runtime-endpoint="); ok {
			return v
		}
		if a == "--container-runtime-endpoint" && i+1 < len(n.extraArgs) {
			return n.extraArgs[i+1]
		}
	}
	return "unix://" + filepath.Join(n.root, "containerd", "containerd.sock")
}

func (n *node) stopContainerd() {
	data, err := os.ReadFile(filepath.Join(n.root, "containerd", "containerd.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return
	}
	hostclean.Stop(pid, 10*time.Second)
}

func alive(pid int) bool { return hostclean.Alive(pid) }

// killLeftovers fails the test, and kills the processes, if anything still
// runs from this node's root dir (a shim or a container berth should have
// stopped).
func killLeftovers(t testing.TB, root string) {
	for _, p := range processesFrom(root) {
		t.Errorf("cleanup: process %d still runs from %s: %s", p.pid, root, p.cmdline)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// proc is a live process and its command line, NULs as blanks.
type proc struct {
	pid     int
	cmdline string
}

func (p proc) String() string { return fmt.Sprintf("%d: %s", p.pid, p.cmdline) }

// processesFrom lists the live processes, init and this one excepted,
// whose command line names a path under root.
func processesFrom(root string) []proc {
	var out []proc
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), root+"/") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid <= 1 || pid == os.Getpid() || !alive(pid) {
			continue
		}
		out = append(out, proc{pid: pid, cmdline: strings.ReplaceAll(string(data), "\x00", " ")})
	}
	return out
}

// removeCgroups removes the cgroup tree at root in every hierarchy. The
// pods are gone by now, so every directory must go.
func removeCgroups(t testing.TB, root string) {
	if err := hostclean.RemoveCgroups(root); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(t testing.TB, dir string) {
	if err := hostclean.UnmountUnder(dir); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

func (n *node) logTail() string {
	data, _ := os.ReadFile(filepath.Join(n.root, "berth.log"))
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	return string(data)
}

func (n *node) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", n.port, path) }

func (n *node) get(path string) ([]byte, error) {
	client := http.Client{Timeout: 5 * time.Second}
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

// pods returns berth's /pods.
func (n *node) pods() []v1.Pod {
	n.t.Helper()
	body, err := n.get("/pods")
	if err != nil {
		n.t.Fatalf("GET /pods: %v", err)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		n.t.Fatalf("decode /pods: %v", err)
	}
	return list.Items
}

// pod returns the pod with the static pod's full name (<name>-<node>), or nil.
func (n *node) pod(name string) *v1.Pod {
	for _, p := range n.pods() {
		if p.Name == name+"-"+nodeName && p.DeletionTimestamp == nil {
			return &p
		}
	}
	return nil
}

func (n *node) writeManifest(file, content string) {
	n.t.Helper()
	// Write then rename, as editors and config tools do: berth must never see
	// half a file.
	tmp := filepath.Join(n.manifests, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.manifests, file)); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) removeManifest(file string) {
	n.t.Helper()
	if err := os.Remove(filepath.Join(n.manifests, file)); err != nil {
		n.t.Fatal(err)
	}
}

// waitFor polls cond until it returns true or timeout passes; the last
// description cond gave is in the failure.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRunning waits until the pod is Running with every container ready.
func (n *node) waitRunning(name string, timeout time.Duration) *v1.Pod {
	n.t.Helper()
	var pod *v1.Pod
	waitFor(n.t, timeout, name+" running and ready", func() (bool, string) {
		pod = n.pod(name)
		if pod == nil {
			return false, "no such pod"
		}
		return pod.Status.Phase == v1.PodRunning && podReady(pod), describe(pod)
	})
	return pod
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func describe(p *v1.Pod) string {
	if p == nil {
		return "no such pod"
	}
	data, _ := json.Marshal(p.Status)
	return string(data)
}

// containers lists the runtime's containers of the pod with uid.
func (n *node) containers(uid string) []*runtimeapi.Container {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := n.cri.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{container.LabelPodUID: uid},
	})
	if err != nil {
		n.t.Fatalf("list containers: %v", err)
	}
	return cs
}

// sandboxes lists the runtime's sandboxes of the pod with uid.
func (n *node) sandboxes(uid string) []*runtimeapi.PodSandbox {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbs, err := n.cri.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{container.LabelPodUID: uid},
	})
	if err != nil {
		n.t.Fatalf("list sandboxes: %v", err)
	}
	return sbs
}

// exec runs cmd in the pod's container and returns its stdout.
func (n *node) exec(pod *v1.Pod, name string, cmd ...string) string {
	n.t.Helper()
	id := containerID(n.t, pod, name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stdout, stderr, code, err := n.cri.ExecSync(ctx, id, cmd, 10*time.Second)
	if err != nil || code != 0 {
		n.t.Fatalf("exec %v in %s: code %d, err %v, stderr %s", cmd, name, code, err, stderr)
	}
	return string(stdout)
}

// containerID returns the runtime ID of the named container from the pod's status.
func containerID(t testing.TB, pod *v1.Pod, name string) string {
	t.Helper()
	for _, cs := range append(append([]v1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.Name == name {
			_, id, ok := strings.Cut(cs.ContainerID, "://")
			if !ok {
				t.Fatalf("container %s has no ID yet: %s", name, describe(pod))
			}
			return id
		}
	}
	t.Fatalf("pod %s has no container %s", pod.Name, name)
	return ""
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

// berth runs the berth CLI against this node and returns its stdout.
func (n *node) berth(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "berth"), args...)
	// berth logs reads the log from the admin socket under the root dir.
	cmd.Env = append(os.Environ(), "BERTH_SERVER="+n.url(""), "BERTH_ROOT_DIR="+n.root)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("%v: %s", err, ee.Stderr)
	}
	return string(out), err
}

// removeNATOf removes what the nat table still holds of berth's network on
// cidr, the node's own: the bridge plugin keeps a sandbox's masquerade
// chain when its DEL finds no netns, and the node that would have
// collected it is gone.
func removeNATOf(t testing.TB, cidr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	save, err := cnigc.IPTables{}.SaveNAT(ctx)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	nat, err := cnigc.ParseNAT(save)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for id, h := range cnigc.Holdings(nat, nil, cnigc.Network{Name: "berth", PodCIDR: netip.MustParsePrefix(cidr)}) {
		if err := (cnigc.IPTables{}).Restore(ctx, cnigc.Script(h)); err != nil {
			t.Errorf("cleanup: nat rules of sandbox %s: %v", id, err)
			continue
		}
		t.Logf("cleanup: removed the nat rules of sandbox %s left on the node's CIDR", id)
	}
}
