package reset

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/hostclean"
	"github.com/berth-dev/berth/internal/network"
	"github.com/berth-dev/berth/internal/runtime/containerd"
)

const (
	// probeTimeout bounds the dial of the admin socket.
	probeTimeout = time.Second
	// iptablesTimeout bounds one iptables command.
	iptablesTimeout = 30 * time.Second
	// criPluginDir is where containerd's CRI plugin keeps its sandboxes'
	// metadata, under containerd's root.
	criSandboxesDir = "io.containerd.grpc.v1.cri/sandboxes"
	// kubepods is the cgroup under the cgroup root that holds every pod
	// (cm.KubepodsCgroup).
	kubepods = "kubepods"
)

// netnsDirs are where containerd and the CNI tools name network
// namespaces (/var/run is a link to /run on current systems).
var netnsDirs = []string{"/run/netns", "/var/run/netns"}

// Inspect gathers the facts about what berth left for o on this host. It
// changes nothing.
func Inspect(ctx context.Context, o Options) (Facts, error) {
	var f Facts
	f.AdminSocketAnswers = socketAnswers(ctx, filepath.Join(o.RootDir, "berth.sock"))
	entries, err := os.ReadDir(o.RootDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	f.State, f.Foreign = ClassifyRootEntries(o, names)
	cdDir := filepath.Join(o.RootDir, "containerd")
	f.ContainerdPID = containerdPID(cdDir)
	_, err = os.Stat(filepath.Join(cdDir, "root"))
	f.ContainerdState = err == nil
	f.SandboxIDs = sandboxIDs(o)
	f.PodUIDs = dirNames(filepath.Join(o.RootDir, "pods"))
	f.Processes = processes(o)
	f.NetNS = podNetNS(f.Processes)
	f.Rules = berthRules(ctx, o.Network, f.SandboxIDs)
	f.CNICache = cniCache(o, f.SandboxIDs)
	for _, ns := range cachedNetNS(o, f.SandboxIDs) {
		if !slices.Contains(f.NetNS, ns) {
			f.NetNS = append(f.NetNS, ns)
		}
	}
	f.Bridge = isBridge(o.Bridge)
	if bridge, cidr := confListNetwork(o); cidr != "" {
		f.Masquerade = masquerade(ctx, cidr)
		if bridge != o.Bridge && isBridge(bridge) {
			f.RangeBridge = bridge
		}
	}
	f.Mounts = mountsUnder(o.RootDir)
	f.Cgroups = cgroupDirs(o.CgroupRoot)
	f.PodLogDirs = prefixed(o.PodLogsDir, SelectPodLogDirs(dirNames(o.PodLogsDir), f.PodUIDs))
	for _, d := range []string{o.DevicePluginDir, o.PodResourcesDir} {
		f.BerthFiles = append(f.BerthFiles, prefixed(d, SelectBerthFiles(dirNames(d)))...)
	}
	return f, nil
}

func socketAnswers(ctx context.Context, path string) bool {
	d := net.Dialer{Timeout: probeTimeout}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// containerdPID finds the live containerd running the config in dir: the
// recorded one, else the one the pid file names, else any in /proc.
func containerdPID(dir string) int {
	config := filepath.Join(dir, "config.toml")
	if rec, ok, _ := containerd.ReadRecord(dir, time.Now()); ok {
		if live, err := containerd.ProcessIdentity(rec.PID); err == nil && rec.Names(live) && runsConfig(rec.PID, config) {
			return rec.PID
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "containerd.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 && runsConfig(pid, config) {
			return pid
		}
	}
	for _, pid := range allPids() {
		if runsConfig(pid, config) {
			return pid
		}
	}
	return 0
}

func runsConfig(pid int, config string) bool {
	args := cmdline(pid)
	return len(args) > 0 && slices.Contains(args[1:], config) && alive(pid)
}

func cmdline(pid int) []string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

func alive(pid int) bool {
	_, err := containerd.ProcessIdentity(pid) // a zombie has none
	return err == nil
}

func allPids() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 1 && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sandboxIDs are the sandboxes berth's state records: the CRI plugin's
// metadata dirs, the containers host-local IPAM gave an address to, and
// those libcni cached an attachment of berth's network for with this
// root's IPAM dir. An entry that cannot be read is skipped; the others
// still count.
func sandboxIDs(o Options) []string {
	ids := dirNames(filepath.Join(o.RootDir, "containerd", "root", criSandboxesDir))
	leases, _ := cnigc.LeaseDir(filepath.Join(ipamDir(o), o.Network)).List()
	for _, l := range leases {
		if !slices.Contains(ids, l.ID) {
			ids = append(ids, l.ID)
		}
	}
	cached, _ := resultCache(o).Owned()
	for _, id := range cached {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// ipamDir is host-local's data dir in berth's conflist.
func ipamDir(o Options) string { return filepath.Join(o.RootDir, "cni", "ipam") }

func resultCache(o Options) cnigc.ResultCache {
	return cnigc.ResultCache{Dir: o.CNIResultsDir, Network: o.Network, IPAMDir: ipamDir(o)}
}

// cachedNetNS returns the network namespaces that the cached CNI results
// of berth's sandboxes name and that still exist: a sandbox whose
// processes are gone (containerd killed, its shim reaped) keeps its
// namespace, with the pod's veth, until someone removes it.
func cachedNetNS(o Options, ids []string) []string {
	if o.CNIResultsDir == "" {
		return nil
	}
	var out []string
	for _, id := range ids {
		for _, ns := range resultCache(o).NetNS(id) {
			if real, err := filepath.EvalSymlinks(ns); err == nil {
				out = append(out, real) // as podNetNS names them
			}
		}
	}
	return out
}

// cniCache returns the cached CNI results of berth's sandboxes, the
// loopback's among them; none without a results dir.
func cniCache(o Options, ids []string) []string {
	if o.CNIResultsDir == "" {
		return nil
	}
	var out []string
	for _, id := range ids {
		out = append(out, resultCache(o).Files(id)...)
	}
	return out
}

// processes are berth's pods' and shims' processes: in its kubepods
// cgroups (any hierarchy) or running from its containerd's dir (a shim's
// -address names the socket there). The containerd itself is not among
// them: it is stopped as itself.
func processes(o Options) []int {
	seen := map[int]bool{}
	kubepodsDirs, _ := cgroupDirsSplit(o.CgroupRoot)
	for _, dir := range kubepodsDirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, field := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(field); err == nil && pid > 1 && pid != os.Getpid() {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	cdDir := filepath.Join(o.RootDir, "containerd") + "/"
	config := filepath.Join(cdDir, "config.toml")
	for _, pid := range allPids() {
		args := cmdline(pid)
		if len(args) == 0 || slices.Contains(args, config) {
			continue
		}
		if slices.ContainsFunc(args[1:], func(a string) bool { return strings.HasPrefix(a, cdDir) }) {
			seen[pid] = true
		}
	}
	var out []int
	for pid := range seen {
		if alive(pid) {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// podNetNS are the named network namespaces that pids are in.
func podNetNS(pids []int) []string {
	inodes := map[uint64]bool{}
	for _, pid := range pids {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", strconv.Itoa(pid), "ns", "net"), &st) == nil {
			inodes[st.Ino] = true
		}
	}
	// The host's own namespace is never a pod's to remove (host-network pods).
	var self syscall.Stat_t
	if syscall.Stat("/proc/1/ns/net", &self) == nil {
		delete(inodes, self.Ino)
	}
	named := map[string]uint64{}
	for _, dir := range netnsDirs {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		for _, name := range dirNames(real) {
			var st syscall.Stat_t
			p := filepath.Join(real, name)
			if syscall.Stat(p, &st) == nil {
				named[p] = st.Ino
			}
		}
	}
	return MatchNetNS(named, inodes)
}

// berthRules reads what berth's sandboxes hold in the nat table; nothing
// where iptables is not installed.
func berthRules(ctx context.Context, network string, ids []string) []*cnigc.Held {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, iptablesTimeout)
	defer cancel()
	save, err := cnigc.IPTables{}.SaveNAT(ctx)
	if err != nil {
		return nil
	}
	nat, err := cnigc.ParseNAT(save)
	if err != nil {
		return nil
	}
	return SelectRules(nat, network, ids)
}

// confListNetwork is the bridge and pod CIDR of the conflist berth wrote
// into its root dir; "" for both where there is none (the host's CNI
// configuration, or nothing run) or it cannot be read.
func confListNetwork(o Options) (bridge, cidr string) {
	data, err := os.ReadFile(filepath.Join(o.RootDir, "cni", "net.d", network.ConfListName))
	if err != nil {
		return "", ""
	}
	var conf struct {
		Plugins []struct {
			Type, Bridge string
			IPAM         struct{ Ranges [][]struct{ Subnet string } }
		}
	}
	if json.Unmarshal(data, &conf) != nil {
		return "", ""
	}
	for _, p := range conf.Plugins {
		if p.Type == "bridge" && len(p.IPAM.Ranges) > 0 && len(p.IPAM.Ranges[0]) > 0 {
			return p.Bridge, p.IPAM.Ranges[0][0].Subnet
		}
	}
	return "", ""
}

// masquerade reads berth's masquerade chain of cidr, and its jumps, from
// the nat table; nothing where iptables is not installed.
func masquerade(ctx context.Context, cidr string) map[string][]string {
	ctx, cancel := context.WithTimeout(ctx, iptablesTimeout)
	defer cancel()
	save, err := cnigc.IPTables{}.SaveNAT(ctx)
	if err != nil {
		return nil
	}
	nat, err := cnigc.ParseNAT(save)
	if err != nil {
		return nil
	}
	if jumps := MasqueradeJumps(nat, []string{cidr}); len(jumps) > 0 {
		return jumps
	}
	return nil
}

func isBridge(name string) bool {
	if name == "" || strings.ContainsAny(name, "/.") {
		return false
	}
	_, err := os.Stat(filepath.Join("/sys/class/net", name, "bridge"))
	return err == nil
}

// mountsUnder lists the mount points below dir.
func mountsUnder(dir string) []string {
	mounts, _ := hostclean.MountsUnder(filepath.Clean(dir))
	return mounts
}

// cgroupDirs are the existing kubepods cgroup dirs under cgroupRoot, in
// every hierarchy, then the cgroup root's own dirs when it is not the
// hierarchy's root: berth creates it when missing.
func cgroupDirs(cgroupRoot string) []string {
	kp, roots := cgroupDirsSplit(cgroupRoot)
	return append(kp, roots...)
}

func cgroupDirsSplit(cgroupRoot string) (kubepodsDirs, rootDirs []string) {
	rel := filepath.Clean("/" + cgroupRoot)
	for _, m := range hostclean.CgroupMounts() {
		if d := filepath.Join(m, rel, kubepods); isDir(d) {
			kubepodsDirs = append(kubepodsDirs, d)
		}
		if d := filepath.Join(m, rel); d != m && isDir(d) {
			rootDirs = append(rootDirs, d)
		}
	}
	return kubepodsDirs, rootDirs
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func dirNames(dir string) []string {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func prefixed(dir string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, filepath.Join(dir, n))
	}
	return out
}
