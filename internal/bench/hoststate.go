package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/hostclean"
)

// The upstream kubelet changes the host outside its root dir and cgroup
// root: iptables chains of its own (kubelet_network_linux.go) and kernel
// tunables (the container manager's setupKernelTunables). The harness
// records what was there before the kubelet started and undoes only what
// the kubelet added or changed.

// iptablesFamilies are the two iptables programs the kubelet drives (it
// sets up each family the host has).
var iptablesFamilies = []string{"iptables", "ip6tables"}

// kubeTables are the tables the kubelet makes chains in.
var kubeTables = []string{"filter", "nat", "mangle"}

// chainKey names one chain: family, table and name.
type chainKey struct{ family, table, chain string }

// iptablesSave runs <family>-save for table.
func iptablesSave(ctx context.Context, family, table string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, family+"-save", "-t", table).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s-save -t %s: %w: %s", family, table, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s-save -t %s: %w", family, table, err)
	}
	return string(out), nil
}

// kubeChains lists the KUBE- chains of every family and table; a family
// whose program is missing has none.
func kubeChains(ctx context.Context) (map[chainKey]bool, error) {
	out := map[chainKey]bool{}
	for _, family := range iptablesFamilies {
		if _, err := exec.LookPath(family + "-save"); err != nil {
			continue
		}
		for _, table := range kubeTables {
			save, err := iptablesSave(ctx, family, table)
			if err != nil {
				return nil, err
			}
			for _, c := range parseChains(save) {
				if strings.HasPrefix(c, "KUBE-") {
					out[chainKey{family, table, c}] = true
				}
			}
		}
	}
	return out, nil
}

// parseChains returns the chains an iptables-save table declares
// (":NAME POLICY [counters]").
func parseChains(save string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(save))
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), ":"); ok {
			if f := strings.Fields(name); len(f) > 0 {
				out = append(out, f[0])
			}
		}
	}
	return out
}

// deleteChainsScript is the iptables-restore --noflush script that removes
// chains of one table from save: first every rule that jumps to one of
// them (the kubelet prepends "-j KUBE-FIREWALL" to INPUT and OUTPUT), then
// their own rules, then the chains. "" when none of them is there.
func deleteChainsScript(table, save string, chains []string) string {
	present := parseChains(save)
	var del []string
	for _, c := range chains {
		if slices.Contains(present, c) {
			del = append(del, c)
		}
	}
	if len(del) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	sc := bufio.NewScanner(strings.NewReader(save))
	for sc.Scan() {
		rule, ok := strings.CutPrefix(sc.Text(), "-A ")
		if !ok {
			continue
		}
		f := strings.Fields(rule)
		// Rules inside a deleted chain go with its flush.
		if len(f) == 0 || slices.Contains(del, f[0]) {
			continue
		}
		if i := slices.Index(f, "-j"); i >= 0 && i+1 < len(f) && slices.Contains(del, f[i+1]) {
			fmt.Fprintf(&b, "-D %s\n", rule)
		}
	}
	for _, c := range del {
		fmt.Fprintf(&b, "-F %s\n", c)
	}
	for _, c := range del {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// kubeletChains are the chains the kubelet makes (v1.36's
// kubelet_network_linux.go): the iptables mode hint, the firewall against
// martian localhost packets and the canary it watches for a flush.
var kubeletChains = map[string]bool{"KUBE-IPTABLES-HINT": true, "KUBE-FIREWALL": true, "KUBE-KUBELET-CANARY": true}

// kubeletChainsAdded are the kubelet's chains in now and not in before, by
// family and table.
func kubeletChainsAdded(before, now map[chainKey]bool) map[[2]string][]string {
	added := map[[2]string][]string{} // family, table -> chains
	for k := range now {
		if !before[k] && kubeletChains[k.chain] {
			added[[2]string{k.family, k.table}] = append(added[[2]string{k.family, k.table}], k.chain)
		}
	}
	for _, chains := range added {
		slices.Sort(chains)
	}
	return added
}

// removeChainsAdded deletes the kubelet's KUBE- chains there now that were
// not in before: those the kubelet under test made. A chain that was there
// before (another kubelet's) is left alone, with its rules, and so is any
// other KUBE- chain (a kube-proxy of another test may make its own while
// the kubelet runs).
func removeChainsAdded(ctx context.Context, before map[chainKey]bool) error {
	now, err := kubeChains(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for ft, chains := range kubeletChainsAdded(before, now) {
		save, err := iptablesSave(ctx, ft[0], ft[1])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		script := deleteChainsScript(ft[1], save, chains)
		if script == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(rctx, ft[0]+"-restore", "-w", "5", "--noflush")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s-restore (remove %v from %s): %w: %s", ft[0], chains, ft[1], err, strings.TrimSpace(string(out))))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// kubeletSysctls are the kernel tunables the kubelet sets at start-up
// when protectKernelDefaults is off (and refuses to start with when it is
// on and they differ), as /proc/sys paths.
var kubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// readSysctls returns the values of kubeletSysctls now.
func readSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, k := range kubeletSysctls {
		data, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", k, err)
		}
		out[k] = strings.TrimSpace(string(data))
	}
	return out, nil
}

// restoreSysctls writes back the values before holds where they differ
// now.
func restoreSysctls(before map[string]string) error {
	var errs []error
	for k, v := range before {
		p := filepath.Join("/proc/sys", k)
		data, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(data)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s to %s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// makeCgroupRoot creates the cgroup root in every hierarchy: the kubelet
// refuses a --cgroup-root that does not exist, and creates its kubepods
// tree below it. A new v1 cpuset cgroup has no CPUs or memory nodes until
// given its parent's.
func makeCgroupRoot(root string) error {
	for _, m := range hostclean.CgroupMounts() {
		dir := filepath.Join(m, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			data, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if errors.Is(err, os.ErrNotExist) {
				continue // not the cpuset hierarchy
			}
			if err != nil {
				return fmt.Errorf("read %s of %s: %w", f, filepath.Dir(dir), err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				return fmt.Errorf("set %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// The kubelet has two host paths that no flag or config moves under its
// root dir: its device plugin registration socket
// (/var/lib/kubelet/device-plugins/kubelet.sock, whose dir it empties of
// every socket at start) and the /var/log/containers symlinks to its
// containers' logs.
const (
	kubeletDevicePluginDir = "/var/lib/kubelet/device-plugins"
	containerLogLinksDir   = "/var/log/containers"
)

// fixedPaths records which of the kubelet's fixed dirs the host had before
// it started, deepest last.
type fixedPaths struct{ existed map[string]bool }

func fixedPathDirs() []string {
	return []string{filepath.Dir(kubeletDevicePluginDir), kubeletDevicePluginDir, containerLogLinksDir}
}

// recordFixedPaths notes the dirs there now and refuses a device plugin
// dir with anything in it: another kubelet's socket or a device plugin's,
// which the kubelet under test would remove.
func recordFixedPaths() (fixedPaths, error) {
	fp := fixedPaths{existed: map[string]bool{}}
	for _, d := range fixedPathDirs() {
		_, err := os.Stat(d)
		fp.existed[d] = err == nil
	}
	entries, err := os.ReadDir(kubeletDevicePluginDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fp, err
	}
	if len(entries) > 0 {
		return fp, fmt.Errorf("%s holds %s and more: another kubelet or device plugin uses it, and the kubelet under test would remove its sockets", kubeletDevicePluginDir, entries[0].Name())
	}
	return fp, nil
}

// remove deletes the kubelet's socket, the log links that point under
// root, and the dirs the kubelet created, if nothing else is in them.
func (fp fixedPaths) remove(root string) error {
	var errs []error
	if err := os.Remove(filepath.Join(kubeletDevicePluginDir, "kubelet.sock")); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	links, err := os.ReadDir(containerLogLinksDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, l := range links {
		p := filepath.Join(containerLogLinksDir, l.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, root+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	dirs := fixedPathDirs()
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) }) // deepest first
	for _, d := range dirs {
		if fp.existed[d] {
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s, which the kubelet under test created: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
