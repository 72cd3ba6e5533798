package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/runtime"
	"github.com/berth-dev/berth/test/cluster"
)

// Node is a berth joined to the control plane, with everything of its own:
// root dir (containerd, images, logs), node name, address, secure port, pod
// CIDR, CNI bridge and cgroup root.
type Node struct {
	Name   string
	Root   string
	IP     string
	Port   int
	Log    string // berth's (and its containerd's) output
	bridge string
	cidr   string
	cgroup string
	cmd    *exec.Cmd
	exited chan struct{}
}

// nodeNet is the host side of the nodes' addresses: one address per node
// on the loopback device, out of 10.254.<random>.0/24. The API server
// refuses to proxy to loopback addresses (127.0.0.0/8), so the nodes cannot
// use 127.0.0.1 as the cluster-mode end-to-end tests do; an address that is
// not 127.x but lives on lo is reachable from this host only.
type nodeNet struct {
	ips []string
}

// planNodeNet picks n addresses.
func planNodeNet(n int) *nodeNet {
	r := rand.IntN(250)
	nn := &nodeNet{}
	for i := range n {
		nn.ips = append(nn.ips, fmt.Sprintf("10.254.%d.%d", r, i+1))
	}
	return nn
}

// add adds the addresses to lo; on error it removes those it added.
func (nn *nodeNet) add(ctx context.Context) error {
	for _, ip := range nn.ips {
		if err := ipCmd(ctx, "addr", "add", ip+"/32", "dev", "lo"); err != nil {
			nn.remove()
			return err
		}
	}
	return nil
}

func (nn *nodeNet) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ip := range nn.ips {
		_ = ipCmd(ctx, "addr", "del", ip+"/32", "dev", "lo") // best effort: cleanup goes on
	}
}

func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NodeConfig is what StartNode needs besides the control plane.
type NodeConfig struct {
	Name     string
	IP       string
	Index    int    // 0, 1...: picks the node's pod CIDR
	CIDRBase int    // third octet base of 10.215.x.0/24 pod CIDRs
	BerthBin string // directory of berth and berth-pause
	// Containerd is the directory of the containerd berth manages
	// (--containerd-binary: the shim and runc beside it come with it); ""
	// for the host's.
	Containerd string
	Images     []string  // tarballs linked into <root>/images
	Mirror     *Registry // registry.k8s.io's mirror; none if nil
	// ClusterDNS gives the pods CoreDNS's kube-dns Service as resolver.
	ClusterDNS bool
}

// StartNode starts a berth that joins cp as cfg.Name. It returns once the
// berth process runs; WaitReady waits for the Node. On error nothing of it
// is left behind.
func StartNode(ctx context.Context, cp *cluster.ControlPlane, cfg NodeConfig) (*Node, error) {
	root, err := os.MkdirTemp("/tmp", "berth-conf-") // short: socket paths are limited
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	n := &Node{
		Name:   cfg.Name,
		Root:   root,
		IP:     cfg.IP,
		Log:    filepath.Join(root, "berth.log"),
		bridge: fmt.Sprintf("bconf%04x", rand.IntN(0xffff)),
		cidr:   fmt.Sprintf("10.215.%d.0/24", cfg.CIDRBase+cfg.Index),
		cgroup: fmt.Sprintf("/berth-conf-%08x", rand.Uint32()),
	}
	if err := n.start(ctx, cp, cfg); err != nil {
		n.Cleanup()
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, cp *cluster.ControlPlane, cfg NodeConfig) error {
	if err := linkImages(cfg.Images, filepath.Join(n.Root, "images")); err != nil {
		return err
	}
	if err := writeRegistryHosts(n.Root, cfg.Mirror); err != nil {
		return err
	}
	kubeconfig, err := cp.NodeKubeconfig(n.Name)
	if err != nil {
		return err
	}
	if n.Port, err = kubeletPort(n.IP); err != nil {
		return err
	}
	log, err := os.OpenFile(n.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	state := stateArgs(n.Root, n.bridge, n.cgroup, cfg.Containerd)
	n.cmd = exec.Command(filepath.Join(cfg.BerthBin, "berth"), append([]string{"run"}, state...)...)
	n.cmd.Args = append(n.cmd.Args,
		"--node-name", n.Name,
		"--kubeconfig", kubeconfig,
		"--node-ip", n.IP,
		"--address", n.IP,
		"--port", strconv.Itoa(n.Port),
		"--read-only-port", "0", // only the secure API may listen beyond loopback
		"--client-ca-file", cp.KubeletClientCA(),
		"--pod-cidr", n.cidr,
		"--pause-binary", filepath.Join(cfg.BerthBin, "berth-pause"),
	)
	if cfg.ClusterDNS {
		// The first node watches the kubelet's plugins_registry, where the DRA
		// specs' driver pods (hostPath volumes of the kubelet's fixed paths)
		// register; the others watch their own, for two nodes on one host
		// cannot share a driver's sockets. The DRA passes run with the first
		// node alone schedulable (Pass.OneNode).
		if cfg.Index > 0 {
			n.cmd.Args = append(n.cmd.Args, "--plugin-registration-dir", filepath.Join(n.Root, "plugins_registry"))
		}
		n.cmd.Args = append(n.cmd.Args, "--cluster-dns", cluster.ClusterDNSIP, "--cluster-domain", cluster.ClusterDomain)
	}
	n.cmd.Stdout, n.cmd.Stderr = log, log
	// A group of its own: a terminal's Ctrl-C is for the suite, and the
	// node must serve until the suite has cleaned up.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := os.MkdirAll(filepath.Join(n.Root, "manifests"), 0o755); err != nil {
		return err
	}
	if err := writeOwner(n.Root, envOwner{ResetArgs: state}); err != nil {
		return err
	}
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start berth: %w", err)
	}
	n.exited = make(chan struct{})
	go func() {
		_ = n.cmd.Wait() // reaps berth whoever stops it
		close(n.exited)
	}()
	return nil
}

// stateArgs are the flags of `berth run` that say where a node's berth
// keeps what it makes, all of it under root but its cgroups and bridge:
// what `berth reset` needs to remove it, should the run be killed before
// its cleanup (reapDead).
func stateArgs(root, bridge, cgroup, containerdDir string) []string {
	args := []string{
		"--root-dir", root,
		"--pod-manifest-path", filepath.Join(root, "manifests"),
		"--pod-logs-dir", filepath.Join(root, "pod-logs"),
		"--device-plugin-dir", filepath.Join(root, "device-plugins"),
		"--pod-resources-dir", filepath.Join(root, "pod-resources"),
		"--cni-bridge", bridge,
		"--cgroup-root", cgroup,
	}
	if containerdDir != "" {
		args = append(args, "--containerd-binary", filepath.Join(containerdDir, "containerd"))
	}
	return args
}

// privateRegistry is where the image-pull specs run agnhost's
// fake-registry-server (a pod with hostPort 5000), by the name they pull
// from: e2e/framework/registry's SetupRegistry.
const privateRegistry = "localhost:5000"

// writeRegistryHosts gives the node's containerd its registry hosts (the
// config_path berth sets, <root>/containerd/certs.d): registry.k8s.io
// through the run's mirror, and the suite's private registry over plain
// HTTP, which is what it serves (containerd 1.7 and later fall back to
// HTTP for localhost by themselves; 1.6 needs it said).
func writeRegistryHosts(root string, mirror *Registry) error {
	if mirror != nil {
		if err := mirror.WriteMirrorConfig(root); err != nil {
			return err
		}
	}
	dir := filepath.Join(root, "containerd", "certs.d", privateRegistry)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("registry hosts: %w", err)
	}
	hosts := fmt.Sprintf("server = \"http://%s\"\n", privateRegistry)
	if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("registry hosts: %w", err)
	}
	return nil
}

// linkImages hard-links (else copies) the tarballs into dir.
func linkImages(files []string, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.Link(f, dst); err == nil {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("image %s: %w", f, err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("image %s: %w", f, err)
		}
	}
	return nil
}

// kubeletPort is 10250, the kubelet's port, when it is free on ip (some of
// the suite's helpers call nodes/<name>:10250/proxy whatever port the Node
// reports), else any free port.
func kubeletPort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "10250"))
	if err == nil {
		l.Close()
		return 10250, nil
	}
	return freePort(ip)
}

// freePort asks the kernel for a free port on ip.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("free port: not a TCP address")
	}
	return addr.Port, nil
}

// Exited reports whether berth has exited.
func (n *Node) Exited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// LogTail is the end of berth's log.
func (n *Node) LogTail(max int) string {
	data, _ := os.ReadFile(n.Log)
	return string(lastBytes(data, max))
}

// Cleanup stops berth and removes everything it left: its pods' sandboxes
// (through its containerd, which a SIGKILL of berth leaves running),
// containerd, leftover processes, mounts, cgroups, the bridge and the root
// dir. It keeps going past errors and returns them all.
func (n *Node) Cleanup() error {
	var errs []error
	if n.cmd != nil && n.cmd.Process != nil && !n.Exited() {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			errs = append(errs, fmt.Errorf("berth (pid %d) did not exit after SIGKILL", n.cmd.Process.Pid))
		}
	}
	errs = append(errs, n.removeSandboxes())
	n.stopContainerd()
	n.killLeftovers()
	if hostclean.KillCgroupProcs(n.cgroup) {
		time.Sleep(200 * time.Millisecond) // for the kernel to empty the cgroups
	}
	errs = append(errs, hostclean.UnmountUnder(n.Root), hostclean.RemoveCgroups(n.cgroup))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = ipCmd(ctx, "link", "del", n.bridge) // it exists only once a pod had a network
	// The managed containerd caches its CNI results outside the root dir.
	rc := cnigc.ResultCache{Dir: cnigc.DefaultResultsDir, Network: "berth", IPAMDir: filepath.Join(n.Root, "cni", "ipam")}
	_, err := rc.RemoveOwned()
	errs = append(errs, err)
	errs = append(errs, os.RemoveAll(n.Root))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean up node %s: %w", n.Name, err)
	}
	return nil
}

// removeSandboxes stops and removes every pod sandbox of the node's
// containerd, if it still answers.
func (n *Node) removeSandboxes() error {
	sock := filepath.Join(n.Root, "containerd", "containerd.sock")
	if _, err := os.Stat(sock); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cri, err := runtime.Dial(ctx, "unix://"+sock)
	if err != nil {
		return fmt.Errorf("connect to containerd: %w", err)
	}
	defer cri.Close()
	sbs, err := cri.ListPodSandboxes(ctx, nil)
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range sbs {
		if err := cri.StopPodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
		}
		if err := cri.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

func (n *Node) stopContainerd() {
	data, err := os.ReadFile(filepath.Join(n.Root, "containerd", "containerd.pid"))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 {
		hostclean.Stop(pid, 10*time.Second)
	}
}

// killLeftovers kills every process whose command line names the root
// dir: shims and whatever else containerd left.
func (n *Node) killLeftovers() { killNaming(n.Root) }

// killNaming kills every process whose command line names a path under
// dir, and waits a while for them to be gone.
func killNaming(dir string) {
	var killed []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), dir+"/") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid > 1 && pid != os.Getpid() && hostclean.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !slices.ContainsFunc(killed, hostclean.Alive) {
			return
		}
	}
}
