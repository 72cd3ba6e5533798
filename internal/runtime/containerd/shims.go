package containerd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"k8s.io/apimachinery/pkg/util/sets"
)

// reapTimeout bounds listing containerd's containers to find orphaned shims.
const reapTimeout = 30 * time.Second

// shimProcess is a runtime v2 shim serving a containerd: its pid, the task
// (or, for a pod's shared shim, the sandbox) it was started for, and its
// containerd namespace.
type shimProcess struct {
	pid           int
	id, namespace string
}

// parseShim reads a process's argv as a shim of the containerd listening on
// address: containerd-shim-<runtime> -namespace NS -id ID -address ADDR.
func parseShim(pid int, argv []string, address string) (shimProcess, bool) {
	if len(argv) == 0 || !strings.HasPrefix(filepath.Base(argv[0]), "containerd-shim") {
		return shimProcess{}, false
	}
	flags := map[string]string{}
	for i := 1; i+1 < len(argv); i++ {
		if name, ok := strings.CutPrefix(argv[i], "-"); ok {
			flags[strings.TrimPrefix(name, "-")] = argv[i+1]
		}
	}
	if flags["address"] != address || flags["id"] == "" || flags["namespace"] == "" {
		return shimProcess{}, false
	}
	return shimProcess{pid: pid, id: flags["id"], namespace: flags["namespace"]}, true
}

// orphanShims returns the shims whose id names no container containerd
// knows in their namespace. containerd 1.6 forgets such a shim when it
// restarts: finding a task directory whose container is gone from its
// metadata (containerd was killed amid a container's creation or removal),
// it deletes the directory and leaves the process running, for ever.
// containerd records a container before it starts its shim and deletes the
// record only once the task and its shim are gone, so a live shim without
// a container is never one in use.
func orphanShims(shims []shimProcess, known map[string]sets.Set[string]) []shimProcess {
	var out []shimProcess
	for _, s := range shims {
		if !known[s.namespace].Has(s.id) {
			out = append(out, s)
		}
	}
	return out
}

// reapOrphanShims kills the shims of this containerd that it no longer
// knows, with their children (what was left of a container), and returns
// them. It runs once containerd answers, before berth makes any call to it.
func (m *Managed) reapOrphanShims(ctx context.Context) ([]shimProcess, error) {
	shims := shimsOf(m.layout.Socket)
	if len(shims) == 0 {
		return nil, nil
	}
	c, err := newClient(m.layout.Socket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	known := map[string]sets.Set[string]{}
	for _, s := range shims {
		if known[s.namespace] != nil {
			continue
		}
		cs, err := c.Containers(namespaces.WithNamespace(ctx, s.namespace))
		if err != nil {
			return nil, fmt.Errorf("listing containerd's containers in namespace %s: %w", s.namespace, err)
		}
		ids := sets.New[string]()
		for _, ctr := range cs {
			ids.Insert(ctr.ID())
		}
		known[s.namespace] = ids
	}
	orphans := orphanShims(shims, known)
	for _, s := range orphans {
		for _, child := range childrenOf(s.pid) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		_ = syscall.Kill(s.pid, syscall.SIGKILL)
	}
	return orphans, nil
}

// shimsOf lists the shim processes serving the containerd at address.
func shimsOf(address string) []shimProcess {
	var out []shimProcess
	for _, pid := range pids() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone meanwhile
		}
		argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if s, ok := parseShim(pid, argv, address); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b shimProcess) int { return a.pid - b.pid })
	return out
}

// childrenOf returns the processes whose parent is pid: a shim is the
// subreaper of its containers' processes.
func childrenOf(pid int) []int {
	var out []int
	for _, p := range pids() {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// pids lists the processes in /proc.
func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
