// Package reset removes everything a berth left on a host, as `kubeadm
// reset` does for a kubeadm node: the pods it made, its managed
// containerd, its cgroups, CNI bridge, network namespaces, iptables rules,
// mounts, the pods' logs and its state under the root dir. It touches
// nothing it cannot tie to that berth: names it knows from berth's
// configuration and its state, never guesses.
//
// What to do is decided by pure functions over Facts (Plan, and the
// selections in select.go); Inspect gathers the facts and Apply does the
// steps.
package reset

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-dev/berth/internal/cnigc"
	"github.com/berth-dev/berth/internal/quarantine"
)

// Options are what reset needs of berth's configuration.
type Options struct {
	RootDir    string
	PodLogsDir string
	// CgroupRoot holds berth's kubepods cgroup ("/" by default).
	CgroupRoot string
	// Bridge is the CNI bridge device (cniBridge), Network the CNI network
	// name berth writes into its conflist and its iptables comments.
	Bridge, Network string
	// ManifestDir, ImagesDir, DevicePluginDir and PodResourcesDir may lie
	// inside RootDir: the operator's manifests and image tarballs stay,
	// and only berth's own sockets and checkpoint go from the others.
	ManifestDir, ImagesDir, DevicePluginDir, PodResourcesDir string
	// RuntimeEndpoint is set when berth used a runtime it does not manage:
	// only its own sandboxes (container.LabelManagedBy) are removed there.
	RuntimeEndpoint string
	// CNIResultsDir is libcni's result cache (cnigc.DefaultResultsDir),
	// where the managed containerd caches each attachment of a sandbox.
	CNIResultsDir string
}

// stateNames are the entries berth creates in its root dir. A copy that
// internal/quarantine set aside counts as the entry it was.
var stateNames = []string{
	"berth.sock",    // the admin socket (adminapi.SocketName)
	"containerd",    // the managed containerd
	"cni",           // conflist and host-local IPAM
	"local-pods",    // applied pods (podsource.StoreDirName)
	"terminal-pods", // records of evicted pods
	"probes",        // probe results
	"resize",        // in-place resizes' allocations (resize.CheckpointName)
	"pods",          // volumes and /etc/hosts (volume manager)
	"pki",           // the secure API's self-signed certificate
	"seccomp",       // seccomp profiles (kuberuntime)
}

// berthFiles are the files berth writes into the device plugin and pod
// resources dirs, which are the kubelet's and may hold others' files.
var berthFiles = []string{"kubelet.sock", "kubelet_internal_checkpoint"}

// Facts are what Inspect found on the host.
type Facts struct {
	// AdminSocketAnswers: a berth runs on this root dir.
	AdminSocketAnswers bool
	// State are the paths of berth's entries in the root dir; Foreign the
	// other entries, left alone (the operator's manifests and images
	// among them).
	State, Foreign []string
	// ContainerdPID is the live containerd running this root's config;
	// ContainerdState that its state dir exists (one can be started on it
	// to stop the pods through the CRI).
	ContainerdPID   int
	ContainerdState bool
	// SandboxIDs are berth's sandboxes as its state records them (CRI
	// metadata, host-local IPAM), for the iptables rules naming them.
	SandboxIDs []string
	// PodUIDs are the pods berth's state knows (pods/<uid>).
	PodUIDs []string
	// Processes are those of berth's pods and shims: in its kubepods
	// cgroups or running from its containerd's dir.
	Processes []int
	// NetNS are the network namespaces of those processes, by path.
	NetNS []string
	// Rules are the iptables rules and chains of berth's sandboxes on its
	// network, by sandbox.
	Rules []*cnigc.Held
	// CNICache are libcni's cached results of berth's sandboxes, by path.
	CNICache []string
	// Masquerade are the POSTROUTING jumps to berth's masquerade chain of
	// each pod CIDR of its conflist whose chain is in the nat table.
	Masquerade map[string][]string
	// Bridge: the configured bridge exists and is a bridge. RangeBridge is
	// the bridge berth's conflist names when it is another one (a pod CIDR
	// that changed got a bridge of its own) and exists.
	Bridge      bool
	RangeBridge string
	// Mounts under the root dir; Cgroups are the kubepods cgroup dirs (and
	// the cgroup root's, when it is not the hierarchy's root) that exist.
	Mounts, Cgroups []string
	// PodLogDirs are the log dirs of berth's pods; BerthFiles its files in
	// the device plugin and pod resources dirs.
	PodLogDirs, BerthFiles []string
}

// StepKind is one kind of work, in the order Apply does it.
type StepKind int

const (
	StopPods StepKind = iota
	StopContainerd
	KillProcesses
	RemoveNetNS
	RemoveRules
	RemoveMasquerade
	RemoveCNICache
	DeleteBridge
	Unmount
	RemoveCgroups
	RemovePodLogs
	RemoveState
)

// Step is one thing reset does, described for the operator.
type Step struct {
	Kind StepKind
	What string
}

// RunningError is Plan's refusal while a berth runs on the root dir.
type RunningError struct{ RootDir string }

func (e *RunningError) Error() string {
	return fmt.Sprintf("a berth is running on %s (its admin socket %s answers): stop it first",
		e.RootDir, filepath.Join(e.RootDir, "berth.sock"))
}

// Plan decides what reset does about f. Nothing, when berth left nothing
// there; an error while a berth runs on the root dir. Only what is under
// the root dir says that berth ran: without it, the bridge, the cgroups
// and the processes in them are not berth's to remove, for another agent
// may own them (the kubelet's pods live in /kubepods too).
func Plan(o Options, f Facts) ([]Step, error) {
	if f.AdminSocketAnswers {
		return nil, &RunningError{RootDir: o.RootDir}
	}
	ran := len(f.State) > 0 || f.ContainerdPID > 0 || len(f.Mounts) > 0
	if !ran {
		return nil, nil
	}
	var steps []Step
	add := func(k StepKind, format string, args ...any) {
		steps = append(steps, Step{Kind: k, What: fmt.Sprintf(format, args...)})
	}
	switch {
	case o.RuntimeEndpoint != "":
		add(StopPods, "stop and remove berth's pods in the runtime at %s", o.RuntimeEndpoint)
	case f.ContainerdPID > 0 || f.ContainerdState:
		add(StopPods, "stop and remove every pod of the managed containerd (starting it on its state if it is not running)")
	}
	if o.RuntimeEndpoint == "" && (f.ContainerdPID > 0 || f.ContainerdState) {
		add(StopContainerd, "stop the managed containerd")
	}
	if len(f.Processes) > 0 {
		add(KillProcesses, "kill what still runs of berth's pods and shims (%d processes now)", len(f.Processes))
	}
	if len(f.NetNS) > 0 {
		add(RemoveNetNS, "remove the network namespaces of berth's pods: %s", strings.Join(f.NetNS, ", "))
	}
	if len(f.Rules) > 0 {
		add(RemoveRules, "delete %d iptables rules and chains of CNI network %q that name berth's pods", ruleCount(f.Rules), o.Network)
	}
	if len(f.Masquerade) > 0 {
		add(RemoveMasquerade, "delete berth's masquerade chains (and their POSTROUTING jumps) of pod CIDR %s",
			strings.Join(slices.Sorted(maps.Keys(f.Masquerade)), ", "))
	}
	if len(f.CNICache) > 0 {
		add(RemoveCNICache, "remove %d cached CNI results of berth's pods from %s", len(f.CNICache), o.CNIResultsDir)
	}
	var bridges []string
	if f.Bridge {
		bridges = append(bridges, o.Bridge)
	}
	if f.RangeBridge != "" {
		bridges = append(bridges, f.RangeBridge)
	}
	if len(bridges) > 0 {
		add(DeleteBridge, "delete the bridge %s", strings.Join(bridges, " and the bridge "))
	}
	if len(f.Mounts) > 0 {
		add(Unmount, "unmount %d mounts under %s", len(f.Mounts), o.RootDir)
	}
	if len(f.Cgroups) > 0 {
		add(RemoveCgroups, "remove the kubepods cgroups under cgroup root %s (%d dirs in all hierarchies)", o.CgroupRoot, len(f.Cgroups))
	}
	if len(f.PodLogDirs) > 0 {
		add(RemovePodLogs, "remove %d pod log dirs from %s", len(f.PodLogDirs), o.PodLogsDir)
	}
	if len(f.State) > 0 || len(f.BerthFiles) > 0 {
		add(RemoveState, "remove berth's state: %s", strings.Join(slices.Concat(f.State, f.BerthFiles), ", "))
	}
	return steps, nil
}

// ClassifyRootEntries splits the names found in the root dir into berth's
// state and the rest. The configured dirs that lie in the root dir (the
// manifests, images, device plugin and pod resources dirs) are never state:
// the first two are the operator's, the others get file by file treatment.
func ClassifyRootEntries(o Options, names []string) (state, foreign []string) {
	keep := map[string]bool{}
	for _, d := range []string{o.ManifestDir, o.ImagesDir, o.DevicePluginDir, o.PodResourcesDir, o.PodLogsDir} {
		if rel, ok := childOf(o.RootDir, d); ok {
			keep[rel] = true
		}
	}
	for _, name := range names {
		base := name
		if orig, _, ok := quarantine.Parse(name); ok {
			base = orig
		}
		if !keep[name] && slices.Contains(stateNames, base) {
			state = append(state, filepath.Join(o.RootDir, name))
		} else {
			foreign = append(foreign, filepath.Join(o.RootDir, name))
		}
	}
	return state, foreign
}

// childOf returns the first component of dir below root, if dir is root's
// descendant.
func childOf(root, dir string) (string, bool) {
	if dir == "" {
		return "", false
	}
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(dir))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	first, _, _ := strings.Cut(rel, "/")
	return first, true
}

// SelectPodLogDirs picks, among the names in the pod logs dir, those of
// berth's pods: the kubelet's layout <namespace>_<name>_<uid>, with a uid
// berth knows. A uid is unique, so a dir of another agent's pod never
// matches.
func SelectPodLogDirs(names, uids []string) []string {
	known := map[string]bool{}
	for _, u := range uids {
		if u != "" {
			known[u] = true
		}
	}
	var out []string
	for _, name := range names {
		parts := strings.Split(name, "_")
		if len(parts) == 3 && parts[0] != "" && parts[1] != "" && known[parts[2]] {
			out = append(out, name)
		}
	}
	return out
}

// SelectBerthFiles picks berth's own files among a kubelet dir's names.
func SelectBerthFiles(names []string) []string {
	var out []string
	for _, name := range names {
		base := name
		if orig, _, ok := quarantine.Parse(name); ok {
			base = orig
		}
		if slices.Contains(berthFiles, base) {
			out = append(out, name)
		}
	}
	return out
}

// MatchNetNS picks the named network namespaces (path to its nsfs inode)
// that berth's processes are in (their inodes). Namespaces are compared by
// inode, so a namespace of another runtime's pod is never picked.
func MatchNetNS(named map[string]uint64, ofProcesses map[uint64]bool) []string {
	var out []string
	for path, ino := range named {
		if ino != 0 && ofProcesses[ino] {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}
